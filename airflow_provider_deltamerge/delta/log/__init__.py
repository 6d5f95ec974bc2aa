"""The table as its Delta log states it (no pyspark): snapshots, protocol and features, and the commits read
back. The Airflow side imports only this group and ``format/``."""
