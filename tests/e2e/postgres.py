"""A private, throw-away PostgreSQL server for Airflow's metadata, as production runs Airflow: Debian's
PostgreSQL (``make test`` installs it) in a temporary data folder, on a free port of 127.0.0.1.

Under root the server runs as the ``postgres`` user (PostgreSQL refuses to run as root). One database is
migrated once (``airflow db migrate``) and each real Airflow of the tests gets a copy of it
(``CREATE DATABASE ... TEMPLATE``), as the SQLite tests get a copy of ``airflow.db``.
"""

from __future__ import annotations

import glob
import os
import pwd
import secrets
import shutil
import signal
import subprocess
import tempfile
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import sqlalchemy

from tests.e2e.airflow_services import free_port

USER = "deltamerge"
TEMPLATE = "airflow_template"
START_TIMEOUT_S = 120
# A throw-away cluster: durability buys nothing here, and a loaded 2-core machine gains from skipping it.
# The settings change no isolation or locking behaviour, which is what the tests are about.
SERVER_SETTINGS = ("fsync=off", "synchronous_commit=off", "full_page_writes=off", "max_connections=300")
# In the server's log: statements that waited on a lock for over a second, and deadlocks, with their queries.
LOG_SETTINGS = ("log_lock_waits=on", "deadlock_timeout=1s")


class PostgresError(RuntimeError):
    """The server could not be set up; the message says why and what to install."""


@dataclass(frozen=True)
class Postgres:
    """A running server and the migrated database every Airflow of the tests starts from."""

    port: int
    password: str

    def url(self, database: str, driver: str = "postgresql+psycopg2") -> str:
        return f"{driver}://{USER}:{self.password}@127.0.0.1:{self.port}/{database}"

    def new_database(self, name_hint: str = "airflow") -> str:
        """A fresh copy of the migrated database; its SQLAlchemy URL for Airflow."""
        name = f"{name_hint}_{uuid.uuid4().hex[:12]}"
        self._admin(f'CREATE DATABASE "{name}" TEMPLATE "{TEMPLATE}"')
        return self.url(name)

    def _admin(self, statement: str) -> None:
        engine = sqlalchemy.create_engine(self.url("postgres"), isolation_level="AUTOCOMMIT")
        try:
            with engine.connect() as connection:
                connection.execute(sqlalchemy.text(statement))
        finally:
            engine.dispose()


@contextmanager
def postgres_server(log: Path, airflow_env: dict[str, str]) -> Iterator[Postgres]:
    """Start the server, migrate the template database, and stop the server (and drop its data) at the end."""
    bin_dir = _server_bin_dir()
    as_root = os.geteuid() == 0
    owner = pwd.getpwnam("postgres") if as_root else None
    data = Path(tempfile.mkdtemp(prefix="deltamerge-postgres-"))
    run_as: dict[str, Any] = {"user": owner.pw_uid, "group": owner.pw_gid} if owner else {}
    if owner:
        os.chown(data, owner.pw_uid, owner.pw_gid)
    password = secrets.token_hex(16)
    (data / "pwfile").write_text(password + "\n")
    if owner:
        os.chown(data / "pwfile", owner.pw_uid, owner.pw_gid)
    cluster = data / "cluster"
    initdb = [
        str(bin_dir / "initdb"),
        f"--pgdata={cluster}",
        f"--username={USER}",
        f"--pwfile={data / 'pwfile'}",
        "--auth=scram-sha-256",
        "--encoding=UTF8",
        "--no-sync",
    ]
    done = subprocess.run(initdb, capture_output=True, text=True, check=False, cwd=data, **run_as)
    if done.returncode != 0:
        shutil.rmtree(data, ignore_errors=True)
        raise PostgresError(f"initdb failed ({done.returncode}):\n{done.stdout}{done.stderr}")
    port = free_port()
    listen = ["-h", "127.0.0.1", "-p", str(port), "-k", str(data)]  # the socket file in our own folder
    settings = [arg for setting in SERVER_SETTINGS + LOG_SETTINGS for arg in ("-c", setting)]
    with log.open("w") as out:
        server = subprocess.Popen(
            [str(bin_dir / "postgres"), "-D", str(cluster), *listen, *settings],
            stdout=out,
            stderr=subprocess.STDOUT,
            cwd=data,
            **run_as,
        )
    try:
        running = Postgres(port, password)
        _wait_until_ready(running, server, log)
        running._admin(f'CREATE DATABASE "{TEMPLATE}"')
        migrate_env = {**airflow_env, "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": running.url(TEMPLATE)}
        migrated = subprocess.run(
            ["airflow", "db", "migrate"], env=migrate_env, capture_output=True, text=True, check=False
        )
        if migrated.returncode != 0:
            raise PostgresError(f"airflow db migrate on PostgreSQL failed:\n{migrated.stderr[-4000:]}")
        yield running
    finally:
        server.send_signal(signal.SIGINT)  # PostgreSQL's fast shutdown: sessions are ended, not waited for
        try:
            server.wait(timeout=60)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
        shutil.rmtree(data, ignore_errors=True)


def _server_bin_dir() -> Path:
    """Debian keeps the server's programs off PATH, in /usr/lib/postgresql/<major>/bin; elsewhere, PATH."""
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/postgres"), key=_major_version)
    if found:
        return Path(found[-1]).parent
    on_path = shutil.which("postgres")
    if on_path and shutil.which("initdb"):
        return Path(on_path).parent
    raise PostgresError(
        "PostgreSQL's server is not installed: `make test` installs Debian's package "
        "(apt-get install postgresql); the real-scheduler tests run Airflow on it."
    )


def _major_version(path: str) -> int:
    version = Path(path).parts[-3]
    return int(version) if version.isdigit() else 0


def _wait_until_ready(running: Postgres, server: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + START_TIMEOUT_S
    while True:
        if server.poll() is not None:
            raise PostgresError(f"PostgreSQL exited ({server.returncode}):\n{log.read_text()[-4000:]}")
        try:
            running._admin("SELECT 1")
            return
        except sqlalchemy.exc.OperationalError as err:
            if time.monotonic() > deadline:
                raise PostgresError(
                    f"PostgreSQL did not accept connections in {START_TIMEOUT_S} s: {err}\n"
                    f"{log.read_text()[-4000:]}"
                ) from err
        time.sleep(0.5)
