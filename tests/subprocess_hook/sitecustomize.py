"""Gives merges in the tests' subprocesses (spark-submit jobs, Airflow tasks) the per-commit stats check and
the tests' fault injection.

tests/conftest.py puts this folder on PYTHONPATH, so every Python process the test session starts imports
this module at start-up. It only registers an import hook: when a process imports the commit module, its
``_try_commit`` is wrapped with the same check as in-process tests (tests/file_stats.py), and the commit and
merge modules get the faults a test may switch on by environment variable (tests/faults.py). Nothing here is
part of the package: product code reads no test switch.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

COMMIT_MODULE = "airflow_provider_deltamerge.delta.commit.transaction"
MERGE_MODULE = "airflow_provider_deltamerge.engine.merge"
REPOSITORY = str(Path(__file__).resolve().parents[2])


def _tests_importable() -> None:
    if REPOSITORY not in sys.path:
        sys.path.append(REPOSITORY)  # for ``tests.*``; appended, so installed packages win


class _PatchingLoader(importlib.abc.Loader):
    def __init__(self, real: importlib.abc.Loader) -> None:
        self.real = real

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType | None:
        return self.real.create_module(spec)

    def exec_module(self, module: ModuleType) -> None:
        self.real.exec_module(module)
        _tests_importable()
        self.patch(module)

    def patch(self, module: ModuleType) -> None:
        raise NotImplementedError


class _CheckedCommitLoader(_PatchingLoader):
    def patch(self, module: ModuleType) -> None:
        from tests.faults import inject_into_commit
        from tests.file_stats import check_actions

        inject_into_commit(module)
        real = getattr(module, "_try_commit")  # noqa: B009 (a module attribute mypy cannot see)

        def checked(base: Any, actions: Any, store: Any) -> bool:
            check_actions(base, actions)
            return bool(real(base, actions, store))

        setattr(module, "_try_commit", checked)  # noqa: B010


class _FaultyMergeLoader(_PatchingLoader):
    def patch(self, module: ModuleType) -> None:
        from tests.faults import inject_into_merge

        inject_into_merge(module)


LOADERS: dict[str, type[_PatchingLoader]] = {
    COMMIT_MODULE: _CheckedCommitLoader,
    MERGE_MODULE: _FaultyMergeLoader,
}


class _Finder(importlib.abc.MetaPathFinder):
    def find_spec(self, name: str, path: Any, target: Any = None) -> importlib.machinery.ModuleSpec | None:
        loader = LOADERS.get(name)
        if loader is None:
            return None
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is None or spec.loader is None:
            return None
        spec.loader = loader(spec.loader)
        return spec


sys.meta_path.insert(0, _Finder())
