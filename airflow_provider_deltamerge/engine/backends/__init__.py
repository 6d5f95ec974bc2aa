"""Other ways to run a merge than the engine: Delta Lake's own runtime (delta-spark)."""
