"""Jinja rendering of the merge's SQL, every template value bound by where it lands (``spec.bound_values``).

The DAG's template text is trusted; the values it prints (``{{ params.region }}``, ``{{ dag_run.conf.x }}``)
are not: a user who may trigger the DAG sets them. Each printed value becomes a marker with a fresh nonce,
and ``bind_values`` puts the value in the marker's place, quoted for the token around it.
"""

from __future__ import annotations

import re
import secrets
from collections.abc import Mapping
from typing import Any

import jinja2

from airflow_provider_deltamerge.exceptions import MergeSpecError
from airflow_provider_deltamerge.spec.bound_values import (
    UNSAFE_TEMPLATE_VALUE,
    SqlText,
    bind_values,
    sql_identifier,
    sql_literal,
)
from airflow_provider_deltamerge.spec.locations import VALUE_MARK

SQL_FILTERS = {"sql_literal": sql_literal, "sql_identifier": sql_identifier}


def with_sql_filters(env: jinja2.Environment) -> jinja2.Environment:
    """``env`` with ``| sql_literal`` and ``| sql_identifier`` added (the DAG's own filters kept)."""
    overlay = env.overlay(cache_size=0)
    overlay.filters = {**env.filters, **SQL_FILTERS}
    return overlay


def render_sql(text: str, context: Mapping[str, Any], env: jinja2.Environment, *, where: str) -> str:
    """Render ``text`` (a template, or a ``.sql`` file name) with each printed value bound as data.

    Raises:
        MergeSpecError: UNSAFE_TEMPLATE_VALUE when a value would stand where it could change the SQL.
    """
    nonce = secrets.token_hex(8)
    values: list[str] = []

    def mark(value: Any) -> str:
        if isinstance(value, SqlText):
            return value
        values.append(str(value))
        return f"__deltamerge_value_{nonce}_{len(values) - 1}__"

    marked = _render(text, context, with_sql_filters(env).overlay(finalize=mark, cache_size=0))
    bound = bind_values(marked, values, re.compile(rf"__deltamerge_value_{nonce}_(\d+)__"), where=where)
    if f"__deltamerge_value_{nonce}_" in bound.lower():
        raise MergeSpecError(
            f"A template value in {where} was changed after it was printed (a {{% filter %}} block?), so it "
            "cannot be bound safely. Apply filters inside {{ ... }} instead.",
            error_class=UNSAFE_TEMPLATE_VALUE,
        )
    return bound


def render_written(text: str, context: Mapping[str, Any], env: jinja2.Environment) -> str:
    """``text`` (a template, or a ``.sql`` file name) as the DAG wrote it: every printed value, from run conf,
    params or anywhere else, replaced by ``VALUE_MARK`` (``| sql_identifier`` output too), the rest as it
    renders. ``spec.locations.WrittenPlaces`` reads the lake roots the DAG wrote from it."""
    return _render(text, context, with_sql_filters(env).overlay(finalize=lambda _: VALUE_MARK, cache_size=0))


def _render(text: str, context: Mapping[str, Any], env: jinja2.Environment) -> str:
    template = env.get_template(text) if text.endswith(".sql") else env.from_string(text)
    # Joined by hand: a native environment's render would literal_eval the SQL text into a Python value.
    return "".join(str(part) for part in template.root_render_func(template.new_context(dict(context))))
