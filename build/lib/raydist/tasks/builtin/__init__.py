"""Data files of the built-in instance set (``instances.jsonl``); no code."""
