"""Publish targets: one module per kind behind `Publisher` (base.py); `publisher_for` picks by deployment
kind.
"""

from __future__ import annotations

from typing import Any

from tailtune.control.publishers.base import (
    PublishConflict,
    Publisher,
    PublishFailed,
    PublishOutcome,
    TargetUnavailable,
    document,
    publish_with_retry,
)
from tailtune.control.publishers.cassandra import CassandraPublisher
from tailtune.control.publishers.memcached import MemcachedPublisher

__all__ = [
    "PUBLISHERS",
    "CassandraPublisher",
    "MemcachedPublisher",
    "PublishConflict",
    "PublishFailed",
    "PublishOutcome",
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


def publisher_for(kind: str, deployment: str, connection: dict[str, Any], timeout_s: float) -> Publisher:
    return PUBLISHERS[kind](deployment, connection, timeout_s)
