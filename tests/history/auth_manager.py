"""A deployment's auth manager for the history page's test: Airflow's simple auth manager, with one rule of
its own, that user ``NO_ASSETS_USER`` may read DAGs but no Asset (the simple manager's roles cannot say so).

The API server loads it as any deployment's auth manager (``[core] auth_manager``); the page under test asks
it, through Airflow's own checks, whether the user may read a table's Asset.
"""

from __future__ import annotations

from typing import Any

from airflow.api_fastapi.auth.managers.simple.simple_auth_manager import SimpleAuthManager

NO_ASSETS_USER = "no_assets"


class NoAssetsForOneUser(SimpleAuthManager):
    """The simple auth manager, but ``NO_ASSETS_USER`` may read no Asset."""

    def is_authorized_asset(self, *, method: Any, user: Any, details: Any = None) -> bool:
        if user.get_name() == NO_ASSETS_USER:
            return False
        return super().is_authorized_asset(method=method, user=user, details=details)
