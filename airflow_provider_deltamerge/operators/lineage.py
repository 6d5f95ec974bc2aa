"""OpenLineage for a merge: the source as input, the Delta table as output, and what the merge did to it.

The output carries the merge's statistics, the table version it committed, a storage facet (Delta over
parquet), the table's schema and column lineage derived from the clauses' assignments; the job carries
the ``MERGE INTO`` statement. Everything is built from the spec and the merge's metrics: no Spark.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlparse

from airflow_provider_deltamerge.exceptions import MergeSpecError
from airflow_provider_deltamerge.metrics import (
    NUM_OUTPUT_ROWS,
    NUM_TARGET_BYTES_ADDED,
    NUM_TARGET_FILES_ADDED,
    TABLE_VERSION,
)
from airflow_provider_deltamerge.spec import (
    MatchedUpdate,
    MergeSpec,
    NotMatchedBySourceUpdate,
    NotMatchedInsert,
    PathSource,
    QuerySource,
    TableSource,
    to_merge_sql,
)
from airflow_provider_deltamerge.spec.names import split_column_path, strip_alias
from airflow_provider_deltamerge.spec.references import column_references
from airflow_provider_deltamerge.spec.source import MergeSource
from airflow_provider_deltamerge.spec.sql_parse import is_path_like

if TYPE_CHECKING:
    from airflow.providers.openlineage.extractors import OperatorLineage

# Where a query source and catalog tables live for lineage: the Spark session's catalog.
SPARK_NAMESPACE = "spark"


def dataset_name(where: str | MergeSource) -> tuple[str, str]:
    """(namespace, name) of a path or URI (``scheme://authority``, the path) or a catalog table.

    A query source has no dataset of its own; it is named by its place, the Spark catalog.
    """
    match where:
        case TableSource(name=name) | str(name) if not is_path_like(name):
            return SPARK_NAMESPACE, name
        case QuerySource():
            return SPARK_NAMESPACE, "query"
        case PathSource(path=path) | str(path):
            parsed = urlparse(path if "://" in path else Path(path).absolute().as_uri())
            return (f"{parsed.scheme}://{parsed.netloc}" if parsed.netloc else parsed.scheme), parsed.path
    raise TypeError(f"No lineage dataset for {where!r}")


def merge_lineage(
    spec: MergeSpec, metrics: Mapping[str, Any] | None, target_schema: Sequence[Mapping[str, Any]] | None
) -> OperatorLineage:
    """The merge's lineage; ``metrics`` once it ran (None on start), ``target_schema`` (the Delta log's
    top-level fields) when it could be read."""
    from airflow.providers.common.compat.openlineage.facet import (
        InputDataset,
        OutputDataset,
        OutputStatisticsOutputDatasetFacet,
        SchemaDatasetFacet,
        SchemaDatasetFacetFields,
        SQLJobFacet,
    )
    from airflow.providers.openlineage.extractors import OperatorLineage
    from openlineage.client.facet_v2 import dataset_version_dataset, storage_dataset

    source_namespace, source_name = dataset_name(spec.source)
    facets: dict[str, Any] = {"storage": storage_dataset.StorageDatasetFacet("delta", "parquet")}
    if target_schema:
        facets["schema"] = SchemaDatasetFacet(
            fields=[
                SchemaDatasetFacetFields(name=f["name"], type=_type_name(f["type"])) for f in target_schema
            ]
        )
    columns = _column_lineage(spec, (source_namespace, source_name), target_schema)
    if columns is not None:
        facets["columnLineage"] = columns
    output_facets: dict[str, Any] = {}
    if metrics:
        output_facets["outputStatistics"] = OutputStatisticsOutputDatasetFacet(
            rowCount=metrics.get(NUM_OUTPUT_ROWS),
            size=metrics.get(NUM_TARGET_BYTES_ADDED),
            fileCount=metrics.get(NUM_TARGET_FILES_ADDED),
        )
        if metrics.get(TABLE_VERSION) is not None:
            facets["version"] = dataset_version_dataset.DatasetVersionDatasetFacet(
                str(metrics[TABLE_VERSION])
            )
    target_namespace, target_name = dataset_name(spec.target)
    return OperatorLineage(
        inputs=[InputDataset(namespace=source_namespace, name=source_name)],
        outputs=[
            OutputDataset(
                namespace=target_namespace, name=target_name, facets=facets, outputFacets=output_facets
            )
        ],
        job_facets=_job_facets(spec, SQLJobFacet),
    )


def _job_facets(spec: MergeSpec, sql_facet: Any) -> dict[str, Any]:
    try:
        return {"sql": sql_facet(query=to_merge_sql(spec))}
    except MergeSpecError:
        return {}  # * EXCEPT or source de-duplication: no MERGE INTO form to show


def _type_name(data_type: Any) -> str:
    return data_type if isinstance(data_type, str) else str(data_type.get("type", "struct"))


def _column_lineage(
    spec: MergeSpec, source: tuple[str, str], target_schema: Sequence[Mapping[str, Any]] | None
) -> Any | None:
    """Which source columns each target column's new values come from, over every clause that assigns it."""
    from airflow.providers.common.compat.openlineage.facet import (
        ColumnLineageDatasetFacet,
        Fields,
        InputField,
    )

    target_columns = [f["name"] for f in target_schema] if target_schema else []
    sources: dict[str, dict[str, None]] = {}
    for column, source_columns in _assignments(spec, target_columns):
        sources.setdefault(column, {}).update(dict.fromkeys(source_columns))
    fields = {
        column: Fields(
            inputFields=[InputField(namespace=source[0], name=source[1], field=name) for name in used]
        )
        for column, used in sources.items()
        if used
    }
    return ColumnLineageDatasetFacet(fields=fields) if fields else None


def _assignments(spec: MergeSpec, target_columns: Sequence[str]) -> Iterator[tuple[str, list[str]]]:
    """(target column, source columns its value reads) of every assignment; ``*`` maps a column to the
    same-named source column, where the target's columns are known."""
    for clause in spec.clauses:
        if isinstance(clause, MatchedUpdate | NotMatchedInsert) and clause.star:
            excluded = {c.lower() for c in clause.except_columns}
            yield from ((c, [c]) for c in target_columns if c.lower() not in excluded)
            continue
        if isinstance(clause, NotMatchedInsert):
            pairs = clause.values
        elif isinstance(clause, MatchedUpdate | NotMatchedBySourceUpdate):
            pairs = clause.set
        else:
            continue
        for written, expression in pairs:
            column = strip_alias(split_column_path(written) or (written,), spec.target_alias)[0]
            yield column, _source_columns(expression, spec.source_alias)


def _source_columns(expression: str, source_alias: str) -> list[str]:
    references = column_references(expression)
    if not isinstance(references, tuple):
        return []
    return [parts[1] for parts in references if len(parts) > 1 and parts[0].lower() == source_alias.lower()]


def lineage_is_sent() -> bool:
    """Whether OpenLineage sends this task's events: its provider is installed and not disabled (it is when
    no transport is configured). Only then is the target's schema worth a read of its log."""
    try:
        from airflow.providers.openlineage.conf import is_disabled
    except ImportError:
        return False
    return not is_disabled()


def injects_by_default(option: str) -> bool:
    """Airflow's ``[openlineage] <option>`` (``spark_inject_parent_job_info``, ``..._transport_info``)."""
    from airflow.configuration import conf

    return conf.getboolean("openlineage", option, fallback=False)


def openlineage_spark_conf(
    conf: Mapping[str, Any], context: Any, *, parent_job: bool, transport: bool
) -> tuple[dict[str, Any], dict[str, str]]:
    """The job's Spark conf with OpenLineage's parent job added (``parent_job``), and the transport's conf
    (``transport``) apart, for the private properties file: it may hold the transport's API key. Both as
    the Spark provider injects them; nothing when the OpenLineage provider is not installed."""
    if not (parent_job or transport):
        return dict(conf), {}
    try:
        from airflow.providers.openlineage.utils.spark import (
            inject_parent_job_information_into_spark_properties,
            inject_transport_information_into_spark_properties,
        )
    except ImportError:
        return dict(conf), {}
    with_parent = dict(conf)
    if parent_job:
        with_parent = inject_parent_job_information_into_spark_properties(with_parent, context)
    private = inject_transport_information_into_spark_properties({}, context) if transport else {}
    return with_parent, {str(k): str(v) for k, v in private.items() if k not in conf}
