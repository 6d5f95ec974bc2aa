"""The merge engine (Spark side): resolve, plan, execute, commit. Entry point: ``run_merge``.

``run_merge`` is loaded on first use, so importing a module of the engine does not load the whole merge.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from airflow_provider_deltamerge.engine.merge import MergeResult, run_merge

__all__ = ["MergeResult", "run_merge"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        from airflow_provider_deltamerge.engine import merge

        return getattr(merge, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
