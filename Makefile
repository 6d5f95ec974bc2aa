# Two commands do all set-up on a fresh machine (Python 3.11+ and Java 17 needed):
#   make demo   runs the example DAG end to end against a local Delta table
#   make test   runs ruff, mypy and the test suite
#   make bench  runs the merge benchmark (SCALE=S, M or L; BENCH_ARGS for more options)
#   make bench-overhead  measures the fixed cost per merge, spark-submit against Spark Connect (RUNS=5)
#   make bench-backfill  a backfill of 30 small dates through a real scheduler on Spark Connect (AT_ONCE=4)
#   make bench-store  a small merge's requests (counted on an S3 server, or Azure's or a GCS emulator
#                     with STORE=azure or STORE=gcs) and time, against deltalake's; CASES=delta runs
#                     Delta's 16 benchmark cases at S on the store instead
#   make bench-one-query  a small merge's one query against its two phases, by table size (RUNS=5)
PYTHON ?= python3
VENV := .venv
BIN := $(CURDIR)/$(VENV)/bin
STAMP := $(VENV)/.installed

SCALE ?= S
# make test runs the suite in two pytest-xdist workers, one per core of the CI machine (docs/development.md,
# tests/worker_plan.py); PYTEST_WORKERS=0 runs it in one process.
PYTEST_WORKERS ?= 2
RUNS ?= 5
AT_ONCE ?= 4
STORE ?= s3
CASES ?= upsert

.PHONY: demo test bench bench-overhead bench-first-dag bench-first-dag-scheduled bench-backfill bench-store bench-one-query venv java docker-compose chromium postgresql maven npm go clean

demo: $(STAMP) java
	$(BIN)/python scripts/demo.py

test: $(STAMP) java docker-compose chromium postgresql maven npm go
	$(BIN)/python -m tests.prefetch &
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy
	$(BIN)/python -m pytest -n $(PYTEST_WORKERS) --dist loadscope --no-loadscope-reorder $(PYTEST_ARGS)

bench: $(STAMP) java
	$(BIN)/python -m bench --scale $(SCALE) $(BENCH_ARGS)

bench-overhead: $(STAMP) java
	$(BIN)/python -m bench overhead --runs $(RUNS)

bench-first-dag: $(STAMP) java
	$(BIN)/python -m bench first-dag --runs $(RUNS)

bench-first-dag-scheduled: $(STAMP) java postgresql
	$(BIN)/python -m bench first-dag-scheduled --runs $(RUNS)

bench-backfill: $(STAMP) java postgresql
	$(BIN)/python -m bench backfill --at-once $(AT_ONCE)

bench-store: $(STAMP) java maven npm go
	$(BIN)/python -m bench store --repetitions $(RUNS) --store $(STORE) --cases $(CASES)

bench-one-query: $(STAMP) java
	$(BIN)/python -m bench one-query --runs $(RUNS)

venv: $(STAMP)

$(STAMP): pyproject.toml constraints.txt overrides.txt
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "Python 3.11 or newer is needed (set PYTHON=python3.11)")'
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip --version >/dev/null 2>&1 || $(BIN)/python -m ensurepip --default-pip >/dev/null
	$(BIN)/python -m pip install --quiet --disable-pip-version-check uv
	# delta-spark: Delta Lake's own runtime is the tests' oracle (its jars are resolved on first use, see
	# tests/delta_runtime.py); users need neither.
	# overrides.txt leaves out pyspark-client, the Spark provider's partial copy of pyspark's files.
	# --compile-bytecode: uv installs source files only, and where PYTHONDONTWRITEBYTECODE is set (as on
	# our machines) every Python process the tests start (each airflow command, Airflow task, spark-submit
	# job) compiled the modules it imports again: 4 s of an `airflow dags test`'s CPU, 5 s of pytest's
	# collection (docs/development.md).
	$(BIN)/uv pip install --quiet -p $(BIN)/python -c constraints.txt --overrides overrides.txt --compile-bytecode \
	  -e ".[dev,delta-spark]"
	touch $(STAMP)

java:
	@command -v java >/dev/null 2>&1 || { \
	  echo "Java is missing: Spark needs Java 17. Install it (e.g. 'apt-get install openjdk-17-jre-headless')" \
	       "and make sure 'java' is on PATH."; exit 1; }

# tests/test_docker_compose.py validates docker-compose.yaml with Debian's docker-compose (no Docker daemon).
docker-compose:
	@command -v docker-compose >/dev/null 2>&1 || { \
	  echo "Installing Debian's docker-compose, which the tests use to validate docker-compose.yaml"; \
	  apt-get update -q >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -q docker-compose >/dev/null; \
	} || { echo "docker-compose is missing: install Debian's package ('apt-get install docker-compose')"; exit 1; }

# tests/history/test_history_page.py opens the merge history page in Debian's headless Chromium.
chromium:
	@command -v chromium >/dev/null 2>&1 || { \
	  echo "Installing Debian's chromium, which the tests use to open the merge history page"; \
	  apt-get update -q >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium >/dev/null; \
	} || { echo "chromium is missing: install Debian's package ('apt-get install chromium')"; exit 1; }

# The real-scheduler tests (tests/e2e/postgres.py) run Airflow on a private server of Debian's PostgreSQL, which
# they start and stop themselves; the package's own cluster is not used.
postgresql:
	@ls /usr/lib/postgresql/*/bin/postgres >/dev/null 2>&1 || command -v postgres >/dev/null 2>&1 || { \
	  echo "Installing Debian's postgresql, which the real-scheduler tests run Airflow's database on"; \
	  apt-get update -q >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -q postgresql >/dev/null; \
	} || { echo "PostgreSQL is missing: install Debian's package ('apt-get install postgresql')"; exit 1; }

# tests/stores/s3_server.py fetches the S3 server the tests start (s3proxy, from Maven's central repository)
# with Debian's Maven.
maven:
	@command -v mvn >/dev/null 2>&1 || { \
	  echo "Installing Debian's maven, which the tests use to fetch their S3 server (s3proxy)"; \
	  apt-get update -q >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -q maven >/dev/null; \
	} || { echo "Maven is missing: install Debian's package ('apt-get install maven')"; exit 1; }

# tests/stores/azure_server.py installs Azure's storage emulator the tests start (Azurite) with npm.
npm:
	@command -v npm >/dev/null 2>&1 || { \
	  echo "Installing Debian's npm, which the tests use to install Azure's storage emulator (Azurite)"; \
	  apt-get update -q >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -q npm >/dev/null; \
	} || { echo "npm is missing: install Debian's package ('apt-get install npm')"; exit 1; }

# tests/stores/gcs_server.py builds the GCS emulator the tests start (fake-gcs-server) with go install, which
# needs Go 1.26 or newer (Debian's golang-go is older).
go:
	@command -v go >/dev/null 2>&1 || { \
	  echo "Go is missing: the tests build their GCS emulator (fake-gcs-server) with it. Install Go 1.26 or" \
	       "newer and make sure 'go' is on PATH."; exit 1; }

clean:
	rm -rf $(VENV) .demo .pytest_cache .mypy_cache .ruff_cache bench/work
