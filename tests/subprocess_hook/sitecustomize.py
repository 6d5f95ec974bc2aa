"""Gives merges in the tests' subprocesses (spark-submit jobs, Airflow tasks) the per-commit stats check.

tests/conftest.py puts this folder on PYTHONPATH, so every Python process the test session starts imports
this module at start-up. It only registers an import hook: when a process imports the commit module, its
``_try_commit`` is wrapped with the same check as in-process tests (tests/file_stats.py). Nothing here is
part of the package: product code reads no test switch.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

COMMIT_MODULE = "airflow_provider_deltamerge.delta.commit"
REPOSITORY = str(Path(__file__).resolve().parents[2])


class _CheckedCommitLoader(importlib.abc.Loader):
    def __init__(self, real: importlib.abc.Loader) -> None:
        self.real = real

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType | None:
        return self.real.create_module(spec)

    def exec_module(self, module: ModuleType) -> None:
        self.real.exec_module(module)
        if REPOSITORY not in sys.path:
            sys.path.append(REPOSITORY)  # for ``tests.file_stats``; appended, so installed packages win
        from tests.file_stats import check_actions

        real = getattr(module, "_try_commit")  # noqa: B009 (a module attribute mypy cannot see)

        def checked(base: Any, actions: Any, store: Any) -> bool:
            check_actions(base, actions)
            return bool(real(base, actions, store))

        setattr(module, "_try_commit", checked)  # noqa: B010


class _CommitFinder(importlib.abc.MetaPathFinder):
    def find_spec(self, name: str, path: Any, target: Any = None) -> importlib.machinery.ModuleSpec | None:
        if name != COMMIT_MODULE:
            return None
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is None or spec.loader is None:
            return None
        spec.loader = _CheckedCommitLoader(spec.loader)
        return spec


sys.meta_path.insert(0, _CommitFinder())
