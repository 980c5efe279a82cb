#!/usr/bin/env bash
# Instruction counts of kvsim_core::engine::run on the sim_speed.py model (machine-independent, repeatable on a
# busy machine) plus a latency checksum per policy.
# Usage: bash bench/sim_callgrind/run.sh [requests=20000] [policies=fifo,rein] [core_dir=simulator/core]
# core_dir lets a copy of another version of simulator/core be measured with the same driver.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
n="${1:-20000}"; policies="${2:-fifo,rein}"; core="$(cd "${3:-$here/../../simulator/core}" && pwd)"
work="${TMPDIR:-/tmp}/sim-callgrind-$(echo "$core" | md5sum | cut -c1-8)"
mkdir -p "$work/src"
cp "$here/src/main.rs" "$work/src/main.rs"
sed "s|path = \"../../simulator/core\"|path = \"$core\"|" "$here/Cargo.toml" > "$work/Cargo.toml"
cargo build --release --quiet --manifest-path "$work/Cargo.toml" --target-dir "$work/target"
bin="$work/target/release/sim-callgrind"
IFS=, read -ra ps <<< "$policies"
for p in "${ps[@]}"; do
  out="$work/callgrind.$p.out"
  valgrind --tool=callgrind --callgrind-out-file="$out" --toggle-collect='kvsim_core::engine::run*' \
    "$bin" "$n" "$p" 1 2>&1 | grep -E "^$p|Collected" | sed "s/^==[0-9]*== //"
done
