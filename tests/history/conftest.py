"""The history depth reuses the e2e depth's migrated Airflow home and PostgreSQL server (one ``airflow db
migrate`` of each per session)."""

from __future__ import annotations

from tests.e2e.conftest import airflow_env, postgres

__all__ = ["airflow_env", "postgres"]
