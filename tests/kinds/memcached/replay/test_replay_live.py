"""The live replay of a memcached pool of 2 real servers through tailtune-client: batching and Chisel run
concurrently, one client each; every answer is checked against the value written (none missing, none wrong);
each scratch key lives on its original key's server; the scratch keys are gone afterwards, also when the replay
is cancelled. Seconds of replay in blocks of 0.5 s; no timing is asserted."""

from __future__ import annotations

import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from tailtune_client.hashing import server_index

from base.settings import Settings, get_settings
from control.replay import run_replay
from kinds.memcached.replay.live import scratch_key

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


@pytest.fixture
def pool(tailtune_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, Any]]:
    """Two memcached servers, a deployment of them that allows the replay, and a dataset of 1,200 multigets 4 ms
    apart: mostly 1–6 keys, every 40th an elephant of 80."""
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
    rnd = random.Random(7)
    lines = ["request_id,ts,key,value_size"]
    for i in range(1200):
        for k in rnd.sample(range(2000), 80 if i % 40 == 0 else rnd.randint(1, 6)):
            lines.append(f"{i},{i * 0.004:.6f},item:{k},{rnd.randint(10, 3000)}")
    path = tmp_path / "gets.csv"
    path.write_text("\n".join(lines) + "\n")
    dataset = ingest_file(path, settings=settings).id
    nodes = [MemcachedNode(), MemcachedNode()]
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


def _items(nodes: list[Any]) -> list[int]:
    from pymemcache.client.base import Client

    out = []
    for n in nodes:
        c = Client((n.host, n.port))
        out.append(int(c.stats()[b"curr_items"]))
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
    assert _items(pool["nodes"]) == [0, 0]
