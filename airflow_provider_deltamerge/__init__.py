"""Delta Lake MERGE for Apache Airflow: the provider's version and its registration with Airflow."""

from __future__ import annotations

from typing import Any

__version__ = "0.1.0"

PACKAGE_NAME = "airflow-provider-deltamerge"


def get_provider_info() -> dict[str, Any]:
    """Describe the provider to Airflow's provider manager (entry point ``apache_airflow_provider``)."""
    return {
        "package-name": PACKAGE_NAME,
        "name": "Delta Lake MERGE",
        "description": "Runs Delta Lake MERGE statements as Spark jobs and returns Delta's merge metrics.",
        "versions": [__version__],
        "integrations": [
            {
                "integration-name": "Delta Lake MERGE",
                "external-doc-url": "https://docs.delta.io/latest/delta-update.html",
                "tags": ["software"],
            }
        ],
        "operators": [
            {
                "integration-name": "Delta Lake MERGE",
                "python-modules": [
                    "airflow_provider_deltamerge.operators.delta_merge",
                    "airflow_provider_deltamerge.operators.delta_merge_check",
                ],
            }
        ],
        "hooks": [
            {
                "integration-name": "Delta Lake MERGE",
                "python-modules": [
                    "airflow_provider_deltamerge.hooks.delta_merge",
                    "airflow_provider_deltamerge.hooks.storage_connection",
                ],
            }
        ],
        "connection-types": [
            {
                "hook-class-name": "airflow_provider_deltamerge.hooks.storage_connection.DeltaStorageHook",
                "hook-name": "Delta Lake storage",
                "connection-type": "deltamerge_storage",
                "ui-field-behaviour": {
                    "hidden-fields": ["host", "schema", "login", "password", "port", "extra"],
                    "relabeling": {},
                },
                "conn-fields": {
                    "env": {
                        "label": "Environment variables",
                        "description": (
                            "A JSON object of the variables the Spark job and deltalake read for the store, "
                            'e.g. {"GOOGLE_APPLICATION_CREDENTIALS": "/secrets/key.json"} or an '
                            "S3-compatible store's AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY and "
                            "AWS_ENDPOINT_URL. Kept as a secret; for AWS, Azure and Google Cloud Storage, "
                            "prefer their own connection types (resolved by their providers' hooks)."
                        ),
                        "schema": {"type": ["string", "null"], "format": "password"},
                    }
                },
            }
        ],
        "sensors": [
            {
                "integration-name": "Delta Lake MERGE",
                "python-modules": ["airflow_provider_deltamerge.sensors.delta_table"],
            }
        ],
        "triggers": [
            {
                "integration-name": "Delta Lake MERGE",
                "python-modules": ["airflow_provider_deltamerge.triggers.delta_table"],
            }
        ],
        "extra-links": [
            "airflow_provider_deltamerge.operators.links.SparkApplicationLink",
            "airflow_provider_deltamerge.operators.links.MergeHistoryLink",
        ],
        "plugins": [
            {
                "name": "deltamerge_history",
                "plugin-class": "airflow_provider_deltamerge.history.plugin.DeltaMergeHistoryPlugin",
            }
        ],
        # Read by DeltaMergeOperator.lake_roots(); declared so that `airflow config list` shows it.
        "config": {
            "deltamerge": {
                "description": "Settings of the Delta Lake MERGE provider.",
                "options": {
                    "allowed_paths": {
                        "description": (
                            "Comma-separated lake roots (paths or URIs) that every merge's target, path "
                            "source and the files a source query reads must lie under, checked after "
                            "templating. A task's allowed_paths argument overrides it. Empty: the roots each "
                            "DAG writes before its first template value; * lets run conf choose any path."
                        ),
                        "version_added": "0.1.0",
                        "type": "string",
                        "example": "s3://lake/,/data/lake",
                        "default": "",
                    },
                    "kubernetes_pod_url": {
                        "description": (
                            "The page of a Kubernetes pod in your cluster's console, with {namespace} and "
                            "{pod} where the driver pod's namespace and name go: a merge submitted to "
                            "Kubernetes then links its task page to its driver pod. Empty: no link for such "
                            "merges."
                        ),
                        "version_added": "0.1.0",
                        "type": "string",
                        "example": "https://console.example/k8s/ns/{namespace}/pods/{pod}",
                        "default": "",
                    },
                },
            }
        },
    }
