"""The Spark side of table access: reading chosen files into Spark and writing new ones with Delta's stats
and change data. The only group of ``delta/`` that imports pyspark."""
