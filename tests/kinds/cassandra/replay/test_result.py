"""The JVM's line is hostile input: a well-formed result of the plan is read, anything else refused."""

from __future__ import annotations

import copy
import json
from dataclasses import replace
from typing import Any

import pytest

from kinds.cassandra.replay.config import ArmProfile, Endpoint, GeneratorConfig
from kinds.cassandra.replay.hdr import BLOCK_DIGITS, Histogram, encode
from kinds.cassandra.replay.plan import Plan, PlanArm
from kinds.cassandra.replay.result import (
    MAX_OUTPUT,
    ArmResult,
    GeneratorAborted,
    GeneratorFailed,
    GeneratorOutputError,
    GeneratorResult,
    LagTooHigh,
    NodeSeen,
    parse_result,
    summarize,
)

NODE = Endpoint("127.0.0.1", 9042)
CONFIG = GeneratorConfig((NODE,), (NODE,), "dc1", (ArmProfile("a"), ArmProfile("b")))
# arm a's requests are multigets of two queries, arm b's of one
PLAN = Plan.multi((PlanArm("a", "SELECT 1"), PlanArm("b", "SELECT 1")),
                  [(i * 100, i % 2, [[]] * (2 - i % 2)) for i in range(10)])


def _hist(values: list[int]) -> Histogram:
    h = Histogram()
    for v in values:
        h.record(v)
    return h


def good() -> dict[str, Any]:
    arms = tuple(
        ArmResult(name, 5, 5, 4, 1, 0, {"InvalidQueryException": 1}, _hist([100, 200, 300, 400, 5000]),
                  _hist([90, 190, 290, 390, 4990]), (), queries, queries - 1)
        for name, queries in (("a", 10), ("b", 5))
    )
    result = GeneratorResult(
        generator="java-driver-core-4.19.0", status="ok", reason=None, arms=arms, lag=_hist([1] * 9 + [2000]),
        sent=10, throttled=0, lost=0, wall_s=0.01, send_s=0.009, intended_s=0.0009, achieved_rate=1111.1,
        cpu_s=0.002, scheduler_cpu_s=0.001, threads_cpu_s=0.0015, gc_count=0, gc_ms=0,
        nodes=(NodeSeen("127.0.0.1:9042", "dc1", "LOCAL", 1),), ignored=(), settings={"timer_tick_ms": 1.0},
        queries=15,
    )
    return result.to_json()


def parse(doc: Any) -> GeneratorResult:
    raw = doc if isinstance(doc, bytes) else json.dumps(doc).encode()
    return parse_result(raw, PLAN, CONFIG)


def test_a_good_result_is_read():
    r = parse(good())
    assert [a.ok for a in r.arms] == [4, 4] and r.arm("b").errors == 1
    assert [(a.queries, a.rows) for a in r.arms] == [(10, 9), (5, 4)] and r.queries == 15
    assert r.arm("a").latency.value_at_percentile(99) == 5003
    assert r.cpu_us_per_request == pytest.approx(200.0)
    r.require_lag(2500)
    with pytest.raises(LagTooHigh, match="lag p99 2000 µs"):
        r.require_lag(1000)


def _set(path: str, value: Any) -> dict[str, Any]:
    doc = good()
    target: Any = doc
    keys = path.split(".")
    for k in keys[:-1]:
        target = target[int(k)] if k.isdigit() else target[k]
    if value is _DELETE:
        del target[keys[-1]]
    else:
        target[keys[-1]] = value
    return doc


_DELETE = object()

HOSTILE = {
    "arm renamed": ("arms.0.name", "x"),
    "planned lies": ("arms.0.planned", 6),
    "sent over planned": ("arms.0.sent", 6),
    "outcomes over sent": ("arms.0.ok", 5),
    "count is a bool": ("arms.0.ok", True),
    "negative": ("throttled", -1),
    "nan": ("cpu_s", float("nan")),
    "cpu per request lies": ("cpu_us_per_request", 1.0),
    "summary lies": ("arms.1.latency.p99", 1),
    "mean lies": ("arms.1.latency.mean", 1.0),
    "histogram swapped": ("arms.1.latency.encoded", encode(_hist([1]))),
    "histogram garbage": ("lag.encoded", "AAAA"),
    "histogram missing": ("arms.0.service", _DELETE),
    "error kind not a class": ("arms.0.error_kinds", {"rm -rf /": 1}),
    "too many kinds": ("arms.0.error_kinds", {f"E{i}": 0 for i in range(17)}),
    "status": ("status", "fine"),
    "sent sum": ("sent", 9),
    "queries over the plan's": ("arms.1.queries", 6),
    "queries short of the plan's": ("arms.0.queries", 9),
    "queries sum": ("queries", 14),
    "queries missing": ("arms.0.queries", _DELETE),
    "rows negative": ("arms.0.rows", -1),
    "outside node contacted": ("nodes", [{"endpoint": "10.9.9.9:9042", "datacenter": "dc1", "distance": "LOCAL",
                                          "open_connections": 1}]),
    "distance": ("nodes.0.distance", "NEAR"),
    "tick": ("settings.timer_tick_ms", 100.0),
    "generator name control chars": ("generator", "java\x1b[2J"),
}


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_a_result_that_does_not_add_up_is_refused(name):
    path, value = HOSTILE[name]
    with pytest.raises(GeneratorOutputError):
        parse(_set(path, value))


@pytest.mark.parametrize(
    "raw",
    [b"", b"not json", b"[1, 2]", b"{}\n{}", b"{" * 100_000, b" " * (MAX_OUTPUT + 1), b'{"status": "ok"}'],
)
def test_what_is_not_a_result_is_refused(raw):
    with pytest.raises(GeneratorOutputError):
        parse(raw)


def test_an_aborted_result_may_stop_short():
    doc = good()
    doc.update(status="aborted", reason="9 of 10 requests failed")
    doc["arms"][0]["sent"] = 4
    doc["arms"][0]["ok"] = 3
    for name in ("latency", "service"):
        doc["arms"][0][name] = {"unit": "us", **summarize(_hist([100, 200, 300, 400])),
                                "encoded": encode(_hist([100, 200, 300, 400]))}
    doc["sent"] = 9
    doc["cpu_us_per_request"] = doc["cpu_s"] * 1e6 / 9
    doc["lag"] = {"unit": "us", **summarize(_hist([1] * 9)), "encoded": encode(_hist([1] * 9))}
    assert parse(doc).status == "aborted"
    assert "a: InvalidQueryException ×1" in str(GeneratorAborted(parse(doc)))
    with pytest.raises(GeneratorOutputError, match="reason"):
        parse({**copy.deepcopy(doc), "reason": None})


def test_a_printed_failure_is_raised_with_its_kind():
    with pytest.raises(GeneratorFailed, match=r"\(connect\): AllNodesFailedException: x\?y"):
        parse({"error": "connect", "message": "AllNodesFailedException: x\x00y"})


# --- per-block histograms -------------------------------------------------------------------------------------
#: PLAN's requests are 100 µs apart: in blocks of 0.0004 s, requests 0-3 are block 0, 4-7 block 1, 8-9 block 2.
BLOCKED = replace(CONFIG, block_s=0.0004)


def _block(values: list[int]) -> dict[str, Any]:
    h = Histogram(BLOCK_DIGITS)
    for v in values:
        h.record(v)
    return {"count": h.total, "encoded": encode(h)}


def blocked() -> dict[str, Any]:
    doc = good()
    for arm in doc["arms"]:  # each arm's 5 latencies 100, 200, 300, 400, 5000 over the three blocks
        arm["blocks"] = [_block([100, 200]), _block([300, 400]), _block([5000])]
    return doc


def parse_blocked(doc: Any) -> GeneratorResult:
    return parse_result(json.dumps(doc).encode(), PLAN, BLOCKED)


def test_blocks_are_read_and_add_up_to_the_arms_latency():
    r = parse_blocked(blocked())
    a = r.arm("a")
    assert [b.total for b in a.blocks] == [2, 2, 1] and a.blocks[2].value_at_percentile(50) > 4900
    assert all(b.digits == BLOCK_DIGITS for b in a.blocks)
    again = parse_blocked(json.loads(json.dumps(r.to_json())))  # a result written back reads the same
    assert [b.buckets() for b in again.arm("b").blocks] == [b.buckets() for b in r.arm("b").blocks]
    assert parse(good()).arm("a").blocks == ()  # no block_s: no blocks


@pytest.mark.parametrize(
    ("change", "why"),
    [
        (lambda d: d["arms"][0]["blocks"].pop(), "not 3 blocks"),
        (lambda d: d["arms"][0]["blocks"][1].update(count=3), "count"),
        (lambda d: d["arms"][0]["blocks"][1].update(encoded=encode(_hist([300, 400]))), "layout"),  # 3 digits
        (lambda d: d["arms"][1].__setitem__("blocks", [_block([100]), _block([300, 400]), _block([5000])]),
         "blocks count 4"),
        (lambda d: d["arms"][1]["blocks"].__setitem__(0, "x"), "not an object"),
    ],
)
def test_blocks_that_do_not_add_up_are_refused(change, why):
    doc = blocked()
    change(doc)
    with pytest.raises(GeneratorOutputError, match=why):
        parse_blocked(doc)


def test_a_result_without_the_blocks_it_was_asked_for_is_refused():
    with pytest.raises(GeneratorOutputError, match="not 3 blocks"):
        parse_blocked(good())
