"""Delta's format rules over plain values (no table I/O, no pyspark): column mapping, deletion vectors, file
statistics, and this provider's provenance record."""
