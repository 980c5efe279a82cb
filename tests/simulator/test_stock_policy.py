"""`simulate --policy stock`: the speculative_retry text and the driver and multiget knobs reach kvsim, the extra
reads (coordinator retries and driver executions) are counted in `ops`, knobs a driver lacks are refused with the
reason, and stalls are part of the deployment."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import kvsim
import numpy as np
import pytest

from base.errors import BadInputError
from simulation import CassandraDeployment, resolve
from simulation.stock import NOT_MODELLED
from simulation.stock_knobs import STOCK_KNOBS, stock_knobs

_BASE = ("simulate", "--profile", "soundcloud", "--requests", "3000", "--policy", "stock", "--json")


def _sim(cli: Any, *extra: str) -> dict[str, Any]:
    r = cli(*_BASE, *extra)
    assert r.exit_code == 0, r.stderr
    out: dict[str, Any] = json.loads(r.stdout)
    return out


def test_resolve_maps_the_knobs_to_kvsim() -> None:
    r = resolve("stock", {"speculative_retry": "min(5ms, 99PERCENTILE)", "dynamic_snitch_reset_interval": 60000})
    assert (r.queue, r.replica) == ("stock", "dynamic-snitch")
    assert r.queue_params == {
        "spec_kind": 4.0,
        "spec_percentile": 99.0,
        "spec_fixed_ms": 5.0,
        # the java4 driver's defaults (from stock_knobs): no driver hedging, slow-replica avoidance on
        "driver": 0.0,
        "se_delay_ms": 100.0,
        "se_max": 1.0,
        "slow_avoid": 1.0,
        "shape": 0.0,
        "chunk": 0.0,
    }
    assert r.replica_params == {"badness": 1.0, "update_ms": 100.0, "reset_ms": 60000.0}
    ds = resolve("stock", {"replica": "ds", "dynamic_snitch_reset_interval": 60000})
    assert (ds.replica, ds.replica_params) == ("ds", {"badness": 1.0, "update_ms": 100.0, "reset_s": 60.0})
    assert resolve("stock", {"read_timeout_ms": 2000}).replica_params["timeout_ms"] == 2000.0
    assert resolve("stock", {}).queue_params["spec_kind"] == 2.0  # default 99p


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"speculative_retry": "MIN(99p,95p)"}, "different types"),
        ({"speculative_retry": "100p"}, "between 0.0 and 100.0"),
        ({"driver": "go"}, "java4, python"),
        ({"driver.shuffle_replicas": 1}, "not a setting of the java4 driver: the Java driver 4 always shuffles"),
        (
            {"driver": "python", "driver.slow_replica_avoidance": 0},
            "not a setting of the python driver: the Python driver has no slow-replica avoidance",
        ),
        ({"multiget.shape": "per-partition", "multiget.chunk": 4}, "applies only with multiget.shape=in"),
        ({"multiget.shape": "IN"}, "must be one of in, per-partition"),
        ({"driver.speculative_execution.max_executions": 0}, r"must be an integer in \[1, 2147483647\], got 0"),
        ({"driver.speculative_execution.max_executions": 1.5}, r"must be an integer in \[1, 2147483647\]"),
        ({"driver.speculative_execution.delay": -1}, r"must be a finite number in \[0, 2147483647\]"),
        ({"driver": "python", "driver.shuffle_replicas": 2}, "0 or 1"),
        ({"k": 3.0}, "unknown parameter 'k'"),
    ],
)
def test_bad_knobs_are_named(params: dict[str, Any], message: str) -> None:
    with pytest.raises(BadInputError, match=message):
        resolve("stock", params)


def test_every_knob_is_modelled_and_the_driver_knobs_are_per_driver() -> None:
    assert NOT_MODELLED == {}
    assert all(k.modelled for k in STOCK_KNOBS)
    java = {k.name for k in stock_knobs("java4")}
    python = {k.name for k in stock_knobs("python")}
    assert java - python == {"driver.slow_replica_avoidance"}
    assert python - java == {"driver.shuffle_replicas"}
    r = resolve("stock", {"driver": "python", "driver.speculative_execution.max_executions": 3})
    assert (r.queue_params["driver"], r.queue_params["se_max"], r.queue_params["shuffle"]) == (1.0, 3.0, 0.0)
    assert "slow_avoid" not in r.queue_params
    pp = resolve("stock", {"multiget.shape": "per-partition"})
    assert (pp.queue_params["shape"], pp.queue_params["chunk"]) == (1.0, 0.0)
    chunked = resolve("stock", {"multiget.chunk": 8})
    assert (chunked.queue_params["shape"], chunked.queue_params["chunk"]) == (0.0, 8.0)


def test_driver_executions_are_extra_reads(cli: Any) -> None:
    never = _sim(cli, "--param", "speculative_retry=NEVER")
    hedged = _sim(
        cli,
        "--param", "speculative_retry=NEVER",
        "--param", "driver.speculative_execution.max_executions=2",
        "--param", "driver.speculative_execution.delay=0",
    )
    # delay 0 on an exact timer: every query is sent twice at once, every key read twice
    exact = _sim(cli, "--param", "speculative_retry=NEVER", "--param", "driver.speculative_execution.max_executions=2",
                 "--param", "driver.speculative_execution.delay=0", "--param", "se_tick_ms=0")
    assert exact["extra_reads"] == exact["workload_ops"] == never["ops"]
    assert exact["ops"] == 2 * never["ops"]
    # the Java driver fires even a zero delay on its timer's next tick (the rendered 1 ms): a query answered by
    # then is not sent again
    assert hedged["params"]["se_tick_ms"] == 1.0
    assert 0 < hedged["extra_reads"] < hedged["workload_ops"]
    per_key = _sim(
        cli,
        "--param", "speculative_retry=NEVER",
        "--param", "driver=python",
        "--param", "multiget.shape=per-partition",
        "--param", "driver.speculative_execution.max_executions=2",
        "--param", "driver.speculative_execution.delay=1",
    )
    # per-partition, 1 ms: only the keys still unanswered after 1 ms are read again
    assert 0 < per_key["extra_reads"] < per_key["workload_ops"]


def _hedge(delay: float, **more: Any) -> dict[str, Any]:
    return {"driver.speculative_execution.max_executions": 2, "driver.speculative_execution.delay": delay, **more}


@pytest.mark.parametrize(
    ("params", "tick"),
    [
        (_hedge(10), 1.0),  # the tick the rendering sets: delay / 10
        (_hedge(50), 5.0),
        (_hedge(100), 100.0),  # the rendering leaves the driver's default, which the hedge then runs on
        (_hedge(10, driver="python"), None),  # no wheel timer: exact
        ({"driver.speculative_execution.delay": 10}, None),  # no hedge
        (_hedge(10, se_tick_ms=1), 1.0),  # given: the tick the application runs (the live replay's generator)
        (_hedge(100, se_tick_ms=0), 0.0),
    ],
)
def test_the_model_replays_the_tick_the_rendered_config_runs(params: dict[str, Any], tick: float | None) -> None:
    from simulation.stock_render import render_stock

    for policy in ("stock", "rein"):  # a patched server's driver is the same driver
        r = resolve(policy, params)
        assert r.queue_params.get("se_tick_ms") == tick, policy
    java = render_stock({k: v for k, v in params.items() if k != "se_tick_ms"}, tables=[],
                        driver=str(params.get("driver", "java4")))["driver"]["java"]
    rendered = java.rsplit("tick-duration = ", 1)[1].split()[0] if "tick-duration" in java else None
    if tick and "se_tick_ms" not in params and params.get("driver") != "python":
        assert float(rendered or 100) == tick  # what the rendering sets, or the driver's default it leaves


def test_the_python_driver_takes_no_timer_tick() -> None:
    with pytest.raises(BadInputError, match="has no wheel timer"):
        resolve("stock", _hedge(10, driver="python", se_tick_ms=1))
    with pytest.raises(BadInputError, match="at least 1 ms") as exc:  # Netty runs a shorter tick as 1 ms
        resolve("stock", _hedge(10, se_tick_ms=0.5))
    assert exc.value.problems[0].field == "se_tick_ms"


def test_a_deployments_driver_sets_the_tick_of_its_current_hedge() -> None:
    """A deployment's tune states its driver on every candidate (`tuner.tune.stock_defaults`, from
    `control.tune_request`): a Java deployment's current 10 ms hedge replays on the rendered 1 ms tick, a Python
    one's on time."""
    from tuner.tune import stock_defaults

    for driver, tick in (("java4", 1.0), ("python", None)):
        cand = stock_defaults(driver, _hedge(10))
        assert resolve(cand.policy, cand.params).queue_params.get("se_tick_ms") == tick, driver


def test_a_hedge_on_the_default_tick_fires_late(cli: Any) -> None:
    """A 10 ms Java hedge replays on the tick the rendering sets (1 ms); on the driver's default 100 ms tick it
    fires up to 100 ms late, when most queries are answered: far fewer are sent again. (The stalled tail it then
    fails to cut: `simulator/core/tests/stock_driver.rs`.)"""
    hedge = ("--param", "speculative_retry=NEVER", "--param", "driver.speculative_execution.max_executions=2",
             "--param", "driver.speculative_execution.delay=10", "--stall-rate", "1", "--stall-ms", "50",
             "--requests", "20000")
    rendered = _sim(cli, *hedge)
    default = _sim(cli, *hedge, "--param", "se_tick_ms=100")
    assert (rendered["params"]["se_tick_ms"], default["params"]["se_tick_ms"]) == (1.0, 100.0)
    assert 0 < default["extra_reads"] < rendered["extra_reads"] / 2


def test_ops_include_the_extra_reads(cli: Any) -> None:
    never = _sim(cli, "--param", "speculative_retry=NONE")
    always = _sim(cli, "--param", "speculative_retry=always")
    assert never["speculative_retry"] == "NEVER" and always["speculative_retry"] == "ALWAYS"
    assert never["extra_reads"] == 0 and never["ops"] == never["workload_ops"]
    assert always["extra_reads"] == always["workload_ops"]
    assert always["ops"] == 2 * never["ops"]


def test_stalls_make_a_tail_that_speculative_retry_cuts(cli: Any) -> None:
    stalls = ("--stall-rate", "1", "--stall-ms", "50", "--requests", "20000")
    never = _sim(cli, "--param", "speculative_retry=NEVER", *stalls)
    p99 = _sim(cli, *stalls)
    calm = _sim(cli, "--param", "speculative_retry=NEVER", "--requests", "20000")
    assert never["p99_ms"] > 5 * calm["p99_ms"]
    assert p99["p99_ms"] < never["p99_ms"] / 2
    assert p99["extra_reads"] > 0


def test_expired_reads_are_dropped_and_requests_time_out(cli: Any) -> None:
    # a read timeout shorter than the stalls: reads queued behind a 50 ms stall expire and are dropped unserved,
    # their requests answered with a timeout (latency = the read timeout); drop_expired=0 serves every read
    stalls = ("--stall-rate", "1", "--stall-ms", "50", "--requests", "20000", "--load", "0.9")
    knobs = ("--param", "speculative_retry=NEVER", "--param", "read_timeout_ms=20")
    shed = _sim(cli, *knobs, *stalls)
    served = _sim(cli, *knobs, "--param", "drop_expired=0", *stalls)
    assert shed["timeouts"]["requests"] > 0 and shed["timeouts"]["dropped_reads"] > 0
    assert shed["p99_ms"] == 20.0
    assert shed["p999_ms"] == 20.0
    assert "timeouts" not in served
    assert served["p99_ms"] > 20.0
    # the default read timeout (5 s) is far above these replays' latencies: modelled, never reached
    calm = _sim(cli)
    assert calm["timeouts"] == {"requests": 0, "dropped_reads": 0}


def test_paged_in_queries_read_one_partition_at_a_time(cli: Any) -> None:
    # paged=1: a multiget's partitions are read one after another (the same reads, longer requests); a 99p
    # coordinator and the read timeout's drops run with it; an out-of-range value is refused naming the field
    never = ("--param", "speculative_retry=NEVER")
    parallel = _sim(cli, *never)
    paged = _sim(cli, *never, "--param", "paged=1")
    assert paged["params"]["paged"] == 1.0
    assert paged["ops"] == parallel["ops"] == parallel["workload_ops"]
    assert paged["mean_ms"] > 2 * parallel["mean_ms"]
    p99 = _sim(cli, "--param", "paged=1", "--stall-rate", "1", "--stall-ms", "50", "--param", "read_timeout_ms=20")
    assert p99["extra_reads"] > 0
    assert p99["timeouts"]["requests"] > 0 and p99["p999_ms"] == 20.0
    r = cli(*_BASE, "--param", "paged=2")
    assert r.exit_code != 0 and "paged" in r.stderr


def test_stall_fields_stay_out_of_old_records() -> None:
    assert "stall_rate" not in CassandraDeployment().as_dict()
    d = CassandraDeployment(stall_rate=2.0, stall_ms=20.0)
    assert d.as_dict()["stall_rate"] == 2.0
    assert CassandraDeployment.from_dict(d.as_dict()) == d
    assert d.cli_args() == ["--stall-rate", "2.0", "--stall-ms", "20.0"]
    with pytest.raises(BadInputError, match="stall"):
        CassandraDeployment(stall_rate=-1.0).server_model()


# ------------------------------------------------------------------------------------- the knobs on patched policies
_PATCHED = ("rein", "rein-sbf", "rein-sds", "brb-equalmax", "brb-unifincr", "tailx", "fifo", "oracle")


@pytest.mark.parametrize("policy", _PATCHED)
def test_patched_policies_take_the_knobs_off_by_default(policy: str) -> None:
    assert resolve(policy, {}).queue_params == {}  # no knob: the policy's own replay, as before
    r = resolve(policy, {"speculative_retry": "MIN(5ms,99p)", "driver.speculative_execution.max_executions": 2})
    assert (r.queue, r.queue_params["spec_kind"], r.queue_params["spec_fixed_ms"]) == (policy, 4.0, 5.0)
    assert r.queue_params["se_max"] == 2.0
    assert resolve(policy, {"driver": "python"}).queue_params["spec_kind"] == 0.0  # unset retry: NEVER


@pytest.mark.parametrize(("params", "message"), [
    ({"speculative_retry": "100p"}, "between 0.0 and 100.0"),
    ({"speculative_retry": "sometimes"}, "speculative_retry"),
    ({"driver.shuffle_replicas": 1}, "not a setting of the java4 driver"),
    ({"multiget.shape": "per-partition", "multiget.chunk": 4}, "applies only with multiget.shape=in"),
    ({"dynamic_snitch_update_interval": 50}, "replicas are chosen by 'round-robin'"),
])
def test_patched_policies_refuse_bad_knobs_as_stock(params: dict[str, Any], message: str) -> None:
    with pytest.raises(BadInputError, match=message) as info:
        resolve("rein", params)
    assert "\n" not in str(info.value)  # one line, naming the param
    assert f"field '{next(iter(params)) if len(params) == 1 else 'multiget.chunk'}'" in str(info.value)


def test_the_snitch_knobs_need_a_snitch_selector() -> None:
    r = resolve("rein", {"replica": "dynamic-snitch", "dynamic_snitch_update_interval": 50})
    assert (r.replica, r.replica_params) == ("dynamic-snitch", {"update_ms": 50.0})
    assert resolve("tailx", {"dynamic_snitch_badness_threshold": 0.5}).replica_params == {"badness": 0.5}  # ds


@pytest.mark.parametrize("policy", ["duplicate", "speculative"])
def test_duplicate_and_speculative_refuse_the_knobs(policy: str) -> None:
    with pytest.raises(BadInputError, match="takes no coordinator knobs"):
        resolve(policy, {"speculative_retry": "99p"})
    with pytest.raises(BadInputError, match="takes no coordinator knobs"):
        resolve("heron", {"queue": policy, "speculative_retry": "99p"})


def test_selector_policies_take_the_knobs_for_their_queue() -> None:
    r = resolve("heron", {"queue": "rein", "speculative_retry": "5ms"})
    assert (r.queue, r.replica, r.queue_params["spec_kind"]) == ("rein", "heron", 3.0)
    knobs = {"dynamic_snitch_update_interval": 50, "dynamic_snitch_badness_threshold": 0.2}
    ds = resolve("ds", {"update_ms": 20.0, **knobs})
    assert ds.replica_params == {"update_ms": 20.0, "badness": 0.2}  # the selector's own param wins


def test_simulate_rein_with_knobs(cli: Any) -> None:
    base = ("simulate", "--profile", "soundcloud", "--requests", "3000", "--policy", "rein", "--json")
    plain = json.loads(cli(*base).stdout)
    never = _sim_args(cli, *base, "--param", "speculative_retry=NEVER")
    always = _sim_args(cli, *base, "--param", "speculative_retry=always")
    assert "extra_reads" not in plain
    assert never["p99_ms"] == plain["p99_ms"] and never["extra_reads"] == 0
    assert (always["speculative_retry"], always["extra_reads"]) == ("ALWAYS", always["workload_ops"])
    bad = cli(*base, "--param", "speculative_retry=101p")
    assert bad.exit_code != 0 and "speculative_retry" in bad.stderr


def _sim_args(cli: Any, *args: str) -> dict[str, Any]:
    r = cli(*args)
    assert r.exit_code == 0, r.stderr
    out: dict[str, Any] = json.loads(r.stdout)
    return out


def test_a_driver_execution_may_read_an_opset_the_selector_holds() -> None:
    """`in` shape, one key per query, C3 holding opsets at its rate limit: a driver speculative execution reads
    the keys of an opset C3 still holds. Its answers complete the request and give C3 response times counted from
    the execution's send (the replay used to stop with "internal: request 0 never completed")."""
    rng = np.random.default_rng(7)
    sizes = np.maximum(1, np.ceil(np.exp(1.6 + 1.1 * rng.standard_normal(3000)))).astype(np.int64)
    offsets = np.concatenate([[0], np.cumsum(sizes)])
    cl = kvsim.Cluster(servers=32, slots=4, replication=3, clients=8)
    wl = kvsim.Workload(cl, offsets, keys=rng.integers(0, 200_000, size=offsets[-1]), load=0.85, seed=3)
    knobs = {"chunk": 1, "spec_kind": 2, "spec_percentile": 90}
    execs = kvsim.replay(wl, kvsim.ReplayConfig(policy="brb-equalmax", replica="c3", seed=2,
                                                params={**knobs, "se_max": 4, "se_delay_ms": 0.2}))
    assert execs.held is not None and execs.held["opsets"] > 0  # the case arises: C3 held opsets
    lat = np.asarray(execs.latency_ms)
    assert lat.size == 3000 and np.all(np.isfinite(lat)) and np.all(lat > 0)
    assert execs.p99_ms < 1000.0  # far below the 5 s read timeout: C3's estimates stay sane


# ------------------------------------------------------------------- the dynamic snitch with local coordinators
def test_local_coordinators_read_themselves_and_never_the_stalled_replica(cli: Any, tmp_path: Path) -> None:
    """3 servers, RF 3, two coordinators, one-key requests 10 ms apart (no read waits for another); server 2
    stopped 500 ms of every 2 s from 1 s on. `local=1`: coordinator c is server c; its reads of itself are local
    and inline (1 ms: no network hop) and unsampled (score 0). Before the first score update (100 ms) it reads
    the ring primary, itself or a remote replica (1.1 ms: two 50 µs hops, sampled as 1 ms, score 1); from then
    on it reads itself: p99 1.0 ms; the remote reads of the first 100 ms (fewer than 1% of the requests) are
    the slowest, p999 1.1 ms; the stalls never reach a request. `local=0`: every replica scores 1, the ring
    order reads server 2 for a third of the keys, stalls included."""
    trace = tmp_path / "trace.csv"
    trace.write_text("request_id,ts,key\n" + "".join(f"{i},{i * 0.01:.2f},k{i}\n" for i in range(1200)))
    stalls = tmp_path / "stalls.csv"
    stalls.write_text("server,start_ms,end_ms\n" + "".join(f"2,{t},{t + 500}\n" for t in range(1000, 12000, 2000)))
    base = ("simulate", "--policy", "stock", "--json", "--trace", str(trace), "--use-timestamps", "--trace-rate",
            "--warmup", "0", "--servers", "3", "--replication", "3", "--vnodes", "1", "--clients", "2", "--slots", "1",
            "--service-rate", "1000", "--demand-dist", "deterministic", "--net-latency-us", "50",
            "--param", "speculative_retry=NEVER")
    calm = _sim_args(cli, *base)
    local = _sim_args(cli, *base, "--stall-schedule", str(stalls), "--param", "local=1")
    remote = _sim_args(cli, *base, "--stall-schedule", str(stalls), "--param", "replica=dynamic-snitch",
                       "--param", "local=0")
    assert (calm["replica"], local["replica_params"]["local"], remote["replica_params"]["local"]) == (
        "dynamic-snitch", 1.0, 0.0)
    # local=0: every request one 1 ms read and two 50 µs hops
    assert calm["p99_ms"] == pytest.approx(1.1)
    # local=1: a coordinator's read of itself is local and inline (no hop): 1 ms, stalls or not
    assert local["p99_ms"] == pytest.approx(1.0)
    assert local["p999_ms"] == pytest.approx(1.1)
    assert remote["p99_ms"] > 100.0


def test_local_is_a_parameter_of_the_dynamic_snitch_only() -> None:
    assert resolve("stock", {"local": 1}).replica_params["local"] == 1.0
    assert "local" not in resolve("stock", {}).replica_params
    with pytest.raises(BadInputError, match="local is a parameter of the dynamic-snitch selector, and replicas "
                       "are chosen by 'ds': add --param replica=dynamic-snitch") as info:
        resolve("stock", {"replica": "ds", "local": 1})
    assert "field 'local'" in str(info.value)
    with pytest.raises(BadInputError, match="unknown parameter 'local' for policy 'rein'"):
        resolve("rein", {"speculative_retry": "99p", "local": 1})
