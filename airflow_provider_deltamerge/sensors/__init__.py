"""Airflow sensors of this provider: wait for commits in a Delta table's log."""
