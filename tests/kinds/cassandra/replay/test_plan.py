"""The plan file: what the writer writes the reader reads back (version 2: requests of several queries), a version 1
file is still read, and a plan that breaks the format or its limits is refused by the Python reader and by the Java
generator alike (before it connects to anything)."""

from __future__ import annotations

import json
import shutil
import struct
import subprocess
import uuid
from pathlib import Path

import pytest

from kinds.cassandra.replay.plan import (
    MAGIC,
    MAX_QUERIES,
    Plan,
    PlanArm,
    PlanError,
    encode_list,
    encode_value,
    read_plan,
    write_plan,
)

ARMS = (PlanArm("base", "SELECT v FROM ks.a WHERE k = ?"), PlanArm("hedge", "SELECT v FROM ks.b WHERE k = ?"))


def small_plan() -> Plan:
    requests = [(i * 1000, i % 2, [encode_value("text", f"k{i}")]) for i in range(20)]
    return Plan.of(ARMS, [*requests, (20_000, 0, [None])])


def test_a_plan_round_trips(tmp_path: Path):
    plan = small_plan()
    back = read_plan(write_plan(plan, tmp_path / "p.bin"))
    assert back == plan
    assert back.counts() == [11, 10]


def multiget_plan() -> Plan:
    """Multigets: arm base per partition (one query per key), arm hedge IN chunks of 2 keys."""
    requests = []
    for i in range(12):
        keys = [f"k{i}-{j}" for j in range(1 + i % 5)]
        if i % 2 == 0:
            queries = [[encode_value("text", k)] for k in keys]
        else:
            queries = [[encode_list("text", keys[j : j + 2])] for j in range(0, len(keys), 2)]
        requests.append((i * 500, i % 2, queries))
    return Plan.multi(ARMS, requests)


def test_a_plan_of_multigets_round_trips(tmp_path: Path):
    plan = multiget_plan()
    path = write_plan(plan, tmp_path / "p.bin")
    header = json.loads(path.read_bytes()[12 : 12 + struct.unpack(">I", path.read_bytes()[8:12])[0]])
    assert header["version"] == 2 and header["queries"] == sum(plan.query_counts())
    back = read_plan(path)
    assert back == plan
    assert [len(q) for q in back.queries[:5]] == [1, 1, 3, 2, 5]
    assert back.counts() == [6, 6] and back.query_counts() == [16, 10] and back.query_counts(4) == [4, 3]


def _v1(requests: list[tuple[int, int, list[bytes | None]]]) -> bytes:
    """A version 1 file as the earlier writer wrote it: no query count, each request its values."""
    h = json.dumps({"format": "tailtune-replay-plan", "version": 1, "requests": len(requests),
                    "arms": [{"name": a.name, "statement": a.statement} for a in ARMS]}).encode()
    out = [MAGIC, struct.pack(">I", len(h)), h]
    for offset, a, values in requests:
        out.append(struct.pack(">QHH", offset, a, len(values)))
        for v in values:
            out.append(struct.pack(">i", -1) if v is None else struct.pack(">i", len(v)) + v)
    return b"".join(out)


def test_a_version_1_plan_is_still_read(tmp_path: Path):
    path = tmp_path / "v1.bin"
    path.write_bytes(_v1([(0, 0, [b"k1"]), (10, 1, [None]), (20, 0, [b"a", b"b"])]))
    plan = read_plan(path)
    assert plan == Plan.of(ARMS, [(0, 0, [b"k1"]), (10, 1, [None]), (20, 0, [b"a", b"b"])])
    assert plan.queries[2] == ((b"a", b"b"),) and plan.query_counts() == [2, 1]


def test_encode_list_serializes_an_in_list_as_the_protocol_does():
    assert encode_list("text", ["a", "bc"]) == b"\x00\x00\x00\x02" + b"\x00\x00\x00\x01a" + b"\x00\x00\x00\x02bc"
    assert encode_list("int", []) == b"\x00\x00\x00\x00"
    with pytest.raises(ValueError, match="null"):
        encode_list("text", ["a", None])


def test_encode_value_serializes_as_the_protocol_does():
    assert encode_value("int", 1) == b"\x00\x00\x00\x01"
    assert encode_value("bigint", -1) == b"\xff" * 8
    assert encode_value("text", "é") == "é".encode()
    assert encode_value("boolean", True) == b"\x01"
    assert encode_value("varint", 128) == b"\x00\x80"
    assert encode_value("varint", -1) == b"\xff"
    u = uuid.uuid4()
    assert encode_value("uuid", str(u)) == u.bytes
    assert encode_value("inet", "127.0.0.1") == b"\x7f\x00\x00\x01"
    assert encode_value("double", 1.5) == struct.pack(">d", 1.5)
    assert encode_value("blob", None) is None
    bad: list[tuple[str, object]] = [("int", "1"), ("int", 1 << 40), ("map<int,int>", {}), ("text", b"x")]
    for cql_type, value in bad:
        with pytest.raises(ValueError):
            encode_value(cql_type, value)


@pytest.mark.parametrize(
    ("requests", "why"),
    [
        ([(5, 0, []), (4, 0, [])], "before the previous"),
        ([(0, 2, [])], "no arm 2"),
        ([(0, 0, [b"x" * 70_000])], "at most"),
        ([(0, 0, [b""] * 65)], "over 64"),
        ([(-1, 0, [])], "out of range"),
    ],
)
def test_a_plan_that_breaks_the_rules_is_not_built(requests, why):
    with pytest.raises(PlanError, match=why):
        Plan.of(ARMS, requests)


@pytest.mark.parametrize(
    ("queries", "why"),
    [
        ([], "0 queries, not 1 to 16384"),
        ([[b"k"]] * (MAX_QUERIES + 1), "16385 queries"),
        ([[b"k"], [b""] * 65], "a query of 65 values, over 64"),
        ([[b"k"], [b"x" * 70_000]], "at most"),
    ],
)
def test_a_request_of_queries_past_the_limits_is_not_built(queries, why):
    with pytest.raises(PlanError, match=why):
        Plan.multi(ARMS, [(0, 0, queries)])


def test_arms_are_checked():
    with pytest.raises(PlanError, match="name"):
        Plan.of((PlanArm("a.b", "SELECT 1"),), [])
    with pytest.raises(PlanError, match="one name"):
        Plan.of((ARMS[0], ARMS[0]), [])


def _header(arms=ARMS, n=1, version=1) -> bytes:
    h = json.dumps({"version": version, "arms": [{"name": a.name, "statement": a.statement} for a in arms],
                    "requests": n}).encode()
    return MAGIC + struct.pack(">I", len(h)) + h


def _header2(n: int = 1, queries: int = 2) -> bytes:
    h = json.dumps({"version": 2, "arms": [{"name": a.name, "statement": a.statement} for a in ARMS],
                    "requests": n, "queries": queries}).encode()
    return MAGIC + struct.pack(">I", len(h)) + h


ONE = struct.pack(">QHH", 0, 0, 1) + struct.pack(">i", 2) + b"k1"
#: a version 2 request of two queries of one value each
TWO = struct.pack(">QHH", 0, 0, 2) + (struct.pack(">H", 1) + struct.pack(">i", 2) + b"k1") * 2
MALFORMED = {
    "magic": b"TTPLAN2\n" + _header()[8:] + ONE,
    "truncated": _header(n=2) + ONE,
    "trailing": _header() + ONE + b"\x00",
    "header": MAGIC + struct.pack(">I", 5) + b"{nope",
    "version": _header(version=3) + ONE,
    "arm": _header() + struct.pack(">QHH", 0, 7, 0),
    "length": _header() + struct.pack(">QHH", 0, 0, 1) + struct.pack(">i", -7),
    "order": _header(n=2) + struct.pack(">QHH", 9, 0, 0) + struct.pack(">QHH", 8, 0, 0),
    "v2 no queries": _header2(queries=0) + struct.pack(">QHH", 0, 0, 0),
    "v2 too many queries": _header2(queries=20_000) + struct.pack(">QHH", 0, 0, 20_000),
    "v2 query count lies": _header2(queries=3) + TWO,
    "v2 more queries than the header": _header2(queries=1) + TWO,
    "v2 truncated query": _header2() + TWO[:-3],
    "v2 query of too many values": _header2(queries=1) + struct.pack(">QHHH", 0, 0, 1, 65),
}


def test_the_malformed_cases_are_otherwise_well_formed(tmp_path: Path):
    """The version 2 cases are refused for their one flaw: the same bytes with it mended are read."""
    path = tmp_path / "p.bin"
    path.write_bytes(_header2() + TWO)
    assert read_plan(path).queries == (((b"k1",), (b"k1",)),)


@pytest.mark.parametrize("name", sorted(MALFORMED))
def test_malformed_plans_are_refused_by_the_reader(tmp_path: Path, name):
    path = tmp_path / "p.bin"
    path.write_bytes(MALFORMED[name])
    with pytest.raises(PlanError):
        read_plan(path)


@pytest.fixture(scope="module")
def generator_classes() -> tuple[Path, Path]:
    if shutil.which("java") is None or shutil.which("mvn") is None:
        pytest.skip("java/mvn not installed (scripts/setup.sh installs them)")
    from kinds.cassandra.replay.jvm import build

    return build()


def test_malformed_plans_are_refused_by_the_java_generator(tmp_path: Path, generator_classes):
    from kinds.cassandra.replay.config import ArmProfile, Endpoint, GeneratorConfig

    classes, lib = generator_classes
    ep = Endpoint("127.0.0.1", 9)  # never connected to: the plan is refused first
    config = GeneratorConfig((ep,), (ep,), "dc1", (ArmProfile("base"), ArmProfile("hedge")))
    (tmp_path / "c.json").write_text(json.dumps(config.to_json()))
    for name, data in sorted(MALFORMED.items()):
        (tmp_path / "p.bin").write_bytes(data)
        r = subprocess.run(["java", "-cp", f"{classes}:{lib}/*", "Generator", str(tmp_path / "p.bin"),
                            str(tmp_path / "c.json")], capture_output=True, text=True, timeout=120, check=False)
        out = json.loads(r.stdout)
        assert (r.returncode, out["error"]) == (2, "bad_input"), (name, r.stdout, r.stderr[-500:])
