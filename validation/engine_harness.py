"""What the validation scripts that measure through the live replay engine (`control.replay.run_replay`,
docs/replay.md) share: a throw-away deployment around real servers, and the report printed.

* `engine_home(prefix, env)`: a temporary `TAILTUNE_HOME` (its SQLite metadata database, its dataset store) with
  the given `TAILTUNE_*` settings, the settings reloaded; the home is removed and the environment restored on exit.
* `ingest(settings, path)`: a trace file (CSV or Parquet, canonical columns) ingested as a dataset, its id.
* `write_trace(path, ...)`: a generated trace: Poisson arrivals at `rate` requests per second for `seconds`, each
  request of `keys` distinct keys drawn Zipf(1.1) over `partitions` keys named `prefix<i>`, each key's value size
  fixed (`value_size`) or drawn from 100–2,000 bytes (seeded).
* `register(settings, body)`: a deployment created as an admin creates it (`replay_allowed` is admin-only:
  `control.grants`), its id.
* `discover(settings, id)`, `calibrate(settings, id)`: the product's discovery and calibration of it
  (`control.discovery.discover_deployment`, `control.calibration.calibrate_deployment`), their findings;
  `stored_model(settings, id)`: the model they stored.
* `cassandra_deployment(settings, nodes, ...)`: the user's keyspace and table created on real nodes, and the
  deployment of them registered (contact point node 1, `tables` that table).
* `replay(name, dataset, arms, ...)`: `run_replay` with a progress line on stderr; a run refused for its
  generator's lag (`LagTooHigh`) is kept, with the reason in `notes` (the scripts print the lag beside it).
* `print_report(doc)`: the report as a markdown table (observed and predicted per arm, the kind's counters per arm,
  each comparison with its interval or why there is none, the generator's rate and lag).
* Cassandra's variants as arms: `stock_arms(variants)` — each `speculative_retry` value an arm (`arm_name`: the
  value with what an arm name cannot hold replaced), its SPEC `stock:speculative_retry=V,multiget.shape=in` (a
  multiget is one `SELECT ... WHERE k IN ?`, as the scripts read); `flattened(doc)`: whether the engine replayed each
  multiget as its keys' one-partition reads (a report from a flattening engine), and `MULTIGET_NOTE`, what the
  scripts print then.
* `Phases`: an `on_progress` that calls `on_measure()` when the engine starts sending (its first `replay` stage
  past the load: the warm-up's start, within the progress relay's 0.25 s) and `on_end()` when it stops (its
  `predict` stage, or on leaving the `with`), with the monotonic times of both and `sample()` (the JVMs' CPU) at
  both: what the scripts hang their stalls and their CPU counters on.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import sys
import tempfile
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["MULTIGET_NOTE", "Phases", "arm_name", "calibrate", "cassandra_deployment", "discover", "engine_home",
           "flattened", "ingest", "print_report", "register", "replay", "stock_arms", "stored_model", "write_trace"]

MULTIGET_NOTE = ("the engine replayed one partition per read: each multiget ran as its keys' reads at its arrival, "
                 "and the model replayed the same one-key reads")


def arm_name(variant: str) -> str:
    """An arm name (`[A-Za-z0-9_-]{1,64}`) for a `speculative_retry` value: `MIN(99p,5ms)` → `MIN_99p_5ms`."""
    import re

    return re.sub(r"[^A-Za-z0-9_-]+", "_", variant).strip("_")[:64] or "arm"


def stock_arms(variants: Sequence[str], *, multiget: bool = True, extra: str = "") -> list[tuple[str, str]]:
    """(arm name, SPEC) of each `speculative_retry` variant (module doc); `extra`: more `k=v` for every arm."""
    out = []
    for v in variants:
        params = [f"speculative_retry={v}", *(["multiget.shape=in"] if multiget else []), *filter(None, [extra])]
        out.append((arm_name(v), "stock:" + ",".join(params)))
    return out


def flattened(doc: Mapping[str, Any]) -> bool:
    return any("replayed as a read of its own" in n for n in doc.get("notes", []))


class Phases:
    """`on_progress` for `replay` (module doc)."""

    def __init__(self, on_measure: Callable[[], None] = lambda: None, on_end: Callable[[], None] = lambda: None,
                 sample: Callable[[], float] | None = None) -> None:
        self.on_measure, self.on_end, self.sample = on_measure, on_end, sample
        self.started: float | None = None
        self.ended: float | None = None
        self.samples: list[float] = []  # `sample()` at the start and at the end

    @property
    def sampled(self) -> float:
        """`sample()` at the end less at the start (0 before both)."""
        return self.samples[1] - self.samples[0] if len(self.samples) == 2 else 0.0

    @property
    def span_s(self) -> float:
        return (self.ended or 0.0) - (self.started or 0.0) if self.ended is not None else 0.0

    def __call__(self, stage: str, fraction: float) -> None:
        import time

        if stage == "replay" and fraction > 0.26 and self.started is None:
            self.started = time.monotonic()
            if self.sample is not None:
                self.samples.append(self.sample())
            self.on_measure()
        elif stage in ("predict", "cleanup") and self.started is not None and self.ended is None:
            self.end()

    def end(self) -> None:
        import time

        if self.started is not None and self.ended is None:
            self.ended = time.monotonic()
            if self.sample is not None:
                self.samples.append(self.sample())
            self.on_end()

    def __enter__(self) -> Phases:
        return self

    def __exit__(self, *exc: object) -> None:
        self.end()


@contextlib.contextmanager
def engine_home(prefix: str, env: Mapping[str, str] | None = None) -> Iterator[Any]:
    """A temporary TAILTUNE_HOME with `env` (module doc); yields its Settings."""
    from base.settings import get_settings

    home = Path(tempfile.mkdtemp(prefix=f"tailtune-{prefix}-"))
    wanted = {"TAILTUNE_HOME": str(home), **dict(env or {})}
    saved = {k: os.environ.get(k) for k in wanted}
    os.environ.update(wanted)
    get_settings.cache_clear()
    try:
        yield get_settings()
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        get_settings.cache_clear()
        shutil.rmtree(home, ignore_errors=True)


def ingest(settings: Any, path: Path) -> str:
    from ingest.pipeline import ingest_file

    return str(ingest_file(path, settings=settings).id)


def write_trace(path: Path, *, rate: float, seconds: float, partitions: int, keys: int = 1, seed: int = 1,
                value_size: int | None = None, prefix: str = "item") -> int:
    """The generated trace of the module doc as CSV at `path`; the number of requests."""
    rng = np.random.default_rng(seed)
    n = int(rate * seconds)
    ts = np.cumsum(rng.exponential(1.0 / rate, size=n))
    p = np.arange(1, partitions + 1, dtype=np.float64) ** -1.1
    p /= p.sum()
    sizes = (np.full(partitions, value_size) if value_size is not None
             else rng.integers(100, 2001, size=partitions))
    with path.open("w") as out:
        out.write("request_id,ts,key,value_size\n")
        for i in range(n):
            chosen = rng.choice(partitions, size=keys, replace=False, p=p) if keys > 1 else \
                [int(rng.choice(partitions, p=p))]
            for k in chosen:
                out.write(f"{i},{ts[i]:.6f},{prefix}{k},{sizes[k]}\n")
    return n


def register(settings: Any, body: Mapping[str, Any]) -> int:
    """Deployment `body` created by an admin principal (so `replay_allowed` may be set); its id."""
    from control import deployments
    from control.db import database_for
    from control.deployment_spec import DeploymentCreate
    from control.tokens import Principal

    db = database_for(settings.resolved_database_url)
    try:
        with db.session() as s:
            row = deployments.create(s, settings, DeploymentCreate.model_validate(dict(body)),
                                     Principal("validation", "admin"))
            s.flush()
            return int(row.id)
    finally:
        db.dispose()


def discover(settings: Any, deployment_id: int, *, profile_servers: bool = False) -> dict[str, Any]:
    from control.db import database_for
    from control.discovery import discover_deployment

    db = database_for(settings.resolved_database_url)
    try:
        return discover_deployment(db, settings, deployment_id, profile_servers=profile_servers,
                                   log=lambda m: print(f"  discovery: {m}", file=sys.stderr, flush=True))
    finally:
        db.dispose()


def calibrate(settings: Any, deployment_id: int) -> dict[str, Any]:
    from control.calibration import calibrate_deployment
    from control.db import database_for

    db = database_for(settings.resolved_database_url)
    try:
        return calibrate_deployment(db, settings, deployment_id,
                                    log=lambda m: print(f"  calibration: {m}", file=sys.stderr, flush=True))
    finally:
        db.dispose()


def stored_model(settings: Any, deployment_id: int) -> dict[str, Any]:
    """The deployment's model as its row holds it (discovery's and calibration's inputs, readings, notes)."""
    from control.db import database_for
    from control.db.models import DeploymentRow

    db = database_for(settings.resolved_database_url)
    try:
        with db.session() as s:
            row = s.get(DeploymentRow, deployment_id)
            return dict(row.model or {}) if row is not None else {}
    finally:
        db.dispose()


def cassandra_deployment(settings: Any, nodes: Sequence[Any], *, name: str = "shop", keyspace: str = "shop",
                         table: str = "items", replication: int = 1, driver: str = "java4") -> int:
    """`keyspace.table (k text PRIMARY KEY, v blob)` (SimpleStrategy `replication`) on `nodes`, and the
    deployment of them: `tables` that table, `replay_allowed`, contact point node 1, the topology declared."""
    from cassandra.cluster import Cluster

    cluster = Cluster([nodes[0].host], port=nodes[0].port)
    try:
        session = cluster.connect()
        session.execute(f"CREATE KEYSPACE IF NOT EXISTS {keyspace} WITH replication = "
                        f"{{'class': 'SimpleStrategy', 'replication_factor': {int(replication)}}}")
        session.execute(f"CREATE TABLE IF NOT EXISTS {keyspace}.{table} (k text PRIMARY KEY, v blob)")
    finally:
        cluster.shutdown()
    return register(settings, {
        "name": name, "kind": "cassandra", "tables": [f"{keyspace}.{table}"], "replay_allowed": True,
        "driver": driver, "topology": {"servers": len(nodes), "replication": replication},
        "connection": {"contact_points": [nodes[0].host], "port": nodes[0].port}})


def replay(name: str, dataset: str, arms: Sequence[tuple[str, str]], *, settings: Any,
           on_progress: Callable[[str, float], None] | None = None, **kw: Any) -> dict[str, Any]:
    """`run_replay` (module doc); the report's dict, a lag refusal's included with its reason in `notes`."""
    from control.replay import LagTooHigh, run_replay

    shown = [""]

    def progress(stage: str, fraction: float) -> None:
        if on_progress is not None:
            on_progress(stage, fraction)
        line = f"{stage} {fraction:.0%}"
        if line != shown[0]:
            shown[0] = line
            print(f"  {name}: {line}", file=sys.stderr, flush=True)

    try:
        doc = run_replay(name, dataset, list(arms), settings=settings, on_progress=progress, **kw).as_dict()
    except LagTooHigh as exc:
        doc = exc.report.as_dict()
        doc["notes"].append(f"refused as a comparison: {exc}")
    return doc


def _f(d: Mapping[str, Any]) -> str:
    return " / ".join("-" if d.get(k) is None else f"{d[k]:.3f}" for k in ("p50_ms", "p95_ms", "p99_ms"))


def print_report(doc: Mapping[str, Any], out: Callable[[str], None] = print) -> None:
    """The report as markdown (module doc)."""
    g, r = doc["generator"], doc["rate"]
    out(f"{doc['duration_s']:.0f} s measured, {doc['blocks']} blocks of {doc['block_s']:g} s; "
        f"{r['achieved_per_s']:.0f}/{r['intended_per_s']:.0f} requests/s (rate scale {r['scale']:.3g}); generator "
        f"{g['driver']}, {g['cpu_us_per_request']:.0f} µs CPU per request, lag p50/p99/max "
        f"{g['lag_ms']['p50']:.2f}/{g['lag_ms']['p99']:.2f}/{g['lag_ms']['max']:.2f} ms (ok: {g['lag_ok']})")
    counters = sorted({k for a in doc["cluster"].get("arms", {}).values() for k in a})
    out("")
    out("| arm | config | requests | errors | observed p50 / p95 / p99 ms | predicted p50 / p95 / p99 ms | "
        + " | ".join(counters) + " |")
    out("|---" * (6 + len(counters)) + "|")
    for arm in doc["arms"]:
        n = arm["name"]
        o, p = doc["observed"].get(n, {}), doc["predicted"].get(n, {})
        c = doc["cluster"].get("arms", {}).get(n, {})
        params = ",".join(f"{k}={v}" for k, v in sorted((arm["config"].get("params") or {}).items()))
        out(f"| {n} | {arm['config'].get('policy')}:{params} | {o.get('requests', 0)} | {o.get('errors', 0)} | "
            f"{_f(o)} | {_f(p)} | " + " | ".join(str(c.get(k, "-")) for k in counters) + " |")
    out("")
    for c in doc["comparisons"]:
        if c["interval_pct"] is None:
            out(f"* {c['metric']} {c['candidate']} vs {c['baseline']}: not estimated ({c['reason']})")
        else:
            lo, hi = c["interval_pct"]
            out(f"* {c['metric']} {c['candidate']} vs {c['baseline']}: {c['diff_pct']:+.1f} % [{lo:+.1f}, {hi:+.1f}]")
    inter = doc["interference"]
    out(f"* interference flagged: {inter['flagged']} ({inter['reason']})")
    out(f"* fidelity: agreement {doc['fidelity'].get('agreement')}, regret {doc['fidelity'].get('mean_regret_pct')}")
    for note in doc["notes"]:
        out(f"* note: {note}")
