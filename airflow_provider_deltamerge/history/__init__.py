"""A Delta table's merge history in the Airflow UI: the log read page by page, and the plugin showing it."""
