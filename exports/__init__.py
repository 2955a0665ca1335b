"""Exports of the warehouse's marts in other tools' formats (FOCUS 1.3 allocation)."""
