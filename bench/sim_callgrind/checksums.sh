#!/usr/bin/env bash
# Bit-identity check for simulator work: replays a fixed-seed set of cases with two versions of simulator/core
# and compares, per case, the FNV checksum and sum of every request latency and a checksum of every other
# reported figure. Cases: (policy, replica selector, value-size mix) on the Cassandra engine; server speeds and
# slowdowns, writes, closed-loop clients, per-op records and warm-up cuts (driver mode `ext`); the memcached
# engine, batching and chisel at several split / merge levels and seeds (driver mode `memcached`); the `stock`
# policy — coordinator speculative retry forms, stalls, the drivers' speculative executions and routing, the
# multiget shapes — over `dynamic-snitch`, `ds` and round-robin (driver mode `stock`, run when the driver has it;
# a reference whose driver lacks it is compared on the other cases and the stock cases are only counted).
# Prints "IDENTICAL" or the differing lines; exit status 1 on a difference.
# Usage: bash bench/sim_callgrind/checksums.sh BEFORE_CORE_DIR [AFTER_CORE_DIR=simulator/core]
# BEFORE_CORE_DIR: a copy of simulator/core of the reference version, e.g.
#   git archive HEAD simulator/core | tar -x -C /tmp/ref   →   /tmp/ref/simulator/core
# (a copy outside the workspace needs edition/version/license spelled out instead of `.workspace = true`:
# run.sh patches its Cargo.toml in place when needed).
# Each core is replayed by the driver that came with it: CORE_DIR/../../bench/sim_callgrind when that exists
# (so `git archive HEAD simulator/core bench/sim_callgrind | tar -x -C /tmp/ref` keeps a reference whose driver
# speaks the reference core's API), else this directory's driver. The printed case lines are what is compared.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
before="$(cd "$1" && pwd)"; after="$(cd "${2:-$here/../../simulator/core}" && pwd)"
policies=fifo,rein-sbf,rein-sds,rein,brb-equalmax,brb-unifincr,oracle,tailx,duplicate,speculative
run_cases() {
  local core="$1"
  local src="$here"
  if [[ -f "$core/../../bench/sim_callgrind/src/main.rs" ]]; then src="$(cd "$core/../../bench/sim_callgrind" && pwd)"; fi
  SIM_CALLGRIND_SRC="$src" SIM_CALLGRIND_WALL=1 bash "$here/run.sh" 10 fifo "$core" round-robin 0 >/dev/null
  local bin="${TMPDIR:-/tmp}/sim-callgrind-$(echo "$core" | md5sum | cut -c1-8)/target/release/sim-callgrind"
  # one value size: every selector (and parameter variants) under every policy
  "$bin" 4000 "$policies" 1 round-robin,random,least-outstanding,least-outstanding:global=1,ds,c3,c3:rate_control=0,heron 0
  # 10% of keys 512 KiB (size-aware cost, exact size estimates): held opsets with Héron at capacity 8
  "$bin" 4000 "$policies" 1 round-robin,random,least-outstanding,ds,c3,heron:busy_capacity=8 0.1
  # unstable Héron (literal busy rule, capacity 3): thousands of held opsets and retries
  "$bin" 1000 fifo,rein,tailx 1 heron,heron:busy_capacity=3 0.1
  # short C3 rate windows (held opsets), fast DS ticks with a short window, Héron at capacity 2
  "$bin" 4000 fifo,rein 1 c3:rate_interval=0.5,ds:update_ms=1/window=5,heron:busy_capacity=2 0.02
  # server speeds / slowdowns, writes, closed-loop clients, records, warm-up cuts
  "$bin" ext 3000
  # the memcached engine
  "$bin" memcached 4000
  # stock Cassandra: coordinator retry, stalls, drivers, multiget shapes
  if grep -q 'Some("stock")' "$src/src/main.rs"; then "$bin" stock 3000; fi
}
a="$(mktemp)"; b="$(mktemp)"
run_cases "$before" | grep -v '^requests' | sed -E 's/ wall [0-9.]+ s \([^)]*\)//; s/ cpu [0-9.]+ s$//' > "$a"
run_cases "$after" | grep -v '^requests' | sed -E 's/ wall [0-9.]+ s \([^)]*\)//; s/ cpu [0-9.]+ s$//' > "$b"
if ! grep -q '^stock ' "$a"; then
  echo "$(grep -c '^stock ' "$b" || true) stock cases without a reference (the reference driver has no stock mode)"
  grep -v '^stock ' "$b" > "$b.common"; mv "$b.common" "$b"
fi
echo "$(wc -l < "$a") cases"
if diff "$a" "$b"; then echo IDENTICAL; else exit 1; fi
