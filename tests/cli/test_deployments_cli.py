"""`tailtune deployments`: register, change and show a deployment's server, driver and tables in the metadata DB,
with the API's checks (exit 2 for bad input, 3 for an unknown name)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def test_create_set_show(cli: Any, tmp_path: Path) -> None:
    body = {
        "name": "shop",
        "kind": "cassandra",
        "topology": {"servers": 3, "replication": 3},
        "connection": {"contact_points": ["10.0.0.7"]},
        "tables": ["shop.carts"],
    }
    f = tmp_path / "d.json"
    f.write_text(json.dumps(body))
    r = cli("deployments", "create", str(f), "--json")
    assert r.exit_code == 0, r.stderr
    created = json.loads(r.stdout)
    assert (created["server"], created["driver"], created["tables"]) == ("stock", "java4", ["shop.carts"])

    r = cli("deployments", "set", "shop", "--server", "rein-patched", "--driver", "python",
            "--table", "shop.carts", "--table", "shop.items", "--json")
    assert r.exit_code == 0, r.stderr
    assert {k: json.loads(r.stdout)[k] for k in ("server", "driver", "tables")} == {
        "server": "rein-patched",
        "driver": "python",
        "tables": ["shop.carts", "shop.items"],
    }
    r = cli("deployments", "set", "shop", "--no-tables", "--json")
    assert json.loads(r.stdout)["tables"] == []

    r = cli("deployments", "set", "shop", "--table", "system.local")
    assert r.exit_code == 2 and "field 'tables': tables[0]: 'system.local' is in a system keyspace" in r.stderr
    r = cli("deployments", "set", "shop", "--driver", "go")
    assert r.exit_code == 2 and "field 'driver'" in r.stderr
    r = cli("deployments", "show", "nope")
    assert r.exit_code == 3 and "deployment 'nope' not found" in r.stderr
    r = cli("deployments", "list", "--json")
    assert [d["name"] for d in json.loads(r.stdout)] == ["shop"]


def test_tune_a_deployment_replays_its_model(cli: Any, tmp_path: Path) -> None:
    body = {"name": "model-cli", "kind": "cassandra", "topology": {"servers": 6, "slots": 2, "replication": 2},
            "connection": {"contact_points": ["10.0.0.7"]}, "server": "rein-patched"}
    f = tmp_path / "d.json"
    f.write_text(json.dumps(body))
    assert cli("deployments", "create", str(f)).exit_code == 0
    args = ("tune", "--deployment", "model-cli", "--profile", "soundcloud", "--requests", "1500", "--trials", "2",
            "--seeds", "1", "--alternative-trials", "0", "--no-mlflow", "--storage", "memory", "--json")
    r = cli(*args)
    assert r.exit_code == 0, r.stderr
    tuned = json.loads(r.stdout)["tuned_for"]
    assert (tuned["servers"], tuned["slots"], tuned["replication"]) == (6, 2, 2)
    assert tuned["use_timestamps"] is True and tuned["load"] is None  # the generated trace's own arrivals
    assert tuned["model_sources"]["arrivals"] == "trace" and tuned["model_sources"]["service_time"] == "default"
    assert "rests on the simulator's defaults for service_time, capacity, network, client_key, ring" in " ".join(
        r.stderr.split())
    # --load stays a what-if: Poisson arrivals at that load, marked as the operator's
    r = cli(*args, "--load", "0.4")
    assert r.exit_code == 0, r.stderr
    tuned = json.loads(r.stdout)["tuned_for"]
    assert tuned["load"] == 0.4 and not tuned["use_timestamps"] and tuned["model_sources"]["arrivals"] == "declared"
    r = cli("tune", "--deployment", "nope", "--profile", "soundcloud", "--requests", "100")
    assert r.exit_code == 3 and "deployment 'nope' not found" in r.stderr


def test_create_checks_the_current_config_like_the_api(cli: Any, tmp_path: Path) -> None:
    body = {
        "name": "shop",
        "kind": "cassandra",
        "topology": {"servers": 3, "replication": 3},
        "connection": {"contact_points": ["10.0.0.7"]},
        "current_config": {"policy": "rein", "params": {"k": -4}},
    }
    f = tmp_path / "d.json"
    f.write_text(json.dumps(body))
    r = cli("deployments", "create", str(f))
    assert r.exit_code == 2 and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert f"{f}: field 'config.params.k': must be an integer in [1, 64], got -4" in r.stderr
    f.write_text(json.dumps({**body, "current_config": {"policy": "rein", "params": {"k": 4}}}))
    assert cli("deployments", "create", str(f)).exit_code == 0


def test_show_prints_the_model_a_field_a_line_and_the_round_trip_as_p50_p99(cli: Any, tmp_path: Path) -> None:
    import time

    from base.settings import get_settings
    from control.db import DeploymentRow, database_for

    body = {"name": "cal", "kind": "cassandra", "topology": {"servers": 3, "replication": 3},
            "connection": {"contact_points": ["10.0.0.7"]}}
    f = tmp_path / "d.json"
    f.write_text(json.dumps(body))
    assert cli("deployments", "create", str(f)).exit_code == 0
    rtt = [0.7 + 0.004 * i for i in range(95)] + [1.5, 2.0, 3.0, 4.0, 4.7, 6.0]  # p0..p100, as calibrated
    with database_for(get_settings().resolved_database_url).session() as s:
        row = s.query(DeploymentRow).filter_by(name="cal").one()
        row.model = {**row.model, "inputs": {
            "network": {"value": {"one_way_ms": 0.43, "rtt_quantiles_ms": rtt}, "source": "calibrated",
                        "at": time.time(), "how": "trivial round trips"}}}
    r = cli("deployments", "show", "cal")
    assert r.exit_code == 0, r.stderr
    model = r.stdout.split("model (what a tune simulates", 1)[1]
    network = next(line for line in model.splitlines() if line.strip().startswith("network "))
    assert "one_way_ms 0.43; rtt_quantiles_ms p50 0.9 ms, p99 4.7 ms" in network
    assert "(calibrated: trivial round trips)" in network
    assert "0.704" not in model and "[" not in model  # not the 101 quantiles one by one, no raw JSON
    assert any(line.split()[:2] == ["servers", "3"] and "(declared" in line for line in model.splitlines() if line)
