"""Publish targets: what every target does (`Publisher`, base.py) and the retry loop around one publish. Each
kind's publisher lives in its package (`kinds/<name>/publisher.py`); `control.kinds.operations(kind).publisher`
makes the one of a deployment.
"""

from __future__ import annotations

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

__all__ = [
    "Head",
    "Known",
    "PartialPublish",
    "PublishConflict",
    "PublishFailed",
    "PublishOutcome",
    "PublishRejected",
    "Publisher",
    "TargetUnavailable",
    "document",
    "publish_with_retry",
]
