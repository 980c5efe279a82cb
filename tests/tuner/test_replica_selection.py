"""TailX, Héron and replica selection in the Cassandra evaluator: exact equality with a direct kvsim replay
(`kvsim.replay` with the same config and seed, no tolerance), common random numbers, conditional params,
and a small study on a bimodal trace (1 KiB / 512 KiB values) that picks among them."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

kvsim = pytest.importorskip("kvsim")

from base.errors import BadInputError  # noqa: E402
from simulation.layout import request_layout  # noqa: E402
from simulation.source import WorkloadSource  # noqa: E402
from tuner.evaluators import KvsimCassandraEvaluator  # noqa: E402
from tuner.space import Candidate, apply_overrides, cassandra_space  # noqa: E402
from tuner.tune import TuneRequest, run_tune  # noqa: E402

SRC = {"profile": "bimodal", "requests": 1200}
SERVERS = 16


@pytest.fixture(scope="module")
def ev() -> KvsimCassandraEvaluator:
    return KvsimCassandraEvaluator(SRC, servers=SERVERS)


def _direct(policy: str, params: dict[str, float], seed: int, *, replica: str,
            rparams: dict[str, float], thr: float | None) -> Any:
    """The replay written out against kvsim alone (what `tailtune simulate` does)."""
    table = WorkloadSource.from_dict(SRC).load()
    lay = request_layout(table, source="t")
    offsets, keys = lay.offsets, lay.keys
    cluster = kvsim.Cluster(servers=SERVERS, slots=8, replication=3, vnodes=1, service_rate=3750.0,
                            net_latency_us=50.0, clients=128)
    model = kvsim.DemandModel.default(3750.0)
    rows = np.asarray(table.column("value_size").to_numpy(zero_copy_only=False), dtype=np.float64)
    info = kvsim.fill_unknown_sizes(lay.take(rows), keys)
    wl = kvsim.Workload(cluster, offsets, keys=keys, mean_demand_s=model.mean_s(info.sizes), load=0.75, seed=seed)
    if thr is None:
        thr = kvsim.default_thr_l(model, info.median_bytes)
    cfg = kvsim.ReplayConfig(policy=policy, params=params, replica=replica, replica_params=rparams, sizes=info.sizes,
                             thr_l_bytes=thr, warmup=0.1, seed=seed)
    return kvsim.replay(wl, cfg)


CASES = [
    # (candidate, direct call: queue policy, its params, selector, its params, thr_l_bytes)
    (Candidate("heron", {"thr_l_bytes": 65536, "queue": "rein"}),
     ("rein", {}, "heron", {"thr_l_bytes": 65536.0}, None)),
    (Candidate("heron", {"thr_l_bytes": 4096, "queue": "fifo"}),
     ("fifo", {}, "heron", {"thr_l_bytes": 4096.0}, None)),
    (Candidate("tailx", {"thr_l_bytes": 16384, "tl_scale": 1.5, "ts_scale": 0.75, "allowance_scale": 1.25,
                         "replica": "c3"}),
     ("tailx", {"thr_l_bytes": 16384.0, "tl_scale": 1.5, "ts_scale": 0.75, "allowance_scale": 1.25}, "c3", {},
      16384.0)),
    (Candidate("tailx", {"thr_l_bytes": 65536, "tl_scale": 0.5, "ts_scale": 2.0, "allowance_scale": 0.5,
                         "replica": "ds"}),
     ("tailx", {"thr_l_bytes": 65536.0, "tl_scale": 0.5, "ts_scale": 2.0, "allowance_scale": 0.5}, "ds", {},
      65536.0)),
    (Candidate("replica", {"replica": "least-outstanding", "queue": "brb-equalmax"}),
     ("brb-equalmax", {}, "least-outstanding", {}, None)),
]


@pytest.mark.parametrize(("cand", "call"), CASES, ids=[c.label() for c, _ in CASES])
def test_evaluator_equals_direct_kvsim_replay(ev: KvsimCassandraEvaluator, cand: Candidate, call: Any) -> None:
    policy, params, replica, rparams, thr = call
    for seed in (0, 2):
        ref = _direct(policy, params, seed, replica=replica, rparams=rparams, thr=thr)
        m = ev.evaluate(cand, seed)
        assert (m.p50_ms, m.p95_ms, m.p99_ms, m.p999_ms, m.mean_ms) == (
            ref.p50_ms, ref.p95_ms, ref.p99_ms, ref.p999_ms, ref.mean_ms)
        assert np.array_equal(ev.latencies_ms(cand, seed), np.asarray(ref.latency_ms))


def test_plain_policy_sees_the_same_sized_workload(ev: KvsimCassandraEvaluator) -> None:
    # round-robin named in the config == the core replay on the sized workload (what the evaluator runs)
    rein = {"k": 4.0, "range_factor": 3.0, "r_q1": 5.0, "rate_step": 1.0, "tau_1": 1.0}
    ref = _direct("rein", rein, 1, replica="round-robin", rparams={}, thr=None)
    assert ev.sized
    assert ev.evaluate(Candidate("rein", rein), 1).p99_ms == ref.p99_ms


def test_common_random_numbers_one_workload_per_seed() -> None:
    ev = KvsimCassandraEvaluator(SRC, servers=SERVERS)
    heron = Candidate("heron", {"thr_l_bytes": 16384, "queue": "fifo"})
    tailx = Candidate("tailx", {"thr_l_bytes": 16384, "tl_scale": 1.0, "ts_scale": 1.0, "allowance_scale": 1.0,
                                "replica": "ds"})
    a = ev.evaluate(heron, 0)
    ev.evaluate(tailx, 0)
    ev.evaluate(Candidate("fifo"), 0)
    assert list(ev._prepared()._workloads) == [(0, SRC["requests"])]  # one materialized workload, shared
    assert ev.evaluate(heron, 0) == a
    ev.evaluate(heron, 0, 0.25)
    assert len(ev._prepared()._workloads) == 2


def test_bad_selector_or_queue_names_the_field(ev: KvsimCassandraEvaluator) -> None:
    with pytest.raises(BadInputError, match="field 'replica'"):
        ev.evaluate(Candidate("replica", {"replica": "psychic", "queue": "fifo"}), 0)
    with pytest.raises(BadInputError, match="field 'queue'"):
        ev.evaluate(Candidate("heron", {"thr_l_bytes": 4096, "queue": "lifo"}), 0)
    with pytest.raises(BadInputError, match="field 'k'"):
        ev.evaluate(Candidate("rein", {"k": "four"}), 0)


def test_space_conditional_params_for_selectors() -> None:
    sp = cassandra_space({"value_size": {"thr_l_candidates": [{"bytes": 4096}, {"bytes": 65536}]}})
    names = {ps.policy: {p.name for p in ps.params} for ps in sp.policies}
    assert names["heron"] == {"thr_l_bytes", "queue"}
    assert names["tailx"] == {"thr_l_bytes", "tl_scale", "ts_scale", "allowance_scale", "replica"}
    assert names["replica"] == {"replica", "queue"}
    assert names["fifo"] == set() and "replica" not in names["rein"]
    small = apply_overrides(sp, policies=["heron"])
    assert len(list(small.grid())) == 2 * 4  # thr_l_bytes × queue disciplines


def test_study_on_bimodal_trace_tunes_heron_and_tailx(tailtune_home: Any, tmp_path: Any) -> None:
    import optuna

    from tuner.study import open_storage

    journal = str(tmp_path / "j.log")
    req = TuneRequest(
        source=WorkloadSource.from_dict(SRC), deployment="cassandra", trials=12, seeds=2,
        storage=journal, policies=("fifo", "heron", "tailx"), mlflow=False, plots=False,
        evaluator_options={"servers": SERVERS}, prefix=0.0,
        overrides={"tailx.replica": {"choices": ["ds", "round-robin"]}},
    )
    doc = run_tune(req).to_json()
    assert doc["policies_not_replayable"] == []
    best = doc["best"]
    assert best["policy"] in ("fifo", "heron", "tailx")
    ev = KvsimCassandraEvaluator(SRC, servers=SERVERS)
    cand = Candidate(best["policy"], best["params"])
    # the reported best is what the evaluator gives for those params on the study's seeds (0, 1)
    p99 = [ev.evaluate(cand, s).p99_ms for s in (0, 1)]
    assert best["p99_ms"] == pytest.approx(sum(p99) / 2, rel=1e-12)
    # the study replayed heron and tailx trials, each asking only its own (conditional) parameters and the
    # patched server's stock knobs (the snitch's only with a snitch: tailx with replica=ds)
    from simulation.stock import SNITCH_KNOBS
    from simulation.stock_knobs import stock_knobs

    study = optuna.load_study(study_name=doc["study"], storage=open_storage(journal))
    knobs = {k.name for k in stock_knobs("java4")}
    client = knobs - set(SNITCH_KNOBS) - {"multiget.chunk"}  # the chunk: only with IN queries
    asked = {t.params["policy"]: set(t.params) for t in study.trials if t.state.name == "COMPLETE"}
    heron = {"policy", "heron.thr_l_bytes", "heron.queue"}
    assert heron | {f"heron.{k}" for k in client} <= asked["heron"] <= heron | {f"heron.{k}" for k in knobs}
    tailx = {"policy", "tailx.thr_l_bytes", "tailx.tl_scale", "tailx.ts_scale", "tailx.allowance_scale",
             "tailx.replica"}
    assert tailx | {f"tailx.{k}" for k in client} <= asked["tailx"] <= tailx | {f"tailx.{k}" for k in knobs}


def test_fanout_rederived_on_the_simulated_cluster() -> None:
    from tuner.fanout import fanout_for_cluster

    # hand-worked: 4 servers, RF 1; tokens → groups 3, 0, 2 | 3, 3 (checked against the cluster's own ring)
    cluster = kvsim.Cluster(servers=4, replication=1)
    tok = np.array([0, 2**62, -(2**62), 5, 6], dtype=np.int64)
    groups = np.frombuffer(cluster._raw.groups_of(tok), dtype=np.uint32)
    assert groups.tolist() == [3, 0, 2, 3, 3]
    f = fanout_for_cluster(np.array([0, 3, 5], dtype=np.int64), tok, cluster)
    assert (f["opsets_mean"], f["opsets_p99"], f["bottleneck_mean"], f["bottleneck_p99"]) == (2.0, 3.0, 1.5, 2.0)
    assert (f["servers"], f["replication"]) == (4, 1)


def test_tune_uses_fanout_of_the_simulated_topology(tailtune_home: Any) -> None:
    # a summary analysed on another topology: its bottleneck would give K ≤ 8; the tuner replaces it
    stale = {"fanout": {"servers": 16, "bottleneck_p99": 1000.0}}
    few = KvsimCassandraEvaluator(SRC, servers=SERVERS)
    many = KvsimCassandraEvaluator(SRC, servers=128)
    f16, f128 = few.fanout(), many.fanout()
    assert f128["bottleneck_p99"] <= f16["bottleneck_p99"]  # more servers: fewer keys per server
    req = TuneRequest(source=WorkloadSource.from_dict(SRC), deployment="cassandra", trials=1, seeds=1,
                      storage="memory", policies=("rein",), mlflow=False, plots=False, summary=stale,
                      evaluator_options={"servers": 128}, prefix=0.0)
    doc = run_tune(req, evaluator=many).to_json()
    assert doc["trials"] == 1
    assert doc["fanout"] == f128 and doc["fanout"]["servers"] == 128
    # single-key requests on 128 servers: bottleneck p99 1 → K up to 3 (clamp), where the stale summary gave 8
    assert (f128["bottleneck_p99"], f128["opsets_p99"]) == (1.0, 1.0)
    assert cassandra_space({"fanout": f128}).policy_space("rein").params[0].high == 3
    assert cassandra_space(stale).policy_space("rein").params[0].high == 8


def test_size_aware_cost_is_searched_only_when_sizes_vary_and_replays_as_kvsim() -> None:
    varied = cassandra_space({"value_size": {"p50": 1024, "p99": 524288, "max": 524288}})
    same = cassandra_space({"value_size": {"p50": 1024, "p99": 1024, "max": 1024}})
    for pol in ("rein", "rein-sbf", "rein-sds"):
        assert "size_aware_cost" in [p.name for p in varied.policy_space(pol).params]
        assert "size_aware_cost" not in [p.name for p in same.policy_space(pol).params]
    assert "size_aware_cost" not in [p.name for p in cassandra_space(None).policy_space("rein").params]


def test_evaluator_size_aware_cost_equals_direct_kvsim_and_changes_rein(ev: KvsimCassandraEvaluator) -> None:
    rein = {"k": 4.0, "range_factor": 3.0, "r_q1": 5.0, "rate_step": 1.0, "tau_1": 1.0}
    table = WorkloadSource.from_dict(SRC).load()
    lay = request_layout(table, source="t")
    offsets, keys = lay.offsets, lay.keys
    cluster = kvsim.Cluster(servers=SERVERS, slots=8, replication=3, vnodes=1, service_rate=3750.0,
                            net_latency_us=50.0, clients=128)
    rows = np.asarray(table.column("value_size").to_numpy(zero_copy_only=False), dtype=np.float64)
    info = kvsim.fill_unknown_sizes(lay.take(rows), keys)
    mean = kvsim.DemandModel.default(3750.0).mean_s(info.sizes)
    wl = kvsim.Workload(cluster, offsets, keys=keys, mean_demand_s=mean, load=0.75, seed=1)
    by_flag = {}
    for flag in (0.0, 1.0):
        ref = kvsim.replay(wl, kvsim.ReplayConfig(policy="rein", params=rein, warmup=0.1,
                                                  size_aware_cost=bool(flag)))
        got = ev.latencies_ms(Candidate("rein", {**rein, "size_aware_cost": flag}), 1)
        assert np.array_equal(got, np.asarray(ref.latency_ms))
        by_flag[flag] = got
    assert not np.array_equal(by_flag[0.0], by_flag[1.0])
