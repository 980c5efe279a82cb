"""The live replay's kind-independent parts without a live system: the trace read from a dataset's rows, the
dealing of requests to arms, per-request latencies into block histograms, the `NAME=SPEC` form, and the refusals
that come before anything is sent (a deployment that does not allow it, a rate over the cap, `--load` without a
calibrated capacity, a SPEC that names nothing, a config the kind refuses). The live runs are in
tests/kinds/*/replay/test_replay_live.py."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pytest

from base.settings import Settings
from control.replay import ReplayRefused, parse_arm, run_replay
from control.replay_trace import ReplayTrace, deal, latency_blocks
from tuner.fidelity import histogram_quantiles


def _table(rows: list[tuple[int, float, str, int | None]]) -> pa.Table:
    rid, ts, key, size = zip(*rows, strict=True)
    return pa.table({"request_id": list(rid), "ts": list(ts), "key": list(key),
                     "value_size": pa.array(list(size), type=pa.int64())})


def test_the_trace_groups_rows_into_requests_in_arrival_order() -> None:
    # request 7 arrives first although its id is larger; request 3's rows keep their order
    t = ReplayTrace.from_table(_table([(3, 0.5, "b", 10), (7, 0.1, "a", None), (3, 0.5, "c", 30), (9, 1.1, "d", 5)]),
                               "t")
    assert t.requests == 3 and list(t.offsets_us) == [0, 400_000, 1_000_000]
    assert [t.request_keys(i) for i in range(3)] == [("a",), ("b", "c"), ("d",)]
    assert list(t.value_sizes) == [-1, 10, 30, 5] and t.span_s == 1.0
    flat = t.flattened()
    assert flat.requests == 4 and list(flat.offsets_us) == [0, 400_000, 400_000, 1_000_000]
    assert [flat.request_keys(i) for i in range(4)] == [("a",), ("b",), ("c",), ("d",)]
    assert t.head(2).keys == ("a", "b", "c") and t.sent_before(0.5, 1.0) == 2 and t.sent_before(0.51, 2.0) == 3
    back = t.to_table(2.0)  # what the model replays: the same requests, their times scaled
    assert back.column("request_id").to_pylist() == [0, 1, 1, 2]
    assert back.column("ts").to_pylist() == [0.0, 0.2, 0.2, 0.5]
    assert back.column("value_size").to_pylist() == [None, 10, 30, 5]


def test_a_trace_without_time_is_refused() -> None:
    with pytest.raises(ReplayRefused, match="own arrival times"):
        ReplayTrace.from_table(_table([(1, 0.0, "a", 1), (2, 0.0, "b", 1)]), "t")
    with pytest.raises(ReplayRefused, match="columns key"):
        ReplayTrace.from_table(pa.table({"request_id": [1], "ts": [0.0]}), "t")


def test_the_peak_rate_is_the_most_requests_in_one_second() -> None:
    offsets = [0.0, 0.1, 0.2, 0.3, 2.0, 5.0]
    t = ReplayTrace.from_table(_table([(i, x, f"k{i}", 1) for i, x in enumerate(offsets)]), "t")
    assert t.peak_rate(1.0) == 4 and t.peak_rate(0.1) == 1 and t.peak_rate(10.0) == 6


def test_dealing_gives_every_arm_its_share_in_any_stretch() -> None:
    dealt = deal(3001, 3, seed=5)
    assert dealt.size == 3001 and set(dealt.tolist()) == {0, 1, 2}
    for start in range(0, 3000, 3):  # each run of three requests is a permutation of the arms
        assert sorted(dealt[start : start + 3].tolist()) == [0, 1, 2]
    assert not np.array_equal(dealt, deal(3001, 3, seed=6)) and np.array_equal(dealt, deal(3001, 3, seed=5))


def test_latencies_become_block_histograms_of_shared_buckets() -> None:
    lat = np.array([100.0, 200.0, 300.0, 10_000.0, 150.0, 5.0])
    arm = np.array([0, 0, 1, 1, 0, 1])
    block = np.array([0, 1, 0, 1, 2, -1])  # the last request is outside every block; block 2 is past `blocks`
    a, b = latency_blocks(lat, arm, block, arms=2, blocks=2, block_s=1.0)
    assert np.array_equal(a.upper_us, b.upper_us) and a.blocks == b.blocks == 2
    assert a.counts.sum(axis=1).tolist() == [1, 1] and b.counts.sum(axis=1).tolist() == [1, 1]
    p = histogram_quantiles(b.upper_us, b.merged(), 1.0)[0]
    assert 10_000 <= p <= 10_000 * 1.011  # buckets are 1 % wide


@pytest.mark.parametrize(("text", "why"), [("A", "NAME=SPEC"), ("A=", "NAME=SPEC"), ("a b=current", "arm name")])
def test_a_malformed_arm_is_refused(text: str, why: str) -> None:
    with pytest.raises(ReplayRefused, match=why):
        parse_arm(text)
    assert parse_arm(" B = stock:speculative_retry=NEVER ") == ("B", "stock:speculative_retry=NEVER")


# --- refusals before anything is sent ---------------------------------------------------------------------------


@pytest.fixture
def dataset(settings: Settings, tmp_path: Path) -> str:
    """A stored dataset: 2,000 one-key requests 1 ms apart (1,000 requests per second)."""
    from ingest.pipeline import ingest_file

    path = tmp_path / "trace.csv"
    path.write_text("request_id,ts,key,value_size\n" + "".join(f"{i},{i * 0.001:.6f},k{i % 50},64\n"
                                                               for i in range(2000)))
    return ingest_file(path, settings=settings).id


def _deployment(settings: Settings, name: str, *, allowed: bool = True, admin: bool = True, **extra: Any) -> None:
    from control import deployments
    from control.db import database_for
    from control.deployment_spec import DeploymentCreate
    from control.tokens import Principal

    body = {"name": name, "kind": "cassandra", "connection": {"contact_points": ["127.0.0.1"], "port": 1},
            "tables": ["shop.items"], "replay_allowed": allowed, **extra}
    db = database_for(settings.resolved_database_url)
    try:
        with db.session() as s:
            deployments.create(s, settings, DeploymentCreate(**body), Principal("t", "admin" if admin else "write"))
    finally:
        db.dispose()


ARMS = [("A", "stock:speculative_retry=NEVER"), ("B", "stock:speculative_retry=ALWAYS")]


def test_a_deployment_that_does_not_allow_it_is_refused(settings: Settings, dataset: str) -> None:
    _deployment(settings, "shop", allowed=False)
    with pytest.raises(ReplayRefused, match="does not allow the live replay"):
        run_replay("shop", dataset, ARMS, settings=settings)


def test_a_rate_over_the_cap_is_refused_before_anything_is_sent(settings: Settings, dataset: str) -> None:
    _deployment(settings, "shop")
    settings.replay_max_rate = 500.0
    with pytest.raises(ReplayRefused, match=r"up to 1000 requests in one second, over TAILTUNE_REPLAY_MAX_RATE"):
        run_replay("shop", dataset, ARMS, settings=settings, block_s=0.5)  # port 1: nothing listens there


def test_a_multiget_trace_reading_more_keys_than_the_cap_is_refused(settings: Settings, tmp_path: Path) -> None:
    """100 requests a second under the request cap, each of 8 keys: 800 keys a second, over a key cap of 500."""
    from ingest.pipeline import ingest_file

    path = tmp_path / "multi.csv"
    path.write_text("request_id,ts,key,value_size\n" + "".join(f"{i},{i * 0.01:.6f},k{(i * 8 + j) % 90},64\n"
                                                                 for i in range(300) for j in range(8)))
    dataset = ingest_file(path, settings=settings).id
    _deployment(settings, "shop")
    settings.replay_max_key_rate = 500.0
    with pytest.raises(ReplayRefused, match=r"reads up to 800 keys in one second, over TAILTUNE_REPLAY_MAX_KEY_RATE"):
        run_replay("shop", dataset, ARMS, settings=settings, block_s=0.5)


def test_load_needs_a_calibrated_capacity(settings: Settings, dataset: str) -> None:
    _deployment(settings, "shop")
    with pytest.raises(ReplayRefused, match="calibrated capacity") as caught:
        run_replay("shop", dataset, ARMS, load=0.5, settings=settings)
    assert "--rate-scale" in (caught.value.hint or "")


@pytest.mark.parametrize(
    ("arms", "why"),
    [
        ([("A", "version:3"), ("B", "current")], "no config version 3"),
        ([("A", "recommended"), ("B", "current")], "holds no recommendation"),
        ([("A", "stock:speculative_retry=SOMETIMES"), ("B", "current")], "speculative_retry"),
        ([("A", "current")], "compares 2 to"),
        ([("A", "current"), ("A", "current")], "distinct"),
    ],
)
def test_a_spec_that_names_nothing_runnable_is_refused(settings: Settings, dataset: str, arms: list[tuple[str, str]],
                                                       why: str) -> None:
    _deployment(settings, "shop")
    with pytest.raises(ReplayRefused, match=why):
        run_replay("shop", dataset, arms, settings=settings, block_s=0.5)


@pytest.mark.parametrize(
    ("arms", "extra", "why"),
    [
        ([("A", "current"), ("B", "stock:speculative_retry=NEVER")], {"server": "rein-patched"},
         "Rein-patched server's scheduler"),
    ],
)
def test_what_cannot_be_applied_live_is_refused(settings: Settings, dataset: str, arms: list[tuple[str, str]],
                                                extra: dict[str, Any], why: str) -> None:
    _deployment(settings, "shop", **extra)
    with pytest.raises(ReplayRefused, match=why):
        run_replay("shop", dataset, arms, settings=settings, block_s=0.5)


def test_alternating_periods_count_against_the_duration_limit(settings: Settings, dataset: str) -> None:
    """Configs that differ in the dynamic snitch alternate whole periods: 2 groups × 3 pairs are 6 periods of the
    measured run, refused over TAILTUNE_REPLAY_MAX_DURATION_S before anything is sent; 3 repeats of concurrent arms
    are 3 periods, under the limit (then refused connecting: port 1, nothing listens)."""
    _deployment(settings, "shop")
    settings.replay_max_duration_s = 11.0
    arms = [("A", "stock:dynamic_snitch_badness_threshold=0.1"), ("B", "stock:dynamic_snitch_badness_threshold=0.5")]
    with pytest.raises(ReplayRefused, match=r"6 × 2 s measured: over TAILTUNE_REPLAY_MAX_DURATION_S"):
        run_replay("shop", dataset, arms, settings=settings, block_s=0.5, repeats=3)
    with pytest.raises(ReplayRefused, match=r"^cassandra: "):  # one group, a period per repeat: 6 s pass the limit
        run_replay("shop", dataset, ARMS, settings=settings, block_s=0.5, repeats=3)


@pytest.mark.parametrize("groups", [2, 3, 4, 5])
def test_the_schedule_gives_every_comparison_with_the_baseline_abba_pairs(groups: int) -> None:
    """Every group runs once per pair; the baseline's periods and any other group's, taken two at a time, are one
    of each — so `compare_alternating` takes them as ABBA pairs (and estimates them)."""
    from control.replay import _schedule
    from tuner.fidelity import BlockHistograms, Run, compare_alternating

    order = _schedule(groups, 4)
    assert len(order) == 4 * groups and all(order.count(g) == 4 for g in range(groups))
    if groups == 2:
        assert order == [0, 1, 1, 0, 0, 1, 1, 0]
    upper = np.array([1000.0, 2000.0])
    for g in range(1, groups):
        mine = [x for x in order if x in (0, g)]
        assert all({mine[2 * i], mine[2 * i + 1]} == {0, g} for i in range(4)), mine
        runs = [Run(str(x), BlockHistograms(upper, np.array([[5, 5 + x]]), 15.0)) for x in order]
        c = compare_alternating(runs, "0", str(g))
        assert c.reason is None and c.pairs == 4, c


@pytest.mark.parametrize("arms", [
    [("A", "stock:multiget.chunk=0"), ("B", "stock:multiget.chunk=4")],
    [("A", "stock:multiget.shape=in"), ("B", "stock:multiget.shape=per-partition")],
])
def test_configs_that_differ_in_their_multiget_shape_are_not_refused(settings: Settings, dataset: str,
                                                                      arms: list[tuple[str, str]]) -> None:
    """The multiget's shape is the application's query code, one per arm: the arms run concurrently (the replay
    gets past the configs to the rate cap, where it stops before anything is sent)."""
    _deployment(settings, "shop")
    settings.replay_max_rate = 10.0
    with pytest.raises(ReplayRefused, match="TAILTUNE_REPLAY_MAX_RATE"):
        run_replay("shop", dataset, arms, settings=settings, block_s=0.5)


@pytest.mark.parametrize(("arms", "why"), [
    ([("IN", "stock:multiget.chunk=0"), ("PP", "stock:multiget.chunk=1000")],
     r"arm IN: request 0's IN list of 16385 keys serializes to 16\d,\d{3} bytes, over the plan's 65,536"),
    ([("IN", "stock:multiget.chunk=1000"), ("PP", "stock:multiget.shape=per-partition")],
     "arm PP: a request of the trace reads 16385 keys, 16385 per-partition queries: over the plan's 16384"),
])
def test_a_multiget_past_the_plans_limits_is_refused_before_anything_is_sent(
        settings: Settings, tmp_path: Path, arms: list[tuple[str, str]], why: str) -> None:
    """A request of 16385 keys: one IN of all of them is over 64 KiB, one query per key over 16384 queries;
    refused before the driver connects (nothing listens on the deployment's port)."""
    from ingest.pipeline import ingest_file

    path = tmp_path / "big.csv"
    path.write_text("request_id,ts,key,value_size\n" + "".join(f"0,0.0,k{j:05d},8\n" for j in range(16385))
                    + "1,1.0,k00000,8\n")
    dataset = ingest_file(path, settings=settings).id
    _deployment(settings, "shop")
    with pytest.raises(ReplayRefused, match=why):
        run_replay("shop", dataset, arms, settings=settings, block_s=0.5)


def test_version_and_recommended_specs_resolve_to_the_deployments_configs(settings: Settings, dataset: str) -> None:
    """`version:N` and `recommended@JOB` name the deployment's own config version and job: they resolve (the
    replay then stops at the rate cap, before anything is sent); another deployment's job is not this one's."""
    from control.configs import add_version
    from control.db import JobRow, database_for
    from control.deployments import get_by_name

    _deployment(settings, "shop")
    _deployment(settings, "other")
    db = database_for(settings.resolved_database_url)
    try:
        with db.session() as s:
            shop, other = get_by_name(s, "shop").id, get_by_name(s, "other").id
            add_version(s, shop, {"policy": "stock", "params": {"speculative_retry": "NEVER"}}, settings=settings,
                        source="manual")
            jobs = []
            for dep in (shop, other):
                job = JobRow(kind="nightly", deployment_id=dep, payload={}, status="succeeded", run_after=0.0,
                             steps=[], created_at=0.0, result={"recommendation": {
                                 "policy": "stock", "params": {"speculative_retry": "5ms"}}})
                s.add(job)
                s.flush()
                jobs.append(job.id)
    finally:
        db.dispose()
    settings.replay_max_rate = 10.0
    for arms in ([("A", "version:1"), ("B", "recommended")], [("A", "current"), ("B", f"recommended@{jobs[0]}")]):
        with pytest.raises(ReplayRefused, match="TAILTUNE_REPLAY_MAX_RATE"):
            run_replay("shop", dataset, arms, settings=settings, block_s=0.5)
    with pytest.raises(ReplayRefused, match=f"job {jobs[1]} of deployment 'shop' holds no recommendation"):
        run_replay("shop", dataset, [("A", "current"), ("B", f"recommended@{jobs[1]}")], settings=settings)
