"""The canonical trace dataset: long format, one row per key access (see docs/formats.md).

Rows sharing a `request_id` form one multiget. Every other part of tailtune reads datasets through this schema.
"""

from __future__ import annotations

from typing import Final

import pyarrow as pa

__all__ = [
    "CANONICAL_SCHEMA",
    "OPTIONAL_FIELDS",
    "REQUIRED_FIELDS",
    "SCHEMA_VERSION",
    "canonical_schema_for",
]

#: Bumped whenever the canonical columns or their meaning change; stored in every manifest.json.
SCHEMA_VERSION: Final = 1

CANONICAL_SCHEMA: Final = pa.schema(
    [
        pa.field("request_id", pa.int64(), nullable=False),  # rows sharing it form one multiget
        pa.field("ts", pa.float64(), nullable=False),  # arrival of the request, seconds
        pa.field("key", pa.string(), nullable=False),
        pa.field("value_size", pa.int64(), nullable=True),  # bytes; null = unknown
        pa.field("op", pa.string(), nullable=True),  # get/set/delete/...
        pa.field("client_id", pa.string(), nullable=True),
        pa.field("latency_us", pa.float64(), nullable=True),  # observed, per op or per request
        pa.field("table", pa.string(), nullable=True),
        pa.field("node", pa.string(), nullable=True),  # the server that logged the row (a query log's coordinator)
    ]
)

REQUIRED_FIELDS: Final = ("request_id", "ts", "key", "value_size")
OPTIONAL_FIELDS: Final = ("op", "client_id", "latency_us", "table", "node")


def canonical_schema_for(present_optional: set[str]) -> pa.Schema:
    """The canonical schema restricted to the required columns plus the optional ones a dataset has."""
    keep = [f for f in CANONICAL_SCHEMA if f.name in REQUIRED_FIELDS or f.name in present_optional]
    return pa.schema(keep)
