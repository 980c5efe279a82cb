"""The Java driver 4's request tracker (`clients/java/tracker`, built by `kinds.cassandra.tracker.build`): an
application on the real Java driver (`TrackerApp.java`) against a real Cassandra, its requests uploaded by the
tracker to the real service (uvicorn) as a `tailtune-client` trace and ingested by its own job — one request per
application request, with the partition keys it bound (an `IN ?` list's elements; a composite key joined by `:`)."""

from __future__ import annotations

import itertools
import json
import os
import shutil
import subprocess
import uuid
from pathlib import Path
from typing import Any

import pytest

from base.javac import compile_once
from ingest.store import DatasetStore
from jobs.handlers import default_handlers
from jobs.worker import Worker
from kinds.cassandra.replay.jvm import fetch_lib
from kinds.cassandra.tracker import TOKEN_ENV, build
from tests.app_fixtures import Svc, cassandra_deployment
from tests.servers.cassandra_server import CassandraNode

pytestmark = pytest.mark.slow

API = "/api/v1"
_APP = Path(__file__).resolve().parent / "TrackerApp.java"


def _run_app(svc: Svc, served: str, node: CassandraNode, *mode: str) -> tuple[int, str, dict[str, Any],
                                                                             list[dict[str, Any]]]:
    """Run `TrackerApp` (with `mode`) on a fresh keyspace; (deployment id, keyspace, the upload's header, its
    request lines) of the one trace it uploaded."""
    from cassandra.cluster import Cluster

    java = shutil.which("java")
    assert java is not None
    ks = f"trk_{uuid.uuid4().hex[:8]}"
    cluster = Cluster([node.host], port=node.port)
    session = cluster.connect()
    session.execute(f"CREATE KEYSPACE {ks} WITH replication = {{'class': 'SimpleStrategy', 'replication_factor': 1}}")
    session.execute(f"CREATE TABLE {ks}.t (k text PRIMARY KEY, v blob)")
    session.execute(f"CREATE TABLE {ks}.c (a int, b text, v blob, PRIMARY KEY ((a, b)))")
    dc = session.execute("SELECT data_center FROM system.local").one().data_center
    body = {**cassandra_deployment(f"trk-{ks}", node.port, ks), "driver": "java4"}
    r = svc.client.post(f"{API}/deployments", json=body, headers=svc.write)
    assert r.status_code == 201, r.text
    dep_id = int(r.json()["id"])
    jar = build()
    lib = fetch_lib()
    app = compile_once(_APP, lib, jar.parent / f"tracker-app-{uuid.uuid4().hex[:8]}", main_class="TrackerApp",
                       purpose="the tracker's test application")
    env = {k: v for k, v in os.environ.items() if k not in ("JAVA_TOOL_OPTIONS", "CLASSPATH")}
    env[TOKEN_ENV] = svc.write["Authorization"].removeprefix("Bearer ")
    try:
        run = subprocess.run(
            [java, "-Xmx256m", "-XX:TieredStopAtLevel=1", "-cp", f"{app}{os.pathsep}{jar}{os.pathsep}{lib}/*",
             "TrackerApp", node.host, str(node.port), dc, ks, f"{served}{API}/traces", str(dep_id), *mode],
            capture_output=True, text=True, timeout=180, env=env, check=False,
        )
    finally:
        shutil.rmtree(app, ignore_errors=True)
        session.execute(f"DROP KEYSPACE IF EXISTS {ks}")
        cluster.shutdown()
    assert run.returncode == 0 and run.stdout.strip() == "ok", run.stderr[-3000:]
    (trace,) = svc.client.get(f"{API}/traces?deployment_id={dep_id}", headers=svc.read).json()
    assert trace["format"] == "tailtune-client"
    (upload,) = (svc.settings.home_dir / "uploads").glob("*.trace")
    header, *lines = [json.loads(x) for x in upload.read_text().splitlines()]
    return dep_id, ks, header, lines


def test_the_java_tracker_uploads_the_requests_the_application_sent(
    svc: Svc, served: str, cassandra_node: CassandraNode
) -> None:
    dep_id, ks, header, lines = _run_app(svc, served, cassandra_node)
    assert header["client"]["name"] == "tailtune-java-tracker" and header["deployment_id"] == dep_id
    assert header["sample_rate"] == 1.0 and header["records"] == len(lines) == 10
    assert header["dropped"] == {"memory": 0, "bandwidth": 0, "unkeyed": 1}
    assert {x["config_version"] for x in lines} == {7}
    assert [x["op"] for x in lines] == ["read"] * 7 + ["write", "read", "read"]
    assert [x["failed"] for x in lines] == [False] * 9 + [True]
    assert all(a["ts"] <= b["ts"] for a, b in itertools.pairwise(lines))
    (trace,) = svc.client.get(f"{API}/traces?deployment_id={dep_id}", headers=svc.read).json()
    worker = Worker(svc.settings, svc.db, "w-trk-java", handlers=default_handlers(), schedule=False)
    assert worker.run_once() == "succeeded"
    trace = svc.client.get(f"{API}/traces/{trace['id']}", headers=svc.read).json()
    assert trace["status"] == "ready", trace
    info = DatasetStore(svc.settings).find(trace["dataset_id"])
    assert info is not None
    table = info.read_table()
    requests: dict[int, list[str]] = {}
    for rid, key in zip(table.column("request_id").to_pylist(), table.column("key").to_pylist(), strict=True):
        requests.setdefault(rid, []).append(key)
    assert list(requests.values()) == [["k0"], ["k1"], ["k2"], ["k3"], ["k4"], ["k1", "k2", "k3"], ["k4"],
                                       ["1:x\\:y"], ["k5"]]
    assert set(table.column("table").to_pylist()) == {f"{ks}.t", f"{ks}.c"}
    assert all(x > 0 for x in table.column("latency_us").to_pylist())
    notes = info.manifest["notes"]
    assert any("1 write request(s) left out" in n for n in notes), notes
    assert any("without keys 1" in n for n in notes), notes


def test_the_java_tracker_counts_what_its_caps_drop(svc: Svc, served: str, cassandra_node: CassandraNode) -> None:
    # 40 records of ~150 bytes under a 1 KiB memory cap: the first few held, the rest dropped for memory; the held
    # ones then past an upload budget of 0.001 bytes/s: dropped for bandwidth. Every one counted, none sent.
    _, _, header, lines = _run_app(svc, served, cassandra_node, "caps")
    assert header["records"] == len(lines) == 0
    dropped = header["dropped"]
    assert dropped["memory"] > 0 and dropped["bandwidth"] > 0 and dropped["unkeyed"] == 0
    assert dropped["memory"] + dropped["bandwidth"] == 40
