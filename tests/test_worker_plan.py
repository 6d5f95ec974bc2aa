"""make test's units of work (tests/worker_plan.py) match the fixtures the tests use: a test of a server
fixture or of a module-scoped one that left its unit would start the server or run the fixture twice."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.worker_plan import (
    LONGEST_FIRST,
    SERVER_FIXTURES,
    SERVER_MODULES,
    SERVERS,
    SHARED_FIXTURE_MODULES,
    SHARED_SCOPES,
    unit_of,
)

ROOT = Path(__file__).resolve().parents[1]


def test_every_listed_module_exists():
    for module in SERVER_MODULES | SHARED_FIXTURE_MODULES | set(LONGEST_FIRST):
        assert (ROOT / module).is_file(), module


def test_tests_of_a_server_or_a_module_fixture_run_in_their_modules_unit(request: pytest.FixtureRequest):
    # The session's collection: every test of the run (all of them under make test).
    for item in request.session.items:
        if not isinstance(item, pytest.Function):
            continue
        module = item.nodeid.split("::", 1)[0]
        scopes = {d.scope for defs in item._fixtureinfo.name2fixturedefs.values() for d in defs}
        if SERVER_FIXTURES & set(item.fixturenames):
            assert unit_of(item.nodeid) == SERVERS, f"{module} uses a server: list it in SERVER_MODULES"
        elif scopes & SHARED_SCOPES:
            assert unit_of(item.nodeid) == module, f"{module} has a module-scoped fixture: list it"
    assert unit_of("tests/test_provider.py::test_x") == "tests/test_provider.py::test_x"
