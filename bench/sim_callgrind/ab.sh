#!/usr/bin/env bash
# Side-by-side wall time of two or more versions of simulator/core on the standalone driver (src/main.rs), rounds
# alternated so that the host's drift hits every version alike. Per (large share, policy, selector) it prints, for
# each version, the least and the median over the rounds of the driver's best-of-3, and the least's change against
# the first version (lower is better).
# Usage: bash bench/sim_callgrind/ab.sh ROUNDS SELECTORS "SHARES" POLICIES CORE_DIR [CORE_DIR ...]
#   e.g. git archive HEAD~3 simulator/core bench/sim_callgrind | tar -x -C /tmp/ref
# Each core is driven by the driver that came with it (CORE_DIR/../../bench/sim_callgrind when present), as in
# checksums.sh.
#        bash bench/sim_callgrind/ab.sh 4 ds,c3 "0 0.1" fifo,rein /tmp/ref/simulator/core simulator/core
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
rounds=$1; sels=$2; shares=$3; pols=$4; shift 4
bins=()
for core in "$@"; do
  # builds the driver against that core and finds its binary
  src="$here"
  if [[ -f "$core/../../bench/sim_callgrind/src/main.rs" ]]; then src="$(cd "$core/../../bench/sim_callgrind" && pwd)"; fi
  SIM_CALLGRIND_SRC="$src" SIM_CALLGRIND_WALL=1 bash "$here/run.sh" 10 fifo "$core" round-robin 0 >/dev/null
  bins+=("${TMPDIR:-/tmp}/sim-callgrind-$(cd "$core" && pwd | md5sum | cut -c1-8)/target/release/sim-callgrind")
done
out="$(mktemp)"
for _ in $(seq "$rounds"); do
  for i in "${!bins[@]}"; do
    for share in $shares; do
      "${bins[$i]}" 100000 "$pols" 3 "$sels" "$share" | grep -v '^requests' |
        awk -v v="$((i + 1))" -v s="$share" '{for (j = 1; j <= NF; j++) if ($j == "best") b = $(j + 1); print v, s, $1, $2, b}'
    done
  done
done > "$out"
python3 - "$out" <<'PY'
import collections
import statistics
import sys

runs = collections.defaultdict(list)
for line in open(sys.argv[1]):
    v, share, policy, selector, best = line.split()
    runs[(share, policy, selector, v)].append(float(best))
versions = sorted({k[3] for k in runs}, key=int)
for key in sorted({k[:3] for k in runs}):
    base = min(runs[key + (versions[0],)])
    cells = []
    for v in versions:
        xs = runs[key + (v,)]
        cells.append(f"v{v} min {min(xs):.4f} med {statistics.median(xs):.4f} ({(min(xs) / base - 1) * 100:+.1f}%)")
    print(f"{' '.join(key):28s}", "  ".join(cells))
PY
