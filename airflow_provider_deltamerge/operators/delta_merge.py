"""``DeltaMergeOperator``: a Delta Lake MERGE declared in a DAG, run by a Spark job, metrics to XCom.

Every DAG parse imports this module, so at its top it imports only what declaring and checking a merge needs
(the spec, sqlglot to parse its SQL). The hook, Spark's provider, ``deltalake`` and ``pyarrow`` (seconds of
imports) are imported by the methods that run the task: ``_merge`` and the log reads after it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping, Sequence
from functools import partial
from typing import TYPE_CHECKING, Any, ClassVar, Literal

from airflow.providers.common.compat.sdk import AirflowException, AirflowFailException, BaseOperator
from airflow.sdk import Asset, AssetAlias

from airflow_provider_deltamerge.delta.log.commit_match import MetricBounds
from airflow_provider_deltamerge.exceptions import DeltaMergeError, MergeSpecError, is_final
from airflow_provider_deltamerge.metrics import (
    DRY_RUN,
    NUM_TARGET_FILES_ADDED,
    NUM_TARGET_FILES_REMOVED,
    SUMMARY,
    TABLE_VERSION,
    readable,
)
from airflow_provider_deltamerge.operators.assets import (
    default_alias_name,
    event_extra,
    is_templated,
    source_asset,
    target_asset,
)
from airflow_provider_deltamerge.operators.lineage import (
    injects_by_default,
    lineage_is_sent,
    merge_lineage,
    openlineage_spark_conf,
)
from airflow_provider_deltamerge.operators.links import MergeHistoryLink, SparkApplicationLink
from airflow_provider_deltamerge.operators.rerun import RerunPolicy, TrySeries, replays, rerun_policy
from airflow_provider_deltamerge.operators.sql_templates import render_sql, render_written, with_sql_filters
from airflow_provider_deltamerge.operators.templated_conf import check_templated_conf, templated_keys
from airflow_provider_deltamerge.spec import (
    MergeClause,
    MergeSource,
    MergeSpec,
    PathSource,
    QuerySource,
    TableSource,
    parse_merge_sql,
    to_merge_sql,
)
from airflow_provider_deltamerge.spec.json_form import spec_from_dict, spec_to_dict, spec_to_json
from airflow_provider_deltamerge.spec.locations import ANY_PATH, AnyPath, WrittenPlaces, check_spec_locations
from airflow_provider_deltamerge.spec.preflight import run_preflight
from airflow_provider_deltamerge.spec.sql_parse import is_path_like
from airflow_provider_deltamerge.spec.validation import check_clauses

if TYPE_CHECKING:
    import jinja2
    from airflow.providers.common.compat.sdk import Context
    from airflow.providers.openlineage.extractors import OperatorLineage

    from airflow_provider_deltamerge.delta.log.commit_partitions import Partition
    from airflow_provider_deltamerge.hooks.delta_merge import DeltaMergeHook

BACKENDS = ("auto", "engine", "delta-spark")
MATERIALIZE_SOURCE_MODES = ("auto", "all", "none")
# Delta's conf; the job's engine reads it from its SparkSession as Delta's MERGE does.
MATERIALIZE_SOURCE_CONF = "spark.databricks.delta.merge.materializeSource"
# Fields holding SQL text: their template values are bound as data (operators/sql_templates.py).
SQL_TEMPLATE_FIELDS = ("condition", "merge_sql")


def _for_airflow(error: DeltaMergeError) -> Exception:
    """``error`` as the task raises it: a final one as Airflow's fail-fast exception, so no retry is spent
    on it (its Delta class stays in the message); a transient one as it is, for Airflow's retries."""
    return AirflowFailException(str(error)) if is_final(error) else error


class DeltaMergeOperator(BaseOperator):
    """Merge a source into a Delta table with a Spark job and return Delta's merge metrics.

    Give the merge either as Python objects (``target``, ``source``, ``condition``, ``clauses``) or as one
    ``MERGE INTO`` statement (``merge_sql``, inline or a ``.sql`` file rendered as a template).

    :param target: Delta table path or URI, or a table name in the Spark session's catalog (``shop.orders``),
        which the job looks up. (templated)
    :param source: Path of the source files (read with ``source_format``), or a ``PathSource``,
        ``TableSource`` or ``QuerySource``. (templated)
    :param condition: The ON condition, Spark SQL over the aliases, e.g. ``t.id = s.id``. (templated)
    :param clauses: WHEN clauses, in evaluation order (``update_all()``, ``insert_all()``, ...); their
        conditions and expressions are templated.
    :param merge_sql: A ``MERGE INTO`` statement instead of the four arguments above. (templated)
    :param source_format: Reader format of a string ``source``: parquet, delta, csv, json or orc.
    :param source_options: Spark reader options of a string ``source``. (templated)
    :param target_alias: Alias of the target in conditions and expressions.
    :param source_alias: Alias of the source in conditions and expressions.
    :param schema_evolution: Let the merge add the source columns its UPDATE and INSERT clauses assign (and
        new struct fields), as Delta's ``WITH SCHEMA EVOLUTION`` does.
    :param materialize_source: ``auto`` (default: as Delta decides), ``all`` or ``none``: whether the job
        copies the source once so that both of the merge's reads see the same rows
        (``spark.databricks.delta.merge.materializeSource``).
    :param deduplicate_source_by: Source key columns; keep only the latest source row per key.
    :param deduplicate_order_by: Source columns whose greatest values mark the latest row.
    :param backend: ``auto`` (default) runs this provider's engine unless the table needs what only Delta
        Lake's own runtime does (a table feature the engine refuses, such as UniForm's Iceberg compatibility,
        or an auto compaction after the merge: docs/table-features.md) and the Spark session has that
        runtime; ``engine`` always runs ours; ``delta-spark`` always runs Delta's MERGE (needs the
        ``delta-spark`` extra and Delta's jars and confs).
    :param rerun: What a task does when its run's merge (same dag, task, run, map index and spec) is already
        in the log. ``auto`` (default): an automatic retry returns that commit's metrics instead of merging
        twice, and a Clear of the task or its run (from the UI, or a backfill that reprocesses runs) merges
        again. ``skip``: always return the commit. ``merge``: always merge again. (templated: run conf or
        params may choose, e.g. ``"{{ params.rerun }}"``; a rendered value must be one of the three)
    :param preflight: Check column references against the target's schema (read from the Delta log)
        before submitting the Spark job.
    :param bounds: Metric (or ratio ``"a / b"``) -> ``{"min": x, "max": y}``, as ``DeltaMergeCheckOperator``
        takes them, checked by the job after writing and *before* committing: a breach commits nothing,
        deletes the written files and fails the task without retries, listing every broken bound.
    :param dry_run: Run the merge up to the commit and return what it would commit (metrics, and under
        ``dryRun`` the files and bytes it would rewrite, the partitions it would touch, the executor and
        the new columns) without committing or emitting an asset event. (templated: e.g.
        ``"{{ params.dry_run }}"``, so a UI user can ask for one)
    :param spark_conn_id: Spark connection used for spark-submit.
    :param storage_conn_id: Connection holding object-store credentials (``aws``, ``wasb``,
        ``google_cloud_platform``, this provider's ``deltamerge_storage``, or any type with an ``env``
        extra); they reach the job as environment variables, never the spec or the log.
    :param allowed_paths: Lake roots (paths or URIs) that the target, a path source and the files a source
        query reads must lie under, checked after templating (``..`` resolved, a local path's symbolic links
        followed). Defaults to the ``[deltamerge] allowed_paths`` setting of Airflow's configuration
        (comma-separated); when neither is set, the roots the DAG writes: a value printed into a path
        (``/lake/{{ params.table }}/orders``) may only choose a place below the folder written before it
        (``/lake/``), a path that starts with a value is refused, and a merge into a remote table reads no
        worker-local system path (``/etc``, ``/proc``, the worker's home, ...). ``ANY_PATH`` (or ``*`` in the
        setting) lets run conf and params choose any path and any table. Unless it is ``ANY_PATH``, a table
        name must keep the name parts the DAG writes before its first value (``shop.{{ params.table }}``).
    :param conf: Spark configuration of the merge job. (templated: only keys that tune the merge, such as
        ``spark.sql.shuffle.partitions``, may take a templated value; see ``templated_conf.py``)
    :param spark_submit_kwargs: Further SparkSubmitHook arguments (executor_memory, packages, ...).
    :param openlineage_inject_parent_job_info: Give the Spark job OpenLineage's parent job (this task), so a
        Spark-side OpenLineage listener links its events to the task. Default: Airflow's
        ``[openlineage] spark_inject_parent_job_info``, as for the Spark provider's operator.
    :param openlineage_inject_transport_info: Give the Spark job the OpenLineage transport of this Airflow
        (default ``[openlineage] spark_inject_transport_info``); it may hold an API key, so it reaches the
        job through the private properties file, never the command line.
    :param asset_alias: Name of the ``AssetAlias`` that carries the asset event of a target known only at
        run time (templated, or in a ``.sql`` file); default ``deltamerge/<dag_id>/<task_id>``.

    Returns (as XCom ``return_value``) Delta's merge metrics (``numTargetRowsInserted``, ...) plus
    ``tableVersion``, ``executor`` and ``specHash``. Every merge that commits emits an asset event of the
    target table whose ``extra`` holds the same metrics and the ``partitions`` the commit touched (a list of
    column -> value; empty when unpartitioned), so data-aware DAGs scheduled on the table see what changed.
    A target known at parse time is declared as an outlet Asset; one known only at run time goes through the
    ``asset_alias``, and Airflow records the event for the rendered table's Asset. A path or table source
    known at parse time is declared as an inlet.

    Template values are data, never SQL: in ``condition``, ``merge_sql``, clause conditions and expressions
    and a source query, a value printed inside quotes (``'{{ params.region }}'``) or backticks is escaped
    for them, one printed elsewhere must be a number or go through ``| sql_literal`` or
    ``| sql_identifier``. Paths and names are checked after rendering: see ``allowed_paths``.
    """

    template_fields: Sequence[str] = (
        "target",
        "source",
        "condition",
        "merge_sql",
        "source_options",
        "conf",
        "rerun",
        "merge_dry_run",
        "merge_statement",
    )
    template_ext: Sequence[str] = (".sql",)
    template_fields_renderers: ClassVar[dict[str, str]] = {
        "condition": "sql",
        "merge_sql": "sql",
        "merge_statement": "sql",
        "conf": "json",
        "source_options": "json",
    }
    ui_color = "#00add4"
    operator_extra_links = (SparkApplicationLink(), MergeHistoryLink())

    def __init__(
        self,
        *,
        target: str | None = None,
        source: str | MergeSource | None = None,
        condition: str | None = None,
        clauses: Sequence[MergeClause] = (),
        merge_sql: str | None = None,
        source_format: str = "parquet",
        source_options: Mapping[str, str] | None = None,
        target_alias: str = "t",
        source_alias: str = "s",
        schema_evolution: bool = False,
        materialize_source: Literal["auto", "all", "none"] | None = None,
        deduplicate_source_by: Sequence[str] = (),
        deduplicate_order_by: Sequence[str] = (),
        backend: Literal["auto", "engine", "delta-spark"] = "auto",
        rerun: RerunPolicy | str = "auto",
        preflight: bool = True,
        bounds: Mapping[str, Mapping[str, float]] | None = None,
        dry_run: bool | str = False,
        spark_conn_id: str = "spark_default",
        storage_conn_id: str | None = None,
        allowed_paths: Sequence[str] | AnyPath | None = None,
        conf: Mapping[str, Any] | None = None,
        spark_submit_kwargs: Mapping[str, Any] | None = None,
        asset_alias: str | None = None,
        openlineage_inject_parent_job_info: bool | None = None,
        openlineage_inject_transport_info: bool | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.target, self.source, self.condition = target, source, condition
        self.clauses, self.merge_sql = tuple(clauses), merge_sql
        self.source_format, self.source_options = source_format, dict(source_options or {})
        self.target_alias, self.source_alias = target_alias, source_alias
        self.schema_evolution, self.materialize_source = schema_evolution, materialize_source
        self.deduplicate_source_by = tuple(deduplicate_source_by)
        self.deduplicate_order_by = tuple(deduplicate_order_by)
        self.backend, self.rerun, self.preflight = backend, rerun, preflight
        self.bounds = MetricBounds(bounds) if bounds else None  # a wrong metric name fails at DAG parse time
        # Not ``self.dry_run``: BaseOperator has a method of that name.
        self.merge_dry_run = dry_run
        self.spark_conn_id, self.storage_conn_id, self.conf = spark_conn_id, storage_conn_id, dict(conf or {})
        self.spark_submit_kwargs = dict(spark_submit_kwargs or {})
        # As the Spark provider's SparkSubmitOperator: the default is [openlineage] spark_inject_*_info.
        self.openlineage_inject_parent_job_info = (
            openlineage_inject_parent_job_info
            if openlineage_inject_parent_job_info is not None
            else injects_by_default("spark_inject_parent_job_info")
        )
        self.openlineage_inject_transport_info = (
            openlineage_inject_transport_info
            if openlineage_inject_transport_info is not None
            else injects_by_default("spark_inject_transport_info")
        )
        self.allowed_paths = _allowed_paths(allowed_paths, task_id=self.task_id)
        # The lake roots and table namespaces the DAG writes, read just before its fields are rendered.
        self._written: WrittenPlaces | None = None
        self._templated_conf_keys = templated_keys(self.conf)
        self._hook: DeltaMergeHook | None = None
        self._spec: MergeSpec | None = None
        # The merge as it runs, clauses rendered: set when the task's fields are rendered, so the Rendered
        # Templates tab shows it (a MERGE INTO statement, or the spec's JSON where MERGE INTO cannot say it).
        self.merge_statement: str | None = None
        self._metrics: dict[str, Any] = {}
        # The target's fields after the merge, read by execute() for the lineage of its completion when
        # OpenLineage sends it; None until then.
        self._target_after: _TargetFields | None = None
        self._check_structure()  # pure Python, no I/O: a bad DAG fails when it is parsed
        self.asset_alias: str | None = None
        self._declare_assets(asset_alias)

    @classmethod
    def get_serialized_fields(cls) -> frozenset[str]:
        # The merge history page (history/) reads the target's log on the API server with this connection.
        return frozenset(super().get_serialized_fields() | {"storage_conn_id"})

    def _check_structure(self) -> None:
        if not is_templated(self.rerun):
            self.rerun = rerun_policy(self.rerun, task_id=self.task_id)
        for name, allowed in (
            ("backend", BACKENDS),
            ("materialize_source", (None, *MATERIALIZE_SOURCE_MODES)),
        ):
            value = getattr(self, name)
            if value not in allowed:
                choices = ", ".join(a for a in allowed if a is not None)
                raise AirflowException(f"{self.task_id}: {name} must be one of {choices}, not {value!r}.")
        python_form = self.target is not None or self.source is not None or self.condition is not None
        if self.merge_sql is not None:
            if python_form or self.clauses:
                raise AirflowException(
                    f"{self.task_id}: give the merge either as merge_sql or as target, source, condition and "
                    "clauses, not both."
                )
            self._parse_time_merge_sql()
            return
        missing = [name for name in ("target", "source", "condition") if getattr(self, name) is None]
        if missing:
            raise AirflowException(
                f"{self.task_id}: {', '.join(missing)} missing; give target, source, condition and clauses, "
                "or a merge_sql statement."
            )
        check_clauses(self.clauses, target_alias=self.target_alias)

    def _parse_time_merge_sql(self) -> MergeSpec | None:
        """The ``merge_sql`` statement parsed, when it is inline and holds no template (else None)."""
        sql = self.merge_sql
        if sql is None or sql.endswith(".sql") or is_templated(sql):
            return None
        return parse_merge_sql(sql)

    def _declare_assets(self, alias: str | None) -> None:
        """The target as outlet (an AssetAlias when it is known only at run time), a known source as inlet."""
        target, source = self.target, self.source
        if (spec := self._parse_time_merge_sql()) is not None:
            target, source = spec.target, spec.source
        if target is not None and not is_templated(target):
            self.outlets = [*self.outlets, target_asset(target)]
        else:
            self.asset_alias = alias or default_alias_name(self.dag_id, self.task_id)
            self.outlets = [*self.outlets, AssetAlias(self.asset_alias)]
        inlet = source_asset(source)
        if inlet is not None:
            self.inlets = [*self.inlets, inlet]

    def build_spec(self) -> MergeSpec:
        """The merge spec from the (rendered) arguments."""
        if self.merge_sql is not None:
            spec = parse_merge_sql(self.merge_sql)
            # schema_evolution=True evolves a merge_sql statement too, as WITH SCHEMA EVOLUTION would.
            return dataclasses.replace(spec, schema_evolution=True) if self.schema_evolution else spec
        assert self.target is not None and self.source is not None and self.condition is not None
        source = (
            PathSource(self.source, format=self.source_format, options=tuple(self.source_options.items()))
            if isinstance(self.source, str)
            else self.source
        )
        return MergeSpec(
            target=self.target,
            source=source,
            condition=self.condition,
            clauses=self.clauses,
            target_alias=self.target_alias,
            source_alias=self.source_alias,
            schema_evolution=self.schema_evolution,
            deduplicate_source_by=self.deduplicate_source_by,
            deduplicate_order_by=self.deduplicate_order_by,
        )

    def job_conf(self) -> dict[str, Any]:
        """The Spark conf of the merge job: ``conf`` plus what the operator's own arguments set."""
        if self.materialize_source is None:
            return self.conf
        return {**self.conf, MATERIALIZE_SOURCE_CONF: self.materialize_source}

    def lake_roots(self) -> tuple[str, ...] | AnyPath | None:
        """The roots every path of the merge must lie under: ``allowed_paths``, else Airflow's setting (``*``
        for ``ANY_PATH``); None when neither names any: then the roots the DAG writes."""
        if self.allowed_paths is not None:
            return self.allowed_paths
        from airflow.configuration import conf

        setting = conf.get("deltamerge", "allowed_paths", fallback="") or ""
        roots = tuple(root.strip() for root in setting.split(",") if root.strip())
        return ANY_PATH if roots == ("*",) else roots or None

    def _written_places(self, context: Context) -> WrittenPlaces:
        """The places the DAG writes, from its target and source templates with every printed value marked.

        Read before the fields are rendered (they hold the templates then). A ``merge_sql`` whose marked text
        does not parse writes no place.
        """
        env = self.get_template_env()

        def written(text: str) -> str:
            return render_written(text, context, env)

        if self.merge_sql is not None:
            try:
                spec = parse_merge_sql(written(self.merge_sql))
            except MergeSpecError:
                return WrittenPlaces()
            return WrittenPlaces.of(spec.target, spec.source)
        match self.source:
            case str(path) | PathSource(path=path):
                source: MergeSource | None = PathSource(written(path))
            case TableSource(name=name):
                source = TableSource(written(name))
            case QuerySource(sql=sql):
                source = QuerySource(written(sql))
            case _:
                source = None
        return WrittenPlaces.of(None if self.target is None else written(self.target), source)

    def execute(self, context: Context) -> dict[str, Any]:
        try:
            return self._merge(context)
        except DeltaMergeError as err:
            raise _for_airflow(err) from err

    def _merge(self, context: Context) -> dict[str, Any]:
        from airflow_provider_deltamerge.delta.log.log_schema import read_path_schema, read_table_schema
        from airflow_provider_deltamerge.delta.log.store_errors import guarded
        from airflow_provider_deltamerge.hooks.delta_merge import DeltaMergeHook, commit_result

        check_templated_conf(self._templated_conf_keys)
        if self._spec is None:  # executed without Airflow rendering the fields first
            self._written = self._written_places(context)
            self._spec = self._rendered(self.build_spec(), context)
            self.merge_statement = _statement(self._spec)
        spec = self._spec
        self.log.info("The merge, rendered:\n%s", self.merge_statement)
        check_spec_locations(spec, allowed_paths=self.lake_roots(), written=self._written)
        conf, private_conf = openlineage_spark_conf(
            self.job_conf(),
            context,
            parent_job=self.openlineage_inject_parent_job_info,
            transport=self.openlineage_inject_transport_info,
        )
        self._hook = DeltaMergeHook(
            self.spark_conn_id,
            conf=conf,
            spark_submit_kwargs=self.spark_submit_kwargs,
            storage_conn_id=self.storage_conn_id,
            private_conf=private_conf,
        )
        if self.preflight and not is_path_like(spec.target):
            self.log.info(
                "Pre-flight checks skipped: %s is a catalog table, whose place only the Spark job can look "
                "up; the job checks the merge before it reads any data",
                spec.target,
            )
        elif self.preflight:
            # Columns and clauses against the target's schema from the Delta log: no Spark job is paid for
            # a merge that cannot resolve. A table only Delta's runtime reads is refused here where only the
            # engine may run the merge; otherwise the job decides (backend="auto").
            options = self._hook.storage_options() or None
            run_preflight(
                spec,
                read_target_schema=guarded(
                    partial(
                        read_table_schema,
                        storage_options=options,
                        refuse_unsupported=self.backend == "engine",
                    ),
                    self.storage_conn_id,
                ),
                read_source_schema=guarded(
                    partial(read_path_schema, storage_options=options), self.storage_conn_id
                ),
                conf=conf,
            )
            self.log.info("Pre-flight checks passed for the merge into %s", spec.target)
        policy = rerun_policy(self.rerun, task_id=self.task_id)
        series = TrySeries.of(context)
        ti, logical_date = context["ti"], context["dag_run"].logical_date
        provenance = {
            "dagId": ti.dag_id,
            "taskId": ti.task_id,
            "runId": ti.run_id,
            "mapIndex": ti.map_index,
            "tryNumber": ti.try_number,
            **series.provenance(),
            # What a consumer on the same schedule finds this merge by (DeltaTableSensor's
            # merge_logical_date); runs triggered without a logical date record none.
            **({"logicalDate": logical_date.isoformat()} if logical_date else {}),
        }
        # A catalog table's log is found by the job, which then skips a committed run whatever the policy
        # but "merge" says: only this side knows the task's tries.
        dry_run = _dry_run(self.merge_dry_run, task_id=self.task_id)
        checks_log = policy != "merge" and is_path_like(spec.target) and not dry_run
        earlier = self._hook.committed_run(spec, provenance) if checks_log else None
        if earlier is not None and replays(policy, series, earlier.info):
            self.log.info(
                "This run's merge into %s is already committed as version %s (try %s); returning its metrics "
                "without merging again (rerun=%r; rerun='merge' forces a new merge)",
                spec.target,
                earlier.version,
                earlier.info.get("tryNumber"),
                policy,
            )
            metrics = commit_result(earlier)
            unannounced = series.made(earlier.info)
        else:
            if earlier is not None:
                self.log.info(
                    "This run's merge into %s was committed as version %s before the task was cleared; "
                    "merging again (rerun=%r; rerun='skip' keeps the earlier commit)",
                    spec.target,
                    earlier.version,
                    policy,
                )
            # The job checks the log again just before merging (a concurrent duplicate, a catalog table),
            # unless this task has decided to merge again.
            job_rerun = "skip" if earlier is None and policy != "merge" else "merge"
            metrics = self._hook.run_merge(
                spec,
                provenance=provenance,
                backend=self.backend,
                rerun=job_rerun,
                bounds=self.bounds.declared if self.bounds else None,
                dry_run=dry_run,
            )
            unannounced = True
        # The headline first: the full metrics are many numbers, most of them for tuning.
        metrics = readable(metrics)
        self._metrics = metrics
        if lineage_is_sent():
            # Read here, not when the completion's lineage is built: OpenLineage's listener builds it in a
            # forked child, where deltalake (already used in this process) panics, and no COMPLETE event
            # is sent.
            self._target_after = _TargetFields(self._target_schema(spec.target))
        if dry_run:
            self.log.info(
                "Dry run of the merge into %s, nothing committed: %s", spec.target, metrics[SUMMARY]
            )
            self.log.info("What it would commit: %s", metrics.get(DRY_RUN))
            table = target_asset(spec.target).uri
            self.outlets = [o for o in self.outlets if not (isinstance(o, Asset) and o.uri == table)]
            return metrics
        self.log.info("Merge into %s: %s", spec.target, metrics[SUMMARY])
        self.log.info("All metrics (also the task's XCom value): %s", metrics)
        self._announce(spec.target, metrics, context, new=unannounced)
        return metrics

    def _announce(self, target: str, metrics: Mapping[str, Any], context: Context, *, new: bool) -> None:
        """Give the target's asset event the merge's metrics and touched partitions, unless the commit was
        announced already.

        Airflow emits an event for each Asset in the task's outlets when the task succeeds. A commit returned
        by an automatic retry was never announced (the try that made it failed), so it gets its event now. A
        commit returned after a Clear (``rerun="skip"``) was announced, with these same metrics, by the try
        that made it: a second event would start every consumer scheduled on the table again for data that
        did not change. So that try drops the table from its outlets (the DAG's declared outlets, which the
        scheduler reads from the serialized DAG, stay as they are), or adds no event to its alias: one asset
        event per commit.
        """
        table = target_asset(target)
        ours = [o for o in self.outlets if isinstance(o, Asset) and o.uri == table.uri]
        if not new:
            self.outlets = [o for o in self.outlets if o not in ours]
            self.log.info("No asset event for %s: the try that made its commit announced it", table.uri)
            return
        extra = event_extra(metrics, self._touched_partitions(target, metrics))
        for outlet in ours:
            context["outlet_events"][outlet].extra = extra
        if self.asset_alias is not None:
            context["outlet_events"][AssetAlias(self.asset_alias)].add(table, extra=extra)

    def _touched_partitions(self, target: str, metrics: Mapping[str, Any]) -> list[Partition] | None:
        """The partitions the merge's commit touched, from its log entry; None where that cannot be read (a
        catalog table, whose place only the job looks up, or a log the store would not give)."""
        if not is_path_like(target):
            return None
        if not (metrics.get(NUM_TARGET_FILES_ADDED) or metrics.get(NUM_TARGET_FILES_REMOVED)):
            return []  # no commit of data files (perhaps none at all): no partition changed
        from deltalake.exceptions import DeltaError

        from airflow_provider_deltamerge.delta.log.commit_partitions import touched_partitions

        assert self._hook is not None
        try:
            return touched_partitions(target, metrics[TABLE_VERSION], self._hook.storage_options() or None)
        except (DeltaError, OSError) as err:
            # The merge is committed; a retry would only return it. The event goes out without partitions.
            self.log.warning("Partitions left out of the asset event of %s: its log entry: %s", target, err)
            return None

    def _do_render_template_fields(
        self,
        parent: Any,
        template_fields: Iterable[str],
        context: Context,
        jinja_env: jinja2.Environment,
        seen_oids: set[int],
    ) -> None:
        """Render the SQL fields with their values bound as data, the others as Airflow does.

        Airflow calls this for plain and for mapped tasks alike (``render_template_fields`` is bypassed for
        the latter), so it is the one place that sees every render of this operator's fields.
        """
        fields = list(template_fields)
        if parent is self:
            try:
                self._written = self._written_places(context)
            except DeltaMergeError as err:
                raise _for_airflow(err) from err
            for name in (f for f in fields if f in SQL_TEMPLATE_FIELDS):
                value = getattr(self, name)
                if isinstance(value, str) and value:
                    try:
                        setattr(self, name, render_sql(value, context, jinja_env, where=name))
                    except DeltaMergeError as err:
                        raise _for_airflow(err) from err
            fields = [f for f in fields if f not in SQL_TEMPLATE_FIELDS and f != "merge_statement"]
        super()._do_render_template_fields(parent, fields, context, with_sql_filters(jinja_env), seen_oids)
        if parent is self:
            # Clauses and source objects are rendered here too (once: a second render of rendered text
            # would run template syntax that a bound value may hold).
            try:
                self._spec = self._rendered(self.build_spec(), context)
            except DeltaMergeError as err:
                raise _for_airflow(err) from err
            self.merge_statement = _statement(self._spec)

    def _rendered(self, spec: MergeSpec, context: Context) -> MergeSpec:
        """Render Jinja in clause expressions and source objects too.

        Airflow renders the string arguments before ``execute``, but clauses and sources are frozen values
        it cannot render in place; their JSON form is rendered instead, SQL with its values bound as data.
        """
        env = self.get_template_env()

        def sql(text: str | None, where: str) -> str | None:
            return text if text is None else render_sql(text, context, env, where=where)

        data = spec_to_dict(spec)
        for position, clause in enumerate(data["clauses"], start=1):
            where = f"clause {position}"
            clause["condition"] = sql(clause["condition"], where)
            for key in ("set", "values"):
                if key in clause:
                    clause[key] = [
                        [self.render_template(column, context, env), sql(expression, where)]
                        for column, expression in clause[key]
                    ]
        if not isinstance(self.source, str):
            source = data["source"]
            if source["kind"] == "query":
                source["sql"] = sql(source["sql"], "the source query")
            else:
                data["source"] = self.render_template(source, context, with_sql_filters(env))
        return spec_from_dict(data)

    def get_openlineage_facets_on_start(self) -> OperatorLineage:
        """Lineage for OpenLineage: the source as input dataset, the target table as output, the statement."""
        return merge_lineage(self._spec or self.build_spec(), None, None)

    def get_openlineage_facets_on_complete(self, task_instance: Any) -> OperatorLineage:
        """As on start, with the merge's statistics, the table version, schema and column lineage."""
        spec = self._spec or self.build_spec()
        after = self._target_after
        fields = after.fields if after is not None else self._target_schema(spec.target)
        return merge_lineage(spec, self._metrics or None, fields)

    def _target_schema(self, target: str) -> list[dict[str, Any]] | None:
        """The target's top-level fields from its Delta log; None where it cannot be read (lineage is best
        effort: it never fails the task)."""
        if not is_path_like(target):
            return None
        from deltalake.exceptions import DeltaError

        from airflow_provider_deltamerge.delta.log.log_schema import read_table_schema

        options = self._hook.storage_options() if self._hook is not None else None
        try:
            return list(read_table_schema(target, storage_options=options or None).get("fields", []))
        except (DeltaMergeError, DeltaError, OSError) as err:
            self.log.info("Lineage without the target's schema: %s", err)
            return None

    def on_kill(self) -> None:
        if self._hook is not None:
            self._hook.on_kill()


@dataclasses.dataclass(frozen=True)
class _TargetFields:
    """The target's top-level fields as read from its log after the merge; None where it could not be."""

    fields: list[dict[str, Any]] | None


def _allowed_paths(
    value: Sequence[str] | AnyPath | None, *, task_id: str
) -> tuple[str, ...] | AnyPath | None:
    """``allowed_paths`` as given, refused when it could be read two ways (a string, an empty list)."""
    if value is None or value is ANY_PATH:
        return value
    if isinstance(value, str) or not value:
        raise AirflowException(
            f"{task_id}: allowed_paths is {value!r}; give a list of lake roots (['s3://lake/']), ANY_PATH to "
            "let run conf and params choose any path, or leave it out for the roots the DAG writes."
        )
    return tuple(value)


def _dry_run(value: Any, *, task_id: str) -> bool:
    """``dry_run`` as given or rendered from a template (``"True"``, ``"false"``, ``""``)."""
    if isinstance(value, bool):
        return value
    text = str(value or "").strip().lower()
    if text in ("true", "false", "", "none"):
        return text == "true"
    raise AirflowException(f"{task_id}: dry_run is {str(value)[:80]!r}; give true or false.")


def _statement(spec: MergeSpec) -> str:
    """``spec`` as a person reads it: its ``MERGE INTO`` statement, else its JSON form."""
    try:
        return to_merge_sql(spec)
    except MergeSpecError:
        return spec_to_json(spec)
