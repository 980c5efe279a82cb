#!/usr/bin/env bash
# Installs everything tailtune needs on a fresh Debian 12 machine (idempotent; fast when already done):
# system packages (apt), a venv at .venv with the Python packages, and the Rust simulator extension (kvsim).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)

say() { printf '\033[1;34m[setup %4ss]\033[0m %s\n' "$SECONDS" "$*" >&2; }

# --- system packages -------------------------------------------------------------------------------------------
APT_PACKAGES=(memcached openjdk-17-jdk-headless maven postgresql dash procps chromium chromium-driver prometheus
  docker-compose)
missing=()
command -v memcached >/dev/null 2>&1 || missing+=(memcached)
# the JDK (javac): the binary full query log's reader is compiled against the Cassandra jars (docs/formats.md)
command -v javac >/dev/null 2>&1 || missing+=(openjdk-17-jdk-headless)
command -v mvn >/dev/null 2>&1 || missing+=(maven)
# the docker-compose healthchecks run in the tests as the images run them: /bin/sh is dash, pgrep is procps'
command -v dash >/dev/null 2>&1 || missing+=(dash)
command -v pgrep >/dev/null 2>&1 || missing+=(procps)
# PostgreSQL server binaries for the metadata-DB/Optuna/MLflow tests (a throw-away server per test session; the
# Debian package keeps initdb/pg_ctl in /usr/lib/postgresql/<ver>/bin, off the PATH)
compgen -G "/usr/lib/postgresql/*/bin/initdb" >/dev/null || missing+=(postgresql)
# the web console's browser test (tests/service/test_console_browser.py) drives Debian's headless Chromium
command -v chromium >/dev/null 2>&1 || missing+=(chromium)
command -v chromedriver >/dev/null 2>&1 || missing+=(chromium-driver)
# the dashboard test runs every Grafana panel's query through Debian's Prometheus scraping the real service
# (tests/service/test_metrics.py); docker-compose (v1) validates docker-compose.yml (`docker-compose config`)
command -v prometheus >/dev/null 2>&1 || missing+=(prometheus)
command -v docker-compose >/dev/null 2>&1 || missing+=(docker-compose)
if ((${#missing[@]})); then
  say "apt-get install ${missing[*]} (of: ${APT_PACKAGES[*]})"
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi
if ! command -v cargo >/dev/null 2>&1; then
  if [ -x "$HOME/.cargo/bin/cargo" ]; then export PATH="$HOME/.cargo/bin:$PATH"; else
    say "cargo not found: install Rust (https://rustup.rs) or 'apt-get install cargo', then run this again"; exit 1
  fi
fi

# --- Python venv -----------------------------------------------------------------------------------------------
PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  say "creating .venv"
  "$PY" -m venv .venv
fi
# the simulator's core crate (no Python in it) compiles on one core (codegen-units = 1) while pip installs: its
# release build is then reused by the extension build below
core_log=$(mktemp)
cargo build --release --quiet -p kvsim-core >"$core_log" 2>&1 & core_pid=$!
stamp=.venv/.tailtune-deps
want=$(cat pyproject.toml clients/python/pyproject.toml | sha256sum | cut -c1-16)
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  say "installing Python packages (first time: a few minutes)"
  # --no-compile: bytecode is written on first import, for the modules actually used (pyspark and mlflow alone
  # would otherwise compile thousands of files at install: about half of this step)
  .venv/bin/python -m pip install -q --upgrade pip
  # tailtune-client first: the package applications install, with its cassandra extra (tailtune_client.cassandra);
  # tailtune requires it (the sharded pool's hash) and it is not on PyPI
  .venv/bin/python -m pip install -q --no-compile -e "clients/python[cassandra]"
  .venv/bin/python -m pip install -q --no-compile -e ".[dev]"
  echo "$want" > "$stamp"
fi

# --- Rust extension (kvsim) ------------------------------------------------------------------------------------
say "building the simulator extension (kvsim, release)"
wait "$core_pid" || { cat "$core_log" >&2; rm -f "$core_log"; exit 1; }
rm -f "$core_log"
VIRTUAL_ENV="$ROOT/.venv" PATH="$ROOT/.venv/bin:$PATH" \
  .venv/bin/maturin develop --release --quiet -m simulator/py/Cargo.toml >/dev/null 2>.venv/maturin.log \
  || { cat .venv/maturin.log >&2; exit 1; }
# --- Cassandra jars for the service tests (Maven Central cassandra-all 5.0.x into ~/.cache; once) ------------
say "fetching Cassandra jars for the service tests (first time: ~40 s)"
.venv/bin/python -m tests.servers.cassandra_server fetch >/dev/null
# ...which also read a binary full query log (tailtune ingest DIR --format cassandra-fql): its reader, compiled once
.venv/bin/python -m ingest.formats.cassandra_fql.binlog build >/dev/null
# the live replay's Java load generator: java-driver-core 4.19.0 and HdrHistogram from Maven Central into
# ~/.cache/tailtune/replay-generator (TAILTUNE_GENERATOR_CACHE), compiled once per source
say "fetching and compiling the Java load generator (first time: ~15 s)"
.venv/bin/python -m kinds.cassandra.replay.generator build >/dev/null
# the Java driver 4's request tracker applications put on their classpath (clients/java/README.md): a jar in the
# same cache, built once per source; its path is printed
say "building the Java driver's request tracker: $(.venv/bin/python -m kinds.cassandra.tracker build)"

say "ready: .venv/bin/tailtune"
