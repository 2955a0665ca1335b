"""``make bench``: times and peak memory of each stage at the scales of DESIGN §6."""
