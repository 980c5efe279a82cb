"""A/A of the verify step: how often its regression test would roll back a version whose config is the same as the
one before it (the false-rollback rate), on real client reports, judged once at the horizon against judged at
every report window from the first with enough requests (peeking, what re-checks that judge again would do).

Setup: a real memcached (`tests/servers/memcached_server.py`) and the shipped client (`tailtune_client`, batching,
one connection) reading `--keys` keys per request; each report window is one fresh client's report (its own
histogram, as the service stores it) of `--requests` requests. Then `--resamplings` times (seeded): the windows are
shuffled, the first `--horizon` are "before", the next `--horizon` "after" — the same config both sides, windows
from the same run. Verdicts, each the product's test (`control.verify.p99_ratio_test` at the settings' defaults:
alpha, margin, resamples, its fixed seed):

* **fixed horizon** — one test on the `--horizon` windows of each side (what the verify step does);
* **peeking** — a test after each "after" window from the first one holding `verify_min_requests` requests on,
  rolled back when any says worse.

The rate's interval is Clopper-Pearson 95 %. The windows are exchangeable by construction (shuffled), so this
measures the test's own error, not the environment's drift (that is what the reference is for).

    .venv/bin/python -m validation.verify_aa --windows 40 --requests 400 --resamplings 400
"""

from __future__ import annotations

import argparse
import math
import time

import numpy as np
from scipy.stats import beta
from tailtune_client.histogram import LogHistogram
from tailtune_client.memcached import Client

from base.settings import Settings
from control.observations import merge_histograms
from control.verify import p99_ratio_test


def _windows(address: str, windows: int, requests: int, keys: int) -> list[LogHistogram]:
    names = [f"aa-{i}" for i in range(keys)]
    out: list[LogHistogram] = []
    for _ in range(windows):
        with Client([address], config={"memcached_client": {"mode": "batching"}}, poll_interval=0,
                    connections_per_server=1) as client:
            if not out:
                client.set_many({k: b"x" * 100 for k in names})
            for _ in range(requests):
                client.get_many(names)
            report = client.report()
        out.append(merge_histograms(o["all"] for o in report["observations"]))
    return out


def _interval(k: int, n: int) -> tuple[float, float]:
    lo = 0.0 if k == 0 else float(beta.ppf(0.025, k, n - k + 1))
    hi = 1.0 if k == n else float(beta.ppf(0.975, k + 1, n - k))
    return lo, hi


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--windows", type=int, default=40)
    ap.add_argument("--requests", type=int, default=400, help="requests per report window")
    ap.add_argument("--keys", type=int, default=8, help="keys per request")
    ap.add_argument("--horizon", type=int, default=Settings().verify_after_windows)
    ap.add_argument("--resamplings", type=int, default=400)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    if args.windows < 2 * args.horizon:
        ap.error("--windows must be at least twice --horizon")
    from tests.servers.memcached_server import running_memcached

    settings = Settings()
    t0 = time.time()
    with running_memcached() as node:
        hists = _windows(node.address, args.windows, args.requests, args.keys)
    took = time.time() - t0
    first = max(1, math.ceil(settings.verify_min_requests / args.requests))
    rng = np.random.default_rng(args.seed)
    counts = {m: [0, 0] for m in ("windows", "requests")}

    def worse(before: list[LogHistogram], after: list[LogHistogram], method: str) -> bool:
        whole = method == "windows"
        return bool(p99_ratio_test(merge_histograms(before), merge_histograms(after), alpha=settings.verify_alpha,
                                   margin_pct=settings.verify_min_regression_pct,
                                   resamples=settings.verify_bootstrap_resamples,
                                   before_windows=before if whole else (), after_windows=after if whole else ()
                                   )["worse"])

    for _ in range(args.resamplings):
        order = rng.permutation(args.windows)
        before = [hists[i] for i in order[:args.horizon]]
        after = [hists[i] for i in order[args.horizon:2 * args.horizon]]
        for method, c in counts.items():
            c[0] += worse(before, after, method)
            c[1] += any(worse(before, after[:k], method) for k in range(min(first, args.horizon), args.horizon + 1))
    n = args.resamplings
    p99s = [h.quantile_us(0.99) or 0.0 for h in hists]
    print(f"{args.windows} real report windows of {args.requests} requests ({args.keys} keys each) in {took:.0f} s; "
          f"window p99 {min(p99s) / 1000:.3f}..{max(p99s) / 1000:.3f} ms")
    print(f"A/A, {n} resamplings, horizon {args.horizon} windows, alpha {settings.verify_alpha:g}, margin "
          f"{settings.verify_min_regression_pct:g} %:")
    for method, (fixed, peeked) in counts.items():
        for name, k in ((f"resampling {method}, fixed horizon", fixed),
                        (f"resampling {method}, peeking (windows {min(first, args.horizon)}..{args.horizon})",
                         peeked)):
            lo, hi = _interval(k, n)
            print(f"  {name}: false rollbacks {k}/{n} = {k / n:.3f} [95 % CI {lo:.3f}, {hi:.3f}]")


if __name__ == "__main__":
    main()
