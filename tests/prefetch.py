"""Fetch and build what the tests' servers and Delta's runtime need, before pytest asks for them.

``make test`` starts this in the background before its lint, so that the downloads (Delta's jars, s3proxy,
Azurite) and the build of fake-gcs-server (minutes of compiling on a fresh machine) overlap with the lint
instead of holding up the first tests that need them, as they did in a worker each. Each product is made
under the lock the tests take for it (``installed_once``, ``resolved_jars``): a test that needs one before
it is ready waits for it, and a test that needs one this failed to make makes it again and reports why.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from tests.delta_runtime import delta_jars
from tests.stores.azure_server import azurite_blob
from tests.stores.gcs_server import fake_gcs_server
from tests.stores.s3_server import s3proxy_jar

_PRODUCTS: dict[str, Callable[[], Any]] = {
    "Delta's jars": delta_jars,
    "s3proxy": s3proxy_jar,
    "Azurite": azurite_blob,
    "fake-gcs-server": fake_gcs_server,
}


def main() -> None:
    # Spark's resolver is the venv's spark-submit, as the tests' conftest puts it on PATH.
    os.environ["PATH"] = f"{os.path.dirname(sys.executable)}{os.pathsep}{os.environ.get('PATH', '')}"
    with ThreadPoolExecutor(len(_PRODUCTS)) as pool:
        made = {name: pool.submit(make) for name, make in _PRODUCTS.items()}
    for name, future in made.items():
        error = future.exception()
        verdict = "ready" if error is None else f"not made, the tests that need it try again: {error}"
        print(f"prefetch: {name} {verdict}", file=sys.stderr)


if __name__ == "__main__":
    main()
