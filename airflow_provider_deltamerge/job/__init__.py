"""The spark-submit entry point of a merge (``job/main.py``); this package itself imports no Spark."""
