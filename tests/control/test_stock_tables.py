"""What a config asks of a deployment's tables, and the values a rollback restores (pure functions; the real
Cassandra round trip is in test_publish_stock.py)."""

from __future__ import annotations

from typing import Any

import pytest

from base.errors import BadInputError
from control.publishers.stock import (
    desired_table_options,
    merge_record,
    restore_map,
    sets_table_options,
)
from simulation.stock import SpeculativeRetry, parse_speculative_retry
from tests.app_fixtures import Svc, cassandra_deployment

T = ["ks.a", "ks.b"]


def desired_speculative_retry(config: dict[str, Any], tables: list[str]) -> dict[str, SpeculativeRetry]:
    """The speculative_retry `config` asks of each table (`desired_table_options`, one option)."""
    return {t: opts["speculative_retry"] for t, opts in desired_table_options(config, tables).items()}


def test_which_configs_set_the_tables() -> None:
    assert desired_speculative_retry({"policy": "stock", "params": {}}, T) == {
        "ks.a": parse_speculative_retry("99p"),
        "ks.b": parse_speculative_retry("99p"),
    }
    assert desired_speculative_retry({"policy": "rein", "params": {"speculative_retry": "NONE"}}, T) == {
        "ks.a": parse_speculative_retry("NEVER"),
        "ks.b": parse_speculative_retry("NEVER"),
    }
    assert desired_speculative_retry({"policy": "fifo", "params": {}}, T) == {}
    explicit = {"policy": "fifo", "params": {}, "target": {"table_options": {"ks.b": {"speculative_retry": "50ms"}}}}
    assert desired_speculative_retry(explicit, T) == {"ks.b": parse_speculative_retry("50ms")}
    assert not sets_table_options(explicit) and sets_table_options({"policy": "stock"})
    with pytest.raises(BadInputError):
        desired_speculative_retry({"policy": "stock", "params": {"speculative_retry": "5s"}}, T)


def test_restore_map_takes_the_value_in_force_at_the_version() -> None:
    published: list[tuple[int, dict[str, Any]]] = [
        (1, {"at": 1.0}),  # a fifo version: no tables touched
        (2, {"tables": {"ks.a": {"before": "99p", "after": "10ms"}, "ks.b": {"before": "50ms", "after": "10ms"}}}),
        (3, {"tables": {"ks.a": {"before": "10ms", "after": "ALWAYS"}}}),
        (4, {}),  # never published
    ]
    # before tailtune's first change: the operator's own values
    assert restore_map(published, 1, T) == {"ks.a": "99p", "ks.b": "50ms"}
    assert restore_map(published, 2, T) == {"ks.a": "10ms", "ks.b": "10ms"}
    assert restore_map(published, 3, T) == {"ks.a": "ALWAYS", "ks.b": "10ms"}
    assert restore_map(published, 1, ["ks.c"]) == {}  # a table tailtune never changed is left alone


def test_stock_configs_are_checked_against_the_deployment(svc: Svc) -> None:
    body = {**cassandra_deployment("shop-check", 9042), "driver": "python", "tables": ["ks.a"]}
    dep = svc.client.post("/api/v1/deployments", json=body, headers=svc.write).json()

    def add(config: dict[str, Any]) -> Any:
        return svc.client.post(
            f"/api/v1/configs/{dep['id']}/versions", json={"config": config, "publish": False}, headers=svc.write
        )

    bad = [
        (
            {"policy": "stock", "params": {"driver.slow_replica_avoidance": 1}},
            "config.params.driver.slow_replica_avoidance",
            "the Python driver has no slow-replica avoidance",
        ),
        (
            {"policy": "stock", "params": {"driver": "java4"}},
            "config.params.driver",
            "the deployment's driver is python",
        ),
        (
            {"policy": "stock", "params": {"driver.speculative_execution.max_executions": 0}},
            "config.params.driver.speculative_execution.max_executions",
            "must be an integer in [1, 2147483647], got 0",
        ),
        (
            {"policy": "stock", "params": {"multiget.shape": "sideways"}},
            "config.params.multiget.shape",
            "must be one of",
        ),
        (
            {"policy": "fifo", "target": {"table_options": {"ks.a": {"speculative_retry": "MIN(99p,95p)"}}}},
            "config.target.table_options.ks.a.speculative_retry",
            "invalid value",
        ),
        ({"policy": "fifo", "target": {"table_options": {"ks.a": "99p"}}}, "config.target.table_options", "must be"),
    ]
    for config, field, needle in bad:
        r = add(config)
        assert r.status_code == 422 and r.json()["field"] == field and needle in r.json()["detail"], r.text
    r = add({"policy": "stock", "params": {"driver.shuffle_replicas": 1, "multiget.shape": "per-partition"}})
    assert r.status_code == 201, r.text
    stored = r.json()
    assert stored["applies_to"] == {"server": "stock", "driver": "python", "tables": ["ks.a"]}
    assert stored["config"]["target"]["driver"]["python"]["load_balancing"]["shuffle_replicas"] is True
    assert stored["config"]["target"]["cql"] == ["ALTER TABLE ks.a WITH speculative_retry = '99p';"]


def test_a_republish_keeps_the_first_before() -> None:
    first = {"at": 1.0, "tables": {"ks.a": {"before": "99p", "after": "10ms"}}}
    again = {
        "at": 2.0,
        "tables": {"ks.a": {"before": "10ms", "after": "10ms"}, "ks.b": {"before": "5ms", "after": "10ms"}},
    }
    assert merge_record(first, again) == {
        "at": 2.0,
        "tables": {"ks.a": {"before": "99p", "after": "10ms"}, "ks.b": {"before": "5ms", "after": "10ms"}},
    }
    assert merge_record(None, again) == again
