#!/usr/bin/env bash
# Side-by-side run of bench/sim_speed.py against the kvsim Python module built from two or more git revisions (the
# product path: the tuner replays through this module, whose code layout differs from the standalone driver's).
# Each revision's wheel is built in a throw-away worktree and installed into its own directory; the rounds
# alternate the revisions. Prints one line per (revision, round, selector, policy, values): M events/s.
# sim_speed.py replays through `kvsim.replay(workload, ReplayConfig)`: every revision must have it (38b587b on).
# Usage: bash bench/sim_speed_ab.sh ROUNDS "SIM_SPEED_ARGS" REV [REV ...]
#   e.g. bash bench/sim_speed_ab.sh 3 "--repeat 5 --core-policies none --replica ds,c3 --values uniform,mix" \
#          38b587b HEAD
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=$1; args=$2; shift 2
work="$(mktemp -d)"
trap 'for w in "$work"/wt-*; do git worktree remove --force "$w" 2>/dev/null || true; done; rm -rf "$work"' EXIT
for rev in "$@"; do
  sha=$(git rev-parse --short "$rev")
  git worktree add -q --detach "$work/wt-$sha" "$sha"
  (cd "$work/wt-$sha" && "$OLDPWD/.venv/bin/maturin" build --release -q -m simulator/py/Cargo.toml -o "$work/whl-$sha" \
    >/dev/null 2>&1)
  .venv/bin/pip install -q --no-deps --target "$work/site-$sha" "$work"/whl-"$sha"/*.whl
done
for r in $(seq "$rounds"); do
  for rev in "$@"; do
    sha=$(git rev-parse --short "$rev")
    # shellcheck disable=SC2086  # the benchmark's arguments are meant to split
    PYTHONPATH="$work/site-$sha:." .venv/bin/python bench/sim_speed.py $args |
      awk -v rev="$rev" -v r="$r" 'NF >= 8 && ($3 == "uniform" || $3 == "mix") {print rev, "round", r, $1, $2, $3, $6}'
  done
done
