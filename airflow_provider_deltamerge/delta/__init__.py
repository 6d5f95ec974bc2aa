"""Delta table access, in four groups by job; a module imports its own group and the groups above it here.

* ``format/``: Delta's rules over plain values: column mapping, deletion vectors, file statistics, and the
  provenance record this provider writes into commitInfo. No I/O of a table, no pyspark.
* ``log/``: the table as its log states it: the snapshot, protocol and table features, row tracking, and
  the commits read back (merge commits, their metrics and partitions, a run's idempotency). No pyspark: the
  Airflow side reads the log through this group.
* ``commit/``: the commit: its actions, the log store's put-if-absent, the conflict check, checkpoints and
  the deletion vectors written just before it. No pyspark.
* ``files/``: the Spark side: reading chosen files into Spark and writing new ones with their stats and
  change data. The only group that imports pyspark.
"""
