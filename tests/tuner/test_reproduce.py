"""A recommendation is runnable as it is: its policy and params, given verbatim to `tailtune simulate` with the
deployment it was tuned for and each of its seeds, reproduce the per-seed figures behind it exactly."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from simulation.source import WorkloadSource
from tuner.evaluators import KvsimCassandraEvaluator, KvsimMemcachedEvaluator
from tuner.space import Candidate
from tuner.tune import TuneRequest, run_tune

METRICS = ("p50_ms", "p95_ms", "p99_ms", "p999_ms", "mean_ms")


def _args(args: list[str]) -> list[str]:
    if args and args[0] == "tailtune":
        args = args[1:]
    return args if "--json" in args else [*args, "--json"]


def _simulate(args: list[str], home: Path) -> dict[str, Any]:
    """`tailtune ARGS` in a fresh process (the recommendation's own commands, as a user runs them)."""
    env = {**os.environ, "TAILTUNE_HOME": str(home)}
    proc = subprocess.run([sys.executable, "-m", "tailtune", *_args(args)], capture_output=True, text=True,
                          env=env, check=False)
    assert proc.returncode == 0, proc.stderr
    out: dict[str, Any] = json.loads(proc.stdout)
    return out


def _simulate_here(cli: Any, args: list[str]) -> dict[str, Any]:
    """`tailtune ARGS` through the same entry point, in this process (no interpreter start per replay)."""
    res = cli(*_args(args))
    assert res.exit_code == 0, res.stderr
    out: dict[str, Any] = json.loads(res.stdout)
    return out


CASSANDRA_CANDIDATES = [
    Candidate("heron", {"queue": "brb-equalmax", "thr_l_bytes": 65536}),
    Candidate("tailx", {"thr_l_bytes": 16384, "tl_scale": 1.5, "ts_scale": 0.75, "allowance_scale": 1.25,
                        "replica": "c3"}),
    Candidate("replica", {"replica": "least-outstanding", "queue": "rein"}),
    Candidate("rein", {"k": 3, "range_factor": 2.5, "r_q1": 5.0, "rate_step": 1.0, "tau_1": 1.0,
                       "size_aware_cost": 1}),
    Candidate("fifo", {}),
    # a patched policy with stock knobs (coordinator retry, driver executions, IN chunks) and a snitch knob on ds
    Candidate("rein", {"k": 3, "range_factor": 2.5, "r_q1": 5.0, "rate_step": 1.0, "tau_1": 1.0,
                       "speculative_retry": "MIN(90p,2ms)", "driver": "java4",
                       "driver.speculative_execution.max_executions": 2, "driver.speculative_execution.delay": 5.0,
                       "driver.slow_replica_avoidance": 1, "multiget.shape": "in", "multiget.chunk": 4}),
    Candidate("tailx", {"thr_l_bytes": 16384, "replica": "ds", "speculative_retry": "99p",
                        "dynamic_snitch_update_interval": 20, "multiget.shape": "per-partition"}),
]


@pytest.mark.parametrize("cand", CASSANDRA_CANDIDATES, ids=lambda c: c.label()[:60])
def test_cassandra_candidate_reproduces_through_simulate(cand: Candidate, cli: Any) -> None:
    ev = KvsimCassandraEvaluator({"profile": "bimodal", "requests": 1500}, servers=16, load=0.6)
    for seed in (0, 1):
        want = ev.evaluate(cand, seed).as_dict()
        got = _simulate_here(cli, ev.simulate_args(cand, seed))
        assert {k: got[k] for k in METRICS} == {k: want[k] for k in METRICS}, (cand, seed)


def test_a_deployment_on_a_real_ring_reproduces_through_simulate(cli: Any, tmp_path: Path) -> None:
    """The ring travels in the command (`--ring JSON`); `--ring FILE` with the same JSON replays the same."""
    from tests.simulator.test_ring import NTS_RING

    ev = KvsimCassandraEvaluator({"profile": "bimodal", "requests": 1200}, servers=6, replication=3, slots=2,
                                 load=0.6, ring=NTS_RING)
    cand = Candidate("replica", {"replica": "least-outstanding", "queue": "rein"})
    want = ev.evaluate(cand, 1).as_dict()
    args = ev.simulate_args(cand, 1)
    assert json.loads(args[args.index("--ring") + 1]) == NTS_RING
    got = _simulate_here(cli, args)
    assert {k: got[k] for k in METRICS} == {k: want[k] for k in METRICS}
    # from a file, servers and replication derived from the ring
    ring_file = tmp_path / "ring.json"
    ring_file.write_text(json.dumps(NTS_RING))
    i = args.index("--ring")
    rest = args[:i] + args[i + 2:]
    for flag in ("--servers", "--replication"):
        if flag in rest:
            j = rest.index(flag)
            del rest[j:j + 2]
    got = _simulate_here(cli, [*rest, "--ring", str(ring_file)])
    assert {k: got[k] for k in METRICS} == {k: want[k] for k in METRICS}
    # the same deployment on evenly spaced tokens replays differently: the ring is what is replayed
    even = KvsimCassandraEvaluator({"profile": "bimodal", "requests": 1200}, servers=6, replication=3, slots=2,
                                   load=0.6)
    assert even.evaluate(cand, 1).as_dict() != want


def test_a_bad_ring_on_the_command_line_is_one_clear_line(cli: Any, tmp_path: Path) -> None:
    base = ["simulate", "--profile", "bimodal", "--requests", "50", "--policy", "fifo"]
    res = cli(*base, "--ring", str(tmp_path / "missing.json"))
    assert res.exit_code == 2 and "--ring" in res.stderr and "cannot read" in res.stderr
    res = cli(*base, "--ring", "{not json")
    assert res.exit_code == 2 and "not JSON" in res.stderr
    res = cli(*base, "--ring", json.dumps({"local_dc": "dc1", "strategy": {}, "nodes": []}))
    assert res.exit_code == 2 and "ring.strategy.class" in res.stderr


def test_memcached_candidate_reproduces_through_simulate(cli: Any) -> None:
    ev = KvsimMemcachedEvaluator({"profile": "mice-elephant", "requests": 1500}, inter_arrival_us=150.0)
    cand = Candidate("chisel", {"split_keys": 16, "merge": 2, "elephant_threshold": 40})
    for seed in (0, 2):
        want = ev.evaluate(cand, seed).as_dict()
        got = _simulate_here(cli, ev.simulate_args(cand, seed))
        assert {k: got[k] for k in METRICS} == {k: want[k] for k in METRICS}


def test_recommendation_reproduce_commands_give_its_per_seed_figures(tmp_path: Path) -> None:
    req = TuneRequest(source=WorkloadSource(profile="bimodal", requests=1200), deployment="cassandra", trials=5,
                      seeds=2, storage="memory", mlflow=False, plots=False,
                      current=Candidate("heron", {"queue": "brb-equalmax", "thr_l_bytes": 65536}),
                      policies=("heron", "tailx"), evaluator_options={"servers": 16})
    rec = run_tune(req)
    assert rec.tuned_for["seeds"] == [0, 1] and rec.tuned_for["servers"] == 16
    assert rec.tuned_for["source"] == {"profile": "bimodal", "requests": 1200, "trace_seed": 1}
    per_seed = rec.expected["per_seed"]
    assert [p["seed"] for p in per_seed] == [0, 1] and len(rec.reproduce) == 2
    for cmd, figures in zip(rec.reproduce, per_seed, strict=True):
        args = shlex.split(cmd)
        assert args[args.index("--policy") + 1] == rec.policy
        got = _simulate(args, tmp_path)
        assert {k: got[k] for k in METRICS} == {k: figures[k] for k in METRICS}


def test_memcached_sharded_candidate_reproduces_through_simulate(cli: Any) -> None:
    ev = KvsimMemcachedEvaluator({"profile": "mice-elephant", "requests": 800}, pool="sharded", servers=3,
                                 server_addresses="10.0.0.1:11211,10.0.0.2:11211,10.0.0.3:11211")
    cand = Candidate("chisel", {"split_keys": 8, "merge": 2, "elephant_threshold": 40})
    want = ev.evaluate(cand, 1).as_dict()
    got = _simulate_here(cli, ev.simulate_args(cand, 1))
    assert {k: got[k] for k in METRICS} == {k: want[k] for k in METRICS}


def test_patched_recommendation_with_stock_knobs_reproduces(tmp_path: Path) -> None:
    req = TuneRequest(source=WorkloadSource(profile="bimodal", requests=1200), deployment="cassandra", trials=5,
                      seeds=2, storage="memory", mlflow=False, plots=False, server="rein-patched",
                      current=Candidate("rein", {"k": 4, "speculative_retry": "50ms"}), policies=("rein",),
                      alternative_trials=0, evaluator_options={"servers": 16})
    rec = run_tune(req)
    assert rec.policy == "rein"
    # every stock knob of the driver is spelled out (the current config's unset ones at Cassandra's defaults)
    assert rec.params["driver"] == "java4" and "speculative_retry" in rec.params
    assert "driver.speculative_execution.max_executions" in rec.params
    if rec.params["speculative_retry"] != "NEVER":
        assert rec.render["cql"][0].startswith("ALTER TABLE")
    assert "speculative_retry" not in rec.render["json"]["request_scheduler_options"]
    for cmd, figures in zip(rec.reproduce, rec.expected["per_seed"], strict=True):
        args = shlex.split(cmd)
        assert args[args.index("--policy") + 1] == "rein"
        got = _simulate(args, tmp_path)
        assert {k: got[k] for k in METRICS} == {k: figures[k] for k in METRICS}


def test_a_calibrated_deployments_reproduce_commands_run_as_printed(tailtune_home: Path) -> None:
    """A calibrated round trip (101 quantiles) is written next to the other reproduce inputs, under
    `TAILTUNE_HOME/samples`, and the command names that file: it runs as printed, in a fresh process."""
    rtt = [round(0.2 + 0.004 * i + (0.5 if i > 97 else 0.0), 6) for i in range(101)]
    req = TuneRequest(source=WorkloadSource(profile="bimodal", requests=1000), deployment="cassandra", trials=3,
                      seeds=1, storage="memory", mlflow=False, plots=False, policies=("heron",),
                      evaluator_options={"servers": 16, "client_rtt_ms": rtt})
    rec = run_tune(req)
    assert rec.tuned_for["client_rtt_ms"] == rtt
    (cmd,) = rec.reproduce
    args = shlex.split(cmd)
    path = Path(args[args.index("--client-rtt-ms") + 1])
    assert path.parent == tailtune_home / "samples" and path.is_file()
    assert [float(x) for x in path.read_text().split()] == rtt
    assert len(cmd) < 1000
    got = _simulate(args, tailtune_home)
    assert {k: got[k] for k in METRICS} == {k: rec.expected["per_seed"][0][k] for k in METRICS}


def test_quantiles_inline_or_a_path_of_any_length_are_one_clear_line(cli: Any, tmp_path: Path) -> None:
    base = ["simulate", "--profile", "bimodal", "--requests", "50", "--policy", "fifo"]
    rtt = ",".join(repr(0.2 + 0.004 * i) for i in range(101))  # inline, as a user may still give them
    assert cli(*base, "--client-rtt-ms", rtt, "--json").exit_code == 0
    res = cli(*base, "--client-rtt-ms", str(tmp_path / ("q" * 5000)))
    assert res.exit_code == 2 and "--client-rtt-ms" in res.stderr and "cannot read" in res.stderr
    assert len(res.stderr.strip().splitlines()) == 1
