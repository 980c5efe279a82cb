"""The live replay of a memcached pool of 2 real servers through tailtune-client: batching and Chisel run
concurrently, one client each; every answer is checked against the value written (none missing, none wrong);
each scratch key lives on its original key's server; the scratch keys are gone afterwards, also when the replay
is cancelled. Servers with little memory (`-m 4`): a scratch that would not fit is refused before anything is
written, naming the figures and the longest duration that fits, which then runs with every answer right; memory
the check cannot see (pages memcached gave to other item sizes) evicts scratch keys, and the report counts the
evictions beside the missing answers. Seconds of replay in blocks of 0.5 s; no timing is asserted."""

from __future__ import annotations

import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from tailtune_client.hashing import server_index

from base.settings import Settings, get_settings
from control.replay import run_replay
from kinds.memcached.replay.live import ScratchTooLarge, scratch_key

pytestmark = pytest.mark.slow


def test_a_scratch_key_lives_on_its_original_keys_server() -> None:
    """The client connects to checked addresses, production hashes the deployment's names: the scratch key is
    placed by the first hash on the server the second gives the original key."""
    names = ("cache-a.internal:11211", "cache-b.internal:11211", "cache-c.internal:11211")
    addresses = ("10.0.0.5:11211", "10.0.0.6:11211", "10.0.0.7:11211")
    for i in range(300):
        key = f"user:{i}"
        home = server_index(key, names)
        k = scratch_key("abc123", 1, key, home, addresses)
        assert server_index(k, addresses) == home and k.startswith("tailtune:replay:abc123:1:")


def _pool(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, lines: list[str], **node: Any
          ) -> Iterator[dict[str, Any]]:
    """Two memcached servers (`node`: MemcachedNode's arguments), a deployment of them that allows the replay, and
    the dataset of `lines` (CSV)."""
    from control import deployments
    from control.db import database_for
    from control.deployment_spec import DeploymentCreate
    from control.tokens import Principal
    from ingest.pipeline import ingest_file
    from tests.servers.memcached_server import MemcachedNode

    monkeypatch.setenv("TAILTUNE_REPLAY_WARMUP_S", "0.5")
    monkeypatch.setenv("TAILTUNE_REPLAY_MAX_LAG_MS", "600000")
    get_settings.cache_clear()
    settings = get_settings()
    path = tmp_path / "gets.csv"
    path.write_text("\n".join(lines) + "\n")
    dataset = ingest_file(path, settings=settings).id
    nodes = [MemcachedNode(**node), MemcachedNode(**node)]
    try:
        for n in nodes:
            n.start()
        db = database_for(settings.resolved_database_url)
        try:
            with db.session() as s:
                body = DeploymentCreate.model_validate({"name": "cache", "kind": "memcached", "replay_allowed": True,
                                                        "connection": {"servers": [n.address for n in nodes]}})
                deployments.create(s, settings, body, Principal("test-admin", "admin"))
        finally:
            db.dispose()
        yield {"nodes": nodes, "dataset": dataset, "settings": settings}
    finally:
        for n in nodes:
            n.close()
        get_settings.cache_clear()


@pytest.fixture
def pool(tailtune_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, Any]]:
    """A dataset of 1,200 multigets 4 ms apart, mostly 1–6 keys, every 40th an elephant of 80, at two servers of
    memcached's test size (32 MiB)."""
    rnd = random.Random(7)
    lines = ["request_id,ts,key,value_size"]
    for i in range(1200):
        for k in rnd.sample(range(2000), 80 if i % 40 == 0 else rnd.randint(1, 6)):
            lines.append(f"{i},{i * 0.004:.6f},item:{k},{rnd.randint(10, 3000)}")
    yield from _pool(tmp_path, monkeypatch, lines)


def _big_values() -> list[str]:
    """1,200 multigets 4 ms apart of 1–6 keys of 3,000 with values of 2.5–3.5 kB: about 15 MiB of scratch for two
    arms, far over two servers of 4 MiB."""
    rnd = random.Random(11)
    sizes = [rnd.randint(2500, 3500) for _ in range(3000)]
    lines = ["request_id,ts,key,value_size"]
    for i in range(1200):
        for k in rnd.sample(range(3000), rnd.randint(1, 6)):
            lines.append(f"{i},{i * 0.004:.6f},item:{k},{sizes[k]}")
    return lines


@pytest.fixture
def small_pool(tailtune_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, Any]]:
    yield from _pool(tmp_path, monkeypatch, _big_values(), memory_mb=4)


@pytest.fixture
def carved_pool(tailtune_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, Any]]:
    """Servers of 8 MiB whose every page memcached gave to small items (written, then deleted: the pages stay with
    their slab class, `slab_automove=0`); a run that errs throughout is not stopped."""
    monkeypatch.setenv("TAILTUNE_REPLAY_MAX_ERROR_FRACTION", "1")
    for p in _pool(tmp_path, monkeypatch, _big_values(), memory_mb=8, options=("slab_automove=0",)):
        from pymemcache.client.base import Client

        for n in p["nodes"]:
            c = Client((n.host, n.port))
            keys = [f"other:{i}" for i in range(100_000)]
            for lo in range(0, len(keys), 1000):
                c.set_many({k: b"x" * 100 for k in keys[lo : lo + 1000]}, noreply=False)
            for lo in range(0, len(keys), 1000):
                c.delete_many(keys[lo : lo + 1000], noreply=False)
            c.close()
        yield p


def _items(nodes: list[Any], stat: str = "curr_items") -> list[int]:
    from pymemcache.client.base import Client

    out = []
    for n in nodes:
        c = Client((n.host, n.port))
        out.append(int(c.stats()[stat.encode()]))
        c.close()
    return out


def test_batching_and_chisel_run_concurrently_with_every_answer_checked(pool: dict[str, Any]) -> None:
    settings: Settings = pool["settings"]
    report = run_replay("cache", pool["dataset"], [("batch", "batching"), ("chisel", "chisel")], duration_s=4.0,
                        block_s=0.5, settings=settings)
    doc = report.as_dict()
    assert [(a["name"], a["mode"], a["config"]["policy"]) for a in doc["arms"]] == [
        ("batch", "concurrent", "batching"), ("chisel", "concurrent", "chisel")]
    levels = doc["arms"][1]["config"]["params"]  # Chisel's analyzer's levels for this trace, as the model finds them
    assert set(levels) == {"elephant_threshold", "merge", "split_keys"}
    assert doc["generator"]["driver"].startswith("tailtune-client") and doc["blocks"] == 8
    for name in ("batch", "chisel"):
        observed, arm = doc["observed"][name], doc["cluster"]["arms"][name]
        assert observed["requests"] > 300 and observed["errors"] == observed["timeouts"] == 0
        # every value read was the one written for that key: none missing, none wrong
        assert arm["answers_checked"] == observed["requests"] and arm["wrong_answers"] == 0
        assert arm["queries"] >= arm["requests"]
    assert doc["cluster"]["arms"]["batch"]["extra_queries"] == 0  # one query per server a request touches
    assert set(doc["predicted"]) == {"batch", "chisel"}
    assert [i["arm"] for i in doc["interference"]["arms"]] == ["batch", "chisel"]
    assert _items(pool["nodes"]) == [0, 0]  # the scratch keys are deleted


def test_a_cancelled_replay_removes_its_scratch_keys(pool: dict[str, Any]) -> None:
    class Cancelled(Exception):
        pass

    seen: list[str] = []

    def cancel(stage: str, fraction: float) -> None:
        seen.append(stage)
        if stage == "replay" and fraction > 0.3:
            raise Cancelled

    with pytest.raises(Cancelled):
        run_replay("cache", pool["dataset"], [("batch", "batching"), ("chisel", "chisel")], duration_s=4.0,
                   block_s=0.5, settings=pool["settings"], on_progress=cancel)
    assert "load" in seen and _items(pool["nodes"]) == [0, 0]


def test_repeats_add_their_blocks(pool: dict[str, Any]) -> None:
    """Each repeat deals the requests anew and adds its blocks: 2 repeats of 2 s in blocks of 0.5 s are 8 blocks."""
    report = run_replay("cache", pool["dataset"], [("batch", "batching"), ("split", "chisel:elephant_threshold=20,"
                                                   "merge=1,split_keys=10")], duration_s=2.0, repeats=2, block_s=0.5,
                        settings=pool["settings"])
    doc = report.as_dict()
    assert doc["blocks"] == 8 and doc["duration_s"] == 4.0
    assert doc["arms"][1]["config"]["params"] == {"elephant_threshold": 20, "merge": 1, "split_keys": 10}
    assert doc["cluster"]["arms"]["split"]["extra_queries"] > 0  # its elephants go out in chunks
    # ... which read no key twice: each arm's reads are the keys its requests read, none extra, nothing flagged,
    # so the replay is pooled into the deployment's agreement
    loads = {a["arm"]: a for a in doc["interference"]["arms"]}
    assert {a: (loads[a]["extra_reads"], loads[a]["reads"] > doc["observed"][a]["requests"]) for a in loads} == {
        "batch": (0, True), "split": (0, True)}
    assert not doc["interference"]["flagged"]
    assert any("queries beyond one per server" in n and "not counted as interference" in n for n in doc["notes"])
    assert _items(pool["nodes"]) == [0, 0]


def test_a_scratch_over_the_servers_memory_is_refused_and_what_fits_answers_right(small_pool: dict[str, Any]) -> None:
    """Two arms' scratch is about 15 MiB against servers of 4 MiB: memcached would evict scratch keys and most
    answers would be wrong (they were: the run stopped, nearly every request missing a key). The replay refuses
    before writing anything, naming the figures; the duration it names runs with every answer right."""
    nodes, arms = small_pool["nodes"], [("batch", "batching"), ("chisel", "chisel")]
    with pytest.raises(ScratchTooLarge) as refused:
        run_replay("cache", small_pool["dataset"], arms, duration_s=4.0, block_s=0.5, settings=small_pool["settings"])
    text = str(refused.value)
    assert "limit_maxbytes 4.0 MiB" in text and "TAILTUNE_REPLAY_MEMCACHED_MAX_FILL (0.9)" in text
    assert "2 arms ×" in text and "nothing was written" in text
    assert _items(nodes, "total_items") == [0, 0]  # not one scratch key was written
    fits = refused.value.fitting_duration_s
    assert 0.5 <= fits < 4.0 and f"--duration {int(fits * 10) / 10:g} s" in str(refused.value.hint)
    report = run_replay("cache", small_pool["dataset"], arms, duration_s=int(fits * 2) / 2, block_s=0.5,
                        settings=small_pool["settings"])
    doc = report.as_dict()
    for name in ("batch", "chisel"):
        arm = doc["cluster"]["arms"][name]
        assert arm["answers_checked"] > 0 and arm["wrong_answers"] == arm["missing_answers"] == 0
        assert doc["observed"][name]["errors"] == 0
    assert doc["cluster"]["evictions"] == 0
    servers = doc["cluster"]["servers"]
    assert [s["limit_maxbytes"] for s in servers.values()] == [4 * 1024 * 1024] * 2
    assert all(0 < s["scratch_bytes"] <= 0.9 * s["limit_maxbytes"] and s["counted"] for s in servers.values())
    assert _items(nodes) == [0, 0]


def test_evictions_during_the_replay_are_counted_beside_the_missing_answers(carved_pool: dict[str, Any]) -> None:
    """The servers' pages all hold small items' slab class: the scratch's sizes get a page each, so memcached
    evicts scratch keys as they are written; the report counts the evictions, every wrong answer is a missing key
    (no value read differs from the one written), and a note says the servers' memory did it."""
    report = run_replay("cache", carved_pool["dataset"], [("batch", "batching"), ("chisel", "chisel")],
                        duration_s=2.0, block_s=0.5, settings=carved_pool["settings"])
    doc = report.as_dict()
    servers = doc["cluster"]["servers"]
    assert doc["cluster"]["evictions"] == sum(s["evictions"] for s in servers.values()) > 0
    assert all(s["bytes_before"] < 1024 * 1024 for s in servers.values())  # the check saw free memory
    missing = sum(a["missing_answers"] for a in doc["cluster"]["arms"].values())
    assert missing > 0
    assert all(a["wrong_answers"] == a["missing_answers"] for a in doc["cluster"]["arms"].values())
    assert any("evicted" in n and "the servers' memory, not the config" in n for n in doc["notes"])
