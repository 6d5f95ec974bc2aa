"""The merge source: loaded from a path, table or query (Delta paths in queries too), and
materialized when Delta would."""
