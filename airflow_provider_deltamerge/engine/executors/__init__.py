"""Merge executors, one per file, after Delta's own: insert-only, matched-only and classic."""
