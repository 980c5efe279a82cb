"""Publish targets: one module per kind behind `Publisher` (base.py); `publisher_for` picks by deployment
kind.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from control.egress import Egress
from control.publishers.base import (
    Head,
    Known,
    PartialPublish,
    PublishConflict,
    Publisher,
    PublishFailed,
    PublishOutcome,
    PublishRejected,
    TargetUnavailable,
    document,
    publish_with_retry,
)
from control.publishers.cassandra import CassandraPublisher
from control.publishers.memcached import MemcachedPublisher

__all__ = [
    "PUBLISHERS",
    "CassandraPublisher",
    "Head",
    "Known",
    "MemcachedPublisher",
    "PartialPublish",
    "PublishConflict",
    "PublishFailed",
    "PublishOutcome",
    "PublishRejected",
    "Publisher",
    "TargetUnavailable",
    "document",
    "publish_with_retry",
    "publisher_for",
]

PUBLISHERS: dict[str, type[Publisher]] = {
    CassandraPublisher.kind: CassandraPublisher,
    MemcachedPublisher.kind: MemcachedPublisher,
}


def publisher_for(
    kind: str,
    deployment: str,
    connection: dict[str, Any],
    timeout_s: float,
    *,
    memcached_item_max_bytes: int = 1024**2,
    memcached_stale_versions_max: int = 10_000,
    memcached_config_key_env: str = "",
    tables: Sequence[str] = (),
    driver: str = "java4",
    server: str = "stock",
    egress: Egress | None = None,
) -> Publisher:
    """The publisher of a deployment's target; `tables`, `driver` and `server` are the deployment's (Cassandra);
    `memcached_config_key_env` the variable holding the key memcached documents are MACed with;
    `egress` the operator's rules of what the worker may read and reach (default: the password-variable rule
    alone)."""
    if kind == MemcachedPublisher.kind:
        return MemcachedPublisher(
            deployment,
            connection,
            timeout_s,
            item_max_bytes=memcached_item_max_bytes,
            stale_versions_max=memcached_stale_versions_max,
            config_key_env=memcached_config_key_env,
            egress=egress,
        )
    return PUBLISHERS[kind](
        deployment, connection, timeout_s, tables=tables, driver=driver, server=server, egress=egress
    )
