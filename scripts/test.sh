#!/usr/bin/env bash
# Runs every check and test: ruff, mypy, the import layers (lint-imports), cargo clippy -D warnings, cargo test,
# pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$(pwd)/.venv/bin:$HOME/.cargo/bin:$PATH"
say() { printf '\033[1;34m[test %4ss]\033[0m %s\n' "$SECONDS" "$*" >&2; }
say "ruff";   ruff check .
say "layers"; lint-imports --no-cache >/dev/null || lint-imports --no-cache
# mypy is single-threaded: it runs beside the Rust checks (its report is printed when they are done)
say "mypy (beside clippy and cargo test)"
mypy_log=$(mktemp); mypy >"$mypy_log" 2>&1 & mypy_pid=$!
trap 'kill "$mypy_pid" 2>/dev/null || true; rm -f "$mypy_log"' EXIT
say "clippy"; cargo clippy --workspace --all-targets --quiet -- -D warnings
# the binding crate (kvsim-py) has no Rust tests (clippy checks it; pytest tests it through Python): building its
# test harness would compile pyo3 once more for nothing
say "cargo test"; cargo test -p kvsim-core --quiet
if ! wait "$mypy_pid"; then cat "$mypy_log" >&2; say "mypy failed"; exit 1; fi
say "mypy: $(tail -n 1 "$mypy_log")"
# opt-in slow tests that CI runs: the end-to-end nightly pipeline (upload → ingest → analyze → tune → publish,
# ~2 min) and the tuner's workers on a Spark standalone cluster (~1.5 min); set them to 0 to skip locally
export TAILTUNE_E2E="${TAILTUNE_E2E:-1}"
export TAILTUNE_TEST_SPARK_TUNER="${TAILTUNE_TEST_SPARK_TUNER:-1}"
# one worker process per core (TAILTUNE_TEST_WORKERS=0: no workers); tests of one heavy session server share a
# worker (tests/conftest.py XDIST_GROUPS)
say "pytest"; python -m pytest -n "${TAILTUNE_TEST_WORKERS:-auto}" --dist loadgroup "$@"
say "all checks passed"
