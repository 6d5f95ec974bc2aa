"""The history depth reuses the e2e depth's migrated Airflow home (one ``airflow db migrate`` per session)."""

from __future__ import annotations

from tests.e2e.conftest import airflow_env

__all__ = ["airflow_env"]
