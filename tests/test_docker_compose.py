"""docker-compose.yaml: valid for Compose, wired as docs/docker-compose.md says, and every
file or folder it names is in the repository.

``docker-compose config`` (Debian's docker-compose, installed by ``make``) checks the file against the
Compose specification's schema and that build contexts exist, with no Docker daemon; it prints the file
normalised (paths absolute, anchors merged), which the checks below read.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
REPO_IN_IMAGE = "/opt/deltamerge"  # where docker/Dockerfile copies the repository
AIRFLOW_SERVICES = ("airflow-apiserver", "airflow-scheduler", "airflow-dag-processor", "airflow-triggerer")


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    tool = shutil.which("docker-compose")
    assert tool, "docker-compose is missing: `make test` installs Debian's package (see the Makefile)"
    result = subprocess.run(
        [tool, "--file", str(ROOT / "docker-compose.yaml"), "config"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    return yaml.safe_load(result.stdout)


def published(service: dict[str, Any]) -> dict[int, int]:
    """Host port -> container port."""
    return {int(port["published"]): int(port["target"]) for port in service.get("ports", [])}


def test_compose_runs_airflow_3_on_postgres_and_a_spark_cluster(compose):
    services = compose["services"]
    assert set(services) >= {"postgres", "airflow-init", "spark-master", "spark-worker", *AIRFLOW_SERVICES}
    assert [services[name]["command"] for name in AIRFLOW_SERVICES] == [
        "api-server",
        "scheduler",
        "dag-processor",
        "triggerer",
    ]
    assert published(services["airflow-apiserver"]) == {8080: 8080}
    assert published(services["spark-master"]) == {8081: 8080, 7077: 7077}
    assert "org.apache.spark.deploy.worker.Worker" in services["spark-worker"]["command"]
    assert "spark://spark-master:7077" in services["spark-worker"]["command"]
    for name in (*AIRFLOW_SERVICES, "airflow-init"):
        env = services[name]["environment"]
        assert env["AIRFLOW__DATABASE__SQL_ALCHEMY_CONN"].startswith("postgresql"), name
        spark = json.loads(env["AIRFLOW_CONN_SPARK_DEFAULT"])
        assert f"{spark['host']}:{spark['port']}" == "spark://spark-master:7077", name


def test_compose_mounts_the_examples_and_shares_the_lake_with_spark(compose):
    services = compose["services"]
    for name in ("airflow-scheduler", "airflow-dag-processor"):
        volumes = services[name]["volumes"]
        assert f"{ROOT / 'dags_examples'}:/opt/airflow/dags:rw" in volumes, name
        assert "lake:/lake:rw" in volumes, name
        assert services[name]["environment"]["DELTAMERGE_LAKE"] == "/lake"
    assert "lake:/lake:rw" in services["spark-worker"]["volumes"]  # executors write the data files
    assert "lake" in compose["volumes"]


def dockerfile_references(context: Path, dockerfile: Path) -> list[Path]:
    """What the Dockerfile takes from its build context: COPY sources, and files of the copied repository."""
    text = dockerfile.read_text()
    copied = [
        context / source
        for line in re.findall(r"^COPY\s+(.+)$", text, flags=re.MULTILINE)
        for source in [word for word in line.split() if not word.startswith("--")][:-1]
    ]
    return copied + [context / name for name in re.findall(rf"{REPO_IN_IMAGE}/([\w./-]+)", text)]


def test_compose_names_only_files_that_exist(compose):
    referenced: list[Path] = []
    for service in compose["services"].values():
        if "build" in service:
            context = Path(service["build"]["context"])
            dockerfile = context / service["build"].get("dockerfile", "Dockerfile")
            referenced += [context, dockerfile]
            if dockerfile.exists():
                referenced += dockerfile_references(context, dockerfile)
        for volume in service.get("volumes", []):
            host = volume.split(":")[0]
            if host.startswith("/"):  # a bind mount; named volumes are created by Compose
                referenced.append(Path(host))

    assert ROOT / "docker" / "Dockerfile" in referenced and ROOT / "constraints.txt" in referenced
    missing = sorted({str(path) for path in referenced if not path.exists()})
    assert not missing, f"docker-compose.yaml or its Dockerfile names missing files: {missing}"
    outside = sorted({str(path) for path in referenced if not path.is_relative_to(ROOT)})
    assert not outside, f"docker-compose.yaml reaches outside the repository: {outside}"


def test_image_runs_the_airflow_version_the_tests_run():
    dockerfile = (ROOT / "docker" / "Dockerfile").read_text()
    [image_version] = re.findall(r"^ARG AIRFLOW_VERSION=(\S+)$", dockerfile, flags=re.MULTILINE)
    [pinned] = re.findall(
        r"^apache-airflow==(\S+)$", (ROOT / "constraints.txt").read_text(), flags=re.MULTILINE
    )
    assert image_version == pinned
