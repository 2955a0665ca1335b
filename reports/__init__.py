"""Scheduled reports: HTML with charts and CSV attachments per audience, budget alerts, delivery."""
