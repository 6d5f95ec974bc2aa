"""Airflow triggers of this provider (deferrable sensors): poll a Delta table's log off the worker."""
