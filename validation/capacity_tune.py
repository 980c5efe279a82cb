"""A calibrated deployment's tune with the node's capacity measured: one real Cassandra node, discovered and calibrated
by the product's own commands with and without `connection.jmx_port`, then `tailtune tune --deployment NAME` on
traces of multigets at fractions of the calibrated capacity, and the tune's model at loads around it.

`python -m validation.capacity_tune [--home DIR] [--partitions N] [--keys K] [--loads 0.5,0.8]
[--sat-loads 0.5,0.9,1.1,1.5] [--requests N] [--trials T] [--seeds S] [--basis node|model] [--nodes N]
[--json-out F]`

A rerun with the same `--home` reuses the node's part (its `node.json`, the deployments in its DB).

Everything goes through the CLI (`python -m tailtune ...`, subprocesses) with a throw-away `TAILTUNE_HOME` (its
sqlite metadata DB): `deployments create / discover / calibrate --json`, `ingest`, `tune --deployment NAME --json`
with a journal study file, which this script then reads with Optuna for the trials' p99s, their seed-to-seed
intervals and the knobs' importances. The node's part (start, load, discover, calibrate) holds the bench lock
(`/tmp/tailtune-bench.lock`, the lock `flock -x` takes); the tunes replay the model only and run after the node is
stopped.

The load of a trace: a multiget of K keys costs the node `cpu_per_request + K × cpu_per_read` (the calibrated
figures), so a load L is L × (cores − background) / (cpu_per_request + K × cpu_per_read) multigets a second (the
node's CPU utilization the utilization law predicts); `--basis model` makes it L × requests_per_s / K, the
model's own measure. That measure, `offered_load` of the tune's
`tuned_for` (reads a second over its servers' slots × rate), is reported next to it. Markdown on stdout
(validation/RESULTS.md § "A calibrated deployment's tune: capacity measured").
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import json
import math
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

KEYSPACE, TABLE = "tailtune_cap", "kv"
LOCK = "/tmp/tailtune-bench.lock"


@contextlib.contextmanager
def _bench_lock() -> Iterator[None]:
    with open(LOCK, "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def _cli(home: Path, *args: str) -> str:
    """`python -m tailtune ARGS` with TAILTUNE_HOME=home; its stdout (stderr echoed to ours, prefixed)."""
    env = {**os.environ, "TAILTUNE_HOME": str(home)}
    cmd = [sys.executable, "-m", "tailtune", *args]
    print(f"$ tailtune {' '.join(args)}", file=sys.stderr, flush=True)
    p = subprocess.run(cmd, env=env, capture_output=True, text=True)
    for line in p.stderr.splitlines():
        if line.strip():
            print(f"  | {line}", file=sys.stderr)
    if p.returncode != 0:
        raise SystemExit(f"tailtune {' '.join(args)}: exit {p.returncode}\n{p.stdout[-2000:]}")
    return p.stdout


def _load_table(host: str, port: int, partitions: int, value_size: int, replication: int) -> None:
    from cassandra import ConsistencyLevel
    from cassandra.cluster import Cluster
    from cassandra.concurrent import execute_concurrent_with_args

    cluster = Cluster([host], port=port)
    try:
        s = cluster.connect()
        s.execute(f"CREATE KEYSPACE {KEYSPACE} WITH replication = {{'class': 'SimpleStrategy', "
                  f"'replication_factor': {int(replication)}}}")
        s.execute(f"CREATE TABLE {KEYSPACE}.{TABLE} (k text PRIMARY KEY, v blob)")
        ins = s.prepare(f"INSERT INTO {KEYSPACE}.{TABLE} (k, v) VALUES (?, ?)")
        ins.consistency_level = ConsistencyLevel.ALL
        res = execute_concurrent_with_args(s, ins, [(f"k{i}", b"v" * value_size) for i in range(partitions)],
                                           concurrency=64, raise_on_first_error=True)
        if any(not r.success for r in res):
            raise SystemExit("loading the table failed")
    finally:
        cluster.shutdown()


def _node_phase(home: Path, partitions: int, value_size: int, nodes: int) -> dict[str, Any]:
    """Start the node (or a loopback cluster of `nodes`, RF = nodes), load the table, register `cap` (jmx_port of
    the contact node) and `idle` (none), discover and calibrate both."""
    from tests.servers.cassandra_cluster import running_cluster
    from tests.servers.cassandra_server import running_cassandra

    out: dict[str, Any] = {"loadavg_before": os.getloadavg()}
    with contextlib.ExitStack() as stack:
        if nodes == 1:
            node: Any = stack.enter_context(running_cassandra())
        else:
            node = stack.enter_context(running_cluster(nodes))[0]
        _load_table(node.host, node.port, partitions, value_size, nodes)
        for name, jmx in (("cap", True), ("idle", False)):
            conn: dict[str, Any] = {"contact_points": [node.host], "port": node.port}
            if jmx:
                conn["jmx_port"] = node.jmx_port
            body = {"name": name, "kind": "cassandra", "topology": {"servers": nodes}, "connection": conn,
                    "tables": [f"{KEYSPACE}.{TABLE}"]}
            spec = home / f"{name}.json"
            spec.write_text(json.dumps(body))
            _cli(home, "deployments", "create", str(spec), "--json")
            out[f"{name}_discover"] = json.loads(_cli(home, "deployments", "discover", name, "--json"))
            out[f"{name}_calibrate"] = json.loads(_cli(home, "deployments", "calibrate", name, "--json"))
            out[f"loadavg_after_{name}"] = os.getloadavg()
    return out


def _write_trace(path: Path, rate: float, requests: int, keys: int, partitions: int, seed: int) -> None:
    """Poisson arrivals at `rate` multigets/s, each of `keys` distinct keys drawn uniformly from the table's."""
    rng = np.random.default_rng(seed)
    ts = np.cumsum(rng.exponential(1.0 / rate, requests))
    with path.open("w") as f:
        f.write("request_id,ts,key,value_size,table\n")
        for r in range(requests):
            for k in rng.choice(partitions, size=keys, replace=False):
                f.write(f"{r},{ts[r]:.7f},k{k},100,{KEYSPACE}.{TABLE}\n")


def _study(storage: Path, name: str) -> dict[str, Any]:
    """The study's complete trials (p99 mean over seeds, its 95 % half-width, params) and the importances."""
    import optuna
    from optuna.storages.journal import JournalFileBackend
    from optuna.trial import TrialState

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    st = optuna.storages.JournalStorage(JournalFileBackend(str(storage)))
    names = [s.study_name for s in optuna.get_all_study_summaries(st)]
    study = optuna.load_study(study_name=next(n for n in names if n.startswith(name)), storage=st)
    trials = []
    for t in study.get_trials(states=(TrialState.COMPLETE,)):
        metrics = t.user_attrs.get("metrics") or {}
        ci = t.user_attrs.get("ci")
        trials.append({"number": t.number, "p99": metrics.get("p99", t.values[0]), "value": t.values[0],
                       "ci": ci[0] if isinstance(ci, list) and ci else ci, "params": t.params,
                       "per_seed": t.user_attrs.get("per_seed")})
    pruned = len(study.get_trials(states=(TrialState.PRUNED,)))
    imp: dict[str, Any]
    try:
        imp = dict(optuna.importance.get_param_importances(study, target=lambda t: t.values[0]))
    except (RuntimeError, ValueError, ZeroDivisionError) as exc:
        imp = {"error": str(exc)}
    return {"trials": trials, "pruned": pruned, "importances": imp}


def _tune(home: Path, deployment: str, dataset: str, trials: int, seeds: int, study: str) -> dict[str, Any]:
    storage = home / f"{study}.journal"
    doc = json.loads(_cli(home, "tune", "--deployment", deployment, "--dataset", dataset, "--trials", str(trials),
                          "--seeds", str(seeds), "--alternative-trials", "0", "--storage", str(storage),
                          "--study", study, "--no-mlflow", "--json"))
    return {"rec": doc, "study": _study(storage, study)}


def _rate(cap: dict[str, Any], load: float, keys: int, basis: str) -> float:
    v = {k: float(e["value"]) for k, e in cap.items()}
    if basis == "model":  # the model's measure: a multiget of K keys is K single-partition requests' worth
        return load * v["requests_per_s"] / keys
    return load * (v["cores"] - v["background_cores"]) / ((v["cpu_per_request_us"] + keys * v["cpu_per_read_us"])
                                                          * 1e-6)


def _dataset(home: Path, name: str, rate: float, requests: int, keys: int, partitions: int, seed: int) -> str:
    path = home / f"{name}.csv"
    known = home / f"{name}.dataset"
    if known.exists():
        return known.read_text()
    _write_trace(path, rate, requests, keys, partitions, seed)
    ds = str(json.loads(_cli(home, "ingest", str(path), "--name", name, "--json"))["id"])
    known.write_text(ds)
    return ds


def _spread(study: dict[str, Any]) -> dict[str, Any]:
    p99 = [t["p99"] for t in study["trials"]]
    hw = [t["ci"] for t in study["trials"] if isinstance(t["ci"], int | float) and math.isfinite(t["ci"])]
    # paired (common random numbers): each trial's per-seed p99 minus the first trial's (the current config's)
    first = next((t for t in study["trials"] if t["number"] == 0), None)
    resolved, best_ratio = 0, 0.0
    if first is not None and first["per_seed"]:
        base = np.array([s[0] for s in first["per_seed"]])
        for t in study["trials"]:
            if t["number"] == 0 or not t["per_seed"] or len(t["per_seed"]) != len(base):
                continue
            d = np.array([s[0] for s in t["per_seed"]]) - base
            half = 4.303 * float(np.std(d, ddof=1)) / math.sqrt(len(d)) if len(d) == 3 else \
                1.96 * float(np.std(d, ddof=1)) / math.sqrt(len(d))
            if abs(d.mean()) > half:
                resolved += 1
            best_ratio = max(best_ratio, abs(float(d.mean())) / half if half > 0 else math.inf)
    return {"n": len(p99), "min": min(p99) if p99 else None, "max": max(p99) if p99 else None,
            "distinct": len({round(x, 6) for x in p99}), "median_hw": float(np.median(hw)) if hw else None,
            "max_hw": max(hw) if hw else None, "paired_resolved": resolved, "paired_ratio": best_ratio}


def main(argv: Sequence[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--home", default=None, help="TAILTUNE_HOME (default: a new temporary directory)")
    ap.add_argument("--partitions", type=int, default=5000)
    ap.add_argument("--value-size", type=int, default=100)
    ap.add_argument("--keys", type=int, default=4, help="keys a multiget")
    ap.add_argument("--nodes", type=int, default=1, help="1: one node; more: a loopback cluster, RF = nodes")
    ap.add_argument("--loads", default="0.5,0.8")
    ap.add_argument("--sat-loads", default="0.5,0.9,1.1,1.5")
    ap.add_argument("--requests", type=int, default=20_000)
    ap.add_argument("--trials", type=int, default=12)
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--basis", choices=("node", "model"), default="node",
                    help="a load's rate: the node's CPU utilization (node) or the model's offered load (model)")
    ap.add_argument("--json-out", default=None)
    a = ap.parse_args(argv)
    home = Path(a.home or tempfile.mkdtemp(prefix="tailtune-capdemo-"))
    home.mkdir(parents=True, exist_ok=True)
    print(f"TAILTUNE_HOME={home}", file=sys.stderr)
    started = time.time()
    saved = home / "node.json"
    if saved.exists():  # a rerun in the same home: the node's part is done
        node = json.loads(saved.read_text())
    else:
        with _bench_lock():
            node = _node_phase(home, a.partitions, a.value_size, a.nodes)
        saved.write_text(json.dumps(node, default=str))
    cap = node["cap_calibrate"].get("capacity")
    if not cap or cap.get("requests_per_s", {}).get("value") is None:
        raise SystemExit(f"no capacity calibrated: {json.dumps(node['cap_calibrate'].get('notes'))}")
    out: dict[str, Any] = {"node": node, "capacity": cap, "basis": a.basis, "keys": a.keys, "tunes": [],
                           "saturation": []}
    for load in (float(x) for x in a.loads.split(",")):
        rate = _rate(cap, load, a.keys, a.basis)
        tag = f"{a.basis}-k{a.keys}-load{load:g}"
        ds = _dataset(home, tag, rate, a.requests, a.keys, a.partitions, 1)
        for dep in ("cap", "idle"):
            t = _tune(home, dep, ds, a.trials, a.seeds, f"{dep}-{tag}")
            out["tunes"].append({"deployment": dep, "load": load, "rate": rate, "dataset": ds, **t})
    for load in (float(x) for x in a.sat_loads.split(",")):
        rate = _rate(cap, load, a.keys, a.basis)
        tag = f"{a.basis}-k{a.keys}-sat{load:g}"
        ds = _dataset(home, tag, rate, a.requests, a.keys, a.partitions, 2)
        t = _tune(home, "cap", ds, 1, a.seeds, f"sat-{tag}")
        out["saturation"].append({"load": load, "rate": rate, "dataset": ds, **t})
    out["wall_s"] = time.time() - started
    if a.json_out:
        Path(a.json_out).write_text(json.dumps(out, indent=1, default=str))
    _report(out)


def _report(out: dict[str, Any]) -> None:
    cap = out["capacity"]
    print("| capacity figure | value | 95 % interval |\n|---|---|---|")
    for k, e in cap.items():
        iv = e.get("interval")
        print(f"| {k} | {e['value']:.4g} | {'–' if iv is None else f'{iv[0]:.4g} – {iv[1]:.4g}'} |")
    print(f"\nload average: before {out['node']['loadavg_before']}, after calibrate "
          f"{out['node'].get('loadavg_after_cap')}\n")
    basis = "node CPU" if out.get("basis", "node") == "node" else "model"
    print(f"| deployment | load ({basis}) | multigets/s | model offered_load | trials | p99 min–max ms | distinct | "
          "median / max seed half-width ms | trials resolved vs current (paired) | baseline p99 ms | best p99 ms "
          "(config) | verdict | importances |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for t in out["tunes"]:
        rec, sp = t["rec"], _spread(t["study"])
        tf = rec.get("tuned_for") or {}
        imp = t["study"]["importances"]
        imp_s = ", ".join(f"{k} {v:.2f}" for k, v in imp.items()) if "error" not in imp else imp["error"]
        base = rec.get("baseline") or {}
        best = rec.get("best") or {}
        print(f"| {t['deployment']} | {t['load']:g} | {t['rate']:,.0f} | {_f(tf.get('offered_load'))} | {sp['n']} "
              f"(+{t['study']['pruned']} pruned) | {_f(sp['min'])}–{_f(sp['max'])} | {sp['distinct']} | "
              f"{_f(sp['median_hw'])} / {_f(sp['max_hw'])} | {sp['paired_resolved']} (max {sp['paired_ratio']:.1f}×) "
              f"| {_f(base.get('p99_ms'))} | {_f(best.get('p99_ms'))} ({rec.get('policy')} {rec.get('params')}) | "
              f"{rec.get('verdict')} | {imp_s} |")
    print("\n| load | multigets/s | model offered_load | baseline p99 ms | baseline p50 ms |\n|---|---|---|---|---|")
    for t in out["saturation"]:
        rec = t["rec"]
        base = rec.get("baseline") or {}
        print(f"| {t['load']:g} | {t['rate']:,.0f} | {_f((rec.get('tuned_for') or {}).get('offered_load'))} | "
              f"{_f(base.get('p99_ms'))} | {_f(base.get('p50_ms'))} |")


def _f(x: Any) -> str:
    return f"{x:.4g}" if isinstance(x, int | float) else str(x)


if __name__ == "__main__":
    main()
