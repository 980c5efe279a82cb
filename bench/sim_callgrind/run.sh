#!/usr/bin/env bash
# Instruction counts of the replay (the driver's `replay_case`, which calls the core's replay API) on the
# sim_speed.py model (machine-independent, repeatable on a busy machine) plus a latency checksum per (policy,
# replica selector).
# Usage: bash bench/sim_callgrind/run.sh [requests=20000] [policies=fifo,rein] [core_dir=simulator/core]
#        [selectors=round-robin] [large_share=0]
# core_dir lets a copy of another version of simulator/core be measured with the same driver; selectors and
# large_share are passed to the driver (src/main.rs: `name[:param=value[/param=value]]`, share of 512 KiB keys).
# SIM_CALLGRIND_WALL=N: instead of callgrind, run the driver natively N times per run and print wall times.
# SIM_CALLGRIND_SRC=DIR: the driver's sources (DIR/src/*.rs) instead of this directory's, e.g. the driver that
# came with an older core (its API may differ).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
n="${1:-20000}"; policies="${2:-fifo,rein}"; core="$(cd "${3:-$here/../../simulator/core}" && pwd)"
selectors="${4:-round-robin}"; share="${5:-0}"
work="${TMPDIR:-/tmp}/sim-callgrind-$(echo "$core" | md5sum | cut -c1-8)"
src="$(cd "${SIM_CALLGRIND_SRC:-$here}" && pwd)"
root="$(cd "$here/../.." && pwd)"
# a copy of simulator/core outside this workspace needs its workspace keys spelled out
if [[ "$core" != "$root/simulator/core" ]] && grep -q 'workspace = true' "$core/Cargo.toml"; then
  sed -i 's/edition.workspace = true/edition = "2021"/; s/version.workspace = true/version = "0.1.0"/;
          s/license.workspace = true/license = "Apache-2.0"/' "$core/Cargo.toml"
fi
# The driver is built as a copy of its own, a workspace of one against $core: a workspace member's manifest takes
# the root's package keys and profiles (a driver from before it joined the workspace carries its own). Line-level
# debug info for callgrind's annotations, as the driver always had.
rm -rf "$work/src"; mkdir -p "$work/src"
cp "$src"/src/*.rs "$work/src/"
{
  sed "s|path = \"../../simulator/core\"|path = \"$core\"|" "$src/Cargo.toml"
  if ! grep -q '^\[workspace\]' "$src/Cargo.toml"; then
    printf '\n[workspace]\n'; sed -n '/^\[workspace.package\]/,$p' "$root/Cargo.toml"
  fi
} > "$work/Cargo.toml"
cargo build --release --quiet --config profile.release.debug=1 --manifest-path "$work/Cargo.toml" \
  --target-dir "$work/target"
bin="$work/target/release/sim-callgrind"
if [[ -n "${SIM_CALLGRIND_WALL:-}" ]]; then
  "$bin" "$n" "$policies" "$SIM_CALLGRIND_WALL" "$selectors" "$share"
  exit 0
fi
IFS=, read -ra ps <<< "$policies"
IFS=, read -ra ss <<< "$selectors"
for s in "${ss[@]}"; do
  for p in "${ps[@]}"; do
    out="$work/callgrind.$p.${s//[:\/=]/_}.out"
    valgrind --tool=callgrind --callgrind-out-file="$out" --toggle-collect='sim_callgrind::replay_case*' \
      "$bin" "$n" "$p" 1 "$s" "$share" 2>&1 | grep -E "^$p|Collected" | sed "s/^==[0-9]*== //"
  done
done
