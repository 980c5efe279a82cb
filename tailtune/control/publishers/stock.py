"""What a config asks of a Cassandra deployment's tables (the per-table options a stock config sets live), and
the records the Cassandra publisher keeps of what it changed.

A config sets `speculative_retry` on every table of the deployment when its params carry `speculative_retry`, or
when its policy is `stock` (unset = Cassandra's default, `99p`). `target.table_options` names values per table
explicitly (`{"ks.t": {"speculative_retry": "99p"}}`) and wins over the params: a rollback writes it to restore
the values in force at the version it returns to (`restore_map`). Other configs leave table options alone.

The publisher records, with the version it published, each table's value before and after
(`published.cassandra.tables = {"ks.t": {"before": "99p", "after": "MIN(99p,5ms)"}}`, Cassandra's normalised
texts as `system_schema.tables` shows them).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from tailtune.simulation.config_check import TABLE_OPTIONS
from tailtune.simulation.stock import DEFAULT_SPECULATIVE_RETRY, SpeculativeRetry, parse_speculative_retry

__all__ = ["TABLE_OPTIONS", "desired_speculative_retry", "merge_record", "restore_map", "sets_table_options"]


def _explicit(config: Mapping[str, Any]) -> Mapping[str, Any]:
    target = config.get("target")
    options = target.get(TABLE_OPTIONS) if isinstance(target, Mapping) else None
    return options if isinstance(options, Mapping) else {}


def _base(config: Mapping[str, Any]) -> str | None:
    params = config.get("params")
    if isinstance(params, Mapping) and isinstance(params.get("speculative_retry"), str):
        return str(params["speculative_retry"])
    return DEFAULT_SPECULATIVE_RETRY if config.get("policy") == "stock" else None


def sets_table_options(config: Mapping[str, Any]) -> bool:
    """Whether `config` sets speculative_retry on the deployment's tables (every table) by itself."""
    return _base(config) is not None


def desired_speculative_retry(config: Mapping[str, Any], tables: Sequence[str]) -> dict[str, SpeculativeRetry]:
    """The parsed speculative_retry `config` asks of each of `tables` (tables it leaves alone are absent).
    Raises BadInputError for a text Cassandra would refuse."""
    base, explicit = _base(config), _explicit(config)
    out: dict[str, SpeculativeRetry] = {}
    for table in tables:
        opts = explicit.get(table)
        text = opts.get("speculative_retry") if isinstance(opts, Mapping) else None
        text = text if isinstance(text, str) else base
        if text is not None:
            out[table] = parse_speculative_retry(text, where=f"speculative_retry of {table}")
    return out


def restore_map(
    published: Iterable[tuple[int, Mapping[str, Any]]], version: int, tables: Sequence[str]
) -> dict[str, str]:
    """The speculative_retry each table had while `version` was current, from the publisher's records
    (`published`: (version, that version's `published.cassandra`) of every version): the `after` of the newest
    published version <= `version` that changed the table, else the `before` of the oldest later one that did
    (the value the table had before tailtune first changed it). Tables tailtune never changed are absent."""
    records = sorted(
        (v, rec["tables"])
        for v, rec in published
        if isinstance(rec, Mapping) and isinstance(rec.get("tables"), Mapping)
    )
    out: dict[str, str] = {}
    for table in tables:
        upto = [t[table]["after"] for v, t in records if v <= version and isinstance(t.get(table), Mapping)]
        later = [t[table]["before"] for v, t in records if v > version and isinstance(t.get(table), Mapping)]
        value = upto[-1] if upto else later[0] if later else None
        if isinstance(value, str):
            out[table] = value
    return out


def merge_record(old: Mapping[str, Any] | None, new: Mapping[str, Any]) -> dict[str, Any]:
    """The record of a version published again: the new one, except that each table keeps the `before` of the
    first publish (a republish finds the table already changed; its `before` would hide the operator's value),
    and so does the latency snapshot taken before the first publish (`latency`: what the verify step compares
    with)."""
    out = dict(new)
    if isinstance(old, Mapping) and isinstance(old.get("latency"), Mapping):
        out["latency"] = old["latency"]
    old_tables = old.get("tables") if isinstance(old, Mapping) else None
    new_tables = new.get("tables")
    if isinstance(old_tables, Mapping) and isinstance(new_tables, Mapping):
        out["tables"] = {
            t: {**rec, "before": old_tables[t]["before"]}
            if isinstance(old_tables.get(t), Mapping) and "before" in old_tables[t]
            else rec
            for t, rec in new_tables.items()
        }
    return out
