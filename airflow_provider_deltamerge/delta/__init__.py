"""Delta table access: snapshots, reading chosen files into Spark, writing files with stats, the commit.

Modules that need Spark (``reader``, ``writer``) are imported by name, never from here, so the Airflow side
can read the log (``snapshot``, ``history``) without pyspark installed.
"""
