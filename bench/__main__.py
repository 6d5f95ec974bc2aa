"""Entry point of ``python -m bench``."""

from __future__ import annotations

import sys

from bench.cli import main

# The guard keeps the spawned worker process, which imports this module again, from running the benchmark.
if __name__ == "__main__":
    sys.exit(main())
