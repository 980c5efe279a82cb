"""The Cassandra driver helper's capture: statements run through `TunedProfiles.execute` on a real Cassandra,
recorded with their partition keys and table, uploaded to the real service (uvicorn) as a `tailtune-client` trace
and ingested by its own job."""

from __future__ import annotations

import pytest

from ingest.store import DatasetStore
from jobs.handlers import default_handlers
from jobs.worker import Worker
from tests.app_fixtures import Svc, cassandra_deployment
from tests.servers.cassandra_server import CassandraNode

API = "/api/v1"


@pytest.mark.slow
def test_tuned_profiles_record_the_statements_they_run(svc: Svc, served: str, cassandra_node: CassandraNode) -> None:
    from cassandra.cluster import Cluster
    from cassandra.query import SimpleStatement
    from tailtune_client.capture import RequestCapture
    from tailtune_client.cassandra import TunedProfiles

    body = {**cassandra_deployment("cap-cas", cassandra_node.port, "tt_cap"), "driver": "python"}
    r = svc.client.post(f"{API}/deployments", json=body, headers=svc.write)
    assert r.status_code == 201, r.text
    dep_id = int(r.json()["id"])
    read = svc.read["Authorization"].removeprefix("Bearer ")
    write = svc.write["Authorization"].removeprefix("Bearer ")
    capture = RequestCapture(rate=1.0, deployment_id=dep_id, upload_bytes_per_s=1e9)
    profiles = TunedProfiles(f"{served}{API}/configs/{dep_id}", token=read, poll_interval=0,
                             config={"policy": "stock", "params": {}}, capture=capture)
    cluster = Cluster([cassandra_node.host], port=cassandra_node.port, protocol_version=5,
                      execution_profiles=profiles.execution_profiles())
    try:
        session = cluster.connect()
        stmt = SimpleStatement("SELECT release_version FROM system.local WHERE key = %s", is_idempotent=True)
        for _ in range(3):
            assert profiles.execute(session, stmt, ["local"], keys=["local"], table="system.local").one()
        profiles.execute(session, stmt, ["local"], keys=1)  # the keys not named: counted, not recorded
        assert capture.upload(f"{served}{API}/traces", write) is True
    finally:
        cluster.shutdown()
        profiles.close()
    assert capture.stats()["dropped"]["unkeyed"] == 1
    (trace,) = svc.client.get(f"{API}/traces?deployment_id={dep_id}", headers=svc.read).json()
    assert trace["format"] == "tailtune-client"
    worker = Worker(svc.settings, svc.db, "w-cap-cas", handlers=default_handlers(), schedule=False)
    assert worker.run_once() == "succeeded"
    trace = svc.client.get(f"{API}/traces/{trace['id']}", headers=svc.read).json()
    assert trace["status"] == "ready", trace
    info = DatasetStore(svc.settings).find(trace["dataset_id"])
    assert info is not None
    table = info.read_table()
    assert table.column("key").to_pylist() == ["local"] * 3
    assert table.column("table").to_pylist() == ["system.local"] * 3
    assert all(x > 0 for x in table.column("latency_us").to_pylist())
    assert any("without keys 1" in n for n in info.manifest["notes"])
