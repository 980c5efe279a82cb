"""The plan file: what the writer writes the reader reads back, and a plan that breaks the format or its limits is
refused by the Python reader and by the Java generator alike (before it connects to anything)."""

from __future__ import annotations

import json
import shutil
import struct
import subprocess
import uuid
from pathlib import Path

import pytest

from kinds.cassandra.replay.plan import MAGIC, Plan, PlanArm, PlanError, encode_value, read_plan, write_plan

ARMS = (PlanArm("base", "SELECT v FROM ks.a WHERE k = ?"), PlanArm("hedge", "SELECT v FROM ks.b WHERE k = ?"))


def small_plan() -> Plan:
    requests = [(i * 1000, i % 2, [encode_value("text", f"k{i}")]) for i in range(20)]
    return Plan.of(ARMS, [*requests, (20_000, 0, [None])])


def test_a_plan_round_trips(tmp_path: Path):
    plan = small_plan()
    back = read_plan(write_plan(plan, tmp_path / "p.bin"))
    assert back == plan
    assert back.counts() == [11, 10]


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


def test_arms_are_checked():
    with pytest.raises(PlanError, match="name"):
        Plan.of((PlanArm("a.b", "SELECT 1"),), [])
    with pytest.raises(PlanError, match="one name"):
        Plan.of((ARMS[0], ARMS[0]), [])


def _header(arms=ARMS, n=1, version=1) -> bytes:
    h = json.dumps({"version": version, "arms": [{"name": a.name, "statement": a.statement} for a in arms],
                    "requests": n}).encode()
    return MAGIC + struct.pack(">I", len(h)) + h


ONE = struct.pack(">QHH", 0, 0, 1) + struct.pack(">i", 2) + b"k1"
MALFORMED = {
    "magic": b"TTPLAN2\n" + _header()[8:] + ONE,
    "truncated": _header(n=2) + ONE,
    "trailing": _header() + ONE + b"\x00",
    "header": MAGIC + struct.pack(">I", 5) + b"{nope",
    "version": _header(version=2) + ONE,
    "arm": _header() + struct.pack(">QHH", 0, 7, 0),
    "length": _header() + struct.pack(">QHH", 0, 0, 1) + struct.pack(">i", -7),
    "order": _header(n=2) + struct.pack(">QHH", 9, 0, 0) + struct.pack(">QHH", 8, 0, 0),
}


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
