"""What a config asks of a Cassandra deployment's tables (the table options a stock config sets live: the `cql`
rows of `STOCK_KNOBS`, through their applier `simulation.stock_appliers.TABLE`), and the records the
Cassandra publisher keeps of what it changed.

A config sets a table option on every table of the deployment when its params carry the option, or when its
policy is `stock` (unset = Cassandra's default: `speculative_retry` `99p`). `target.table_options` names values per
table explicitly (`{"ks.t": {"speculative_retry": "99p"}}`) and wins over the params: a rollback writes it to
restore the values in force at the version it returns to (`restore_options`). Other configs leave table options
alone.

The publisher records, with the version it published, each table's value before and after, per option under its
row's `record` (`published.cassandra.tables = {"ks.t": {"before": "99p", "after": "MIN(99p,5ms)"}}` for
`speculative_retry`: Cassandra's normalised texts as `system_schema.tables` shows them).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from simulation.config_check import TABLE_OPTIONS
from simulation.stock_appliers import TABLE
from simulation.stock_knobs import StockKnob

__all__ = [
    "TABLE_OPTIONS",
    "desired_table_options",
    "merge_record",
    "restore_map",
    "restore_options",
    "sets_table_options",
]


def _explicit(config: Mapping[str, Any]) -> Mapping[str, Any]:
    target = config.get("target")
    options = target.get(TABLE_OPTIONS) if isinstance(target, Mapping) else None
    return options if isinstance(options, Mapping) else {}


def _given(option: StockKnob, value: object) -> bool:
    """Whether `value` is a value of `option` a config gives (a text option's is text)."""
    return value is not None and (option.kind != "text" or isinstance(value, str))


def _base(config: Mapping[str, Any]) -> dict[str, Any]:
    """The value of each table option `config` sets on every table by itself."""
    params = config.get("params")
    params = params if isinstance(params, Mapping) else {}
    stock = config.get("policy") == "stock"
    out: dict[str, Any] = {}
    for option in TABLE.knobs():
        value = params.get(option.name)
        if _given(option, value):
            out[option.name] = value
        elif stock:
            out[option.name] = option.default
    return out


def sets_table_options(config: Mapping[str, Any]) -> bool:
    """Whether `config` sets table options on the deployment's tables (every table) by itself."""
    return bool(_base(config))


def desired_table_options(config: Mapping[str, Any], tables: Sequence[str]) -> dict[str, dict[str, Any]]:
    """The parsed options `config` asks of each of `tables` (`{table: {option: value}}`; tables it leaves alone
    are absent). Raises BadInputError for a value Cassandra would refuse."""
    base, explicit = _base(config), _explicit(config)
    out: dict[str, dict[str, Any]] = {}
    for table in tables:
        opts = explicit.get(table)
        mine: dict[str, Any] = {}
        for option in TABLE.knobs():
            value = opts.get(option.name) if isinstance(opts, Mapping) else None
            value = value if _given(option, value) else base.get(option.name)
            if value is not None:
                mine[option.name] = TABLE.parse(option, value, where=f"{option.name} of {table}")
        if mine:
            out[table] = mine
    return out


def restore_map(
    published: Iterable[tuple[int, Mapping[str, Any]]], version: int, tables: Sequence[str], record: str = "tables"
) -> dict[str, str]:
    """The value each table had while `version` was current, from the publisher's records under `record` (a
    table option's; `published`: (version, that version's `published.cassandra`) of every version): the `after`
    of the newest published version <= `version` that changed the table, else the `before` of the oldest later
    one that did (the value the table had before tailtune first changed it). Tables tailtune never changed are
    absent."""
    records = sorted(
        (v, rec[record])
        for v, rec in published
        if isinstance(rec, Mapping) and isinstance(rec.get(record), Mapping)
    )
    out: dict[str, str] = {}
    for table in tables:
        upto = [t[table]["after"] for v, t in records if v <= version and isinstance(t.get(table), Mapping)]
        later = [t[table]["before"] for v, t in records if v > version and isinstance(t.get(table), Mapping)]
        value = upto[-1] if upto else later[0] if later else None
        if isinstance(value, str):
            out[table] = value
    return out


def restore_options(
    config: Mapping[str, Any], published: Iterable[tuple[int, Mapping[str, Any]]], version: int,
    tables: Sequence[str],
) -> dict[str, dict[str, str]] | None:
    """The `target.table_options` of a rollback to `version` whose config is `config`: the config's own, plus,
    for each option `config` does not set itself, the value each table had while `version` was current
    (`restore_map`) on the tables it does not name. None: nothing to restore."""
    base = _base(config)
    records = list(published)
    known = dict(_explicit(config))
    restore: dict[str, dict[str, str]] = {}
    for option in TABLE.knobs():
        if option.name in base:
            continue
        for table, value in restore_map(records, version, tables, option.record).items():
            if table not in known:
                restore.setdefault(table, {})[option.name] = value
    return {**known, **restore} if restore else None


def merge_record(old: Mapping[str, Any] | None, new: Mapping[str, Any]) -> dict[str, Any]:
    """The record of a version published again: the new one, except that each table keeps the `before` of the
    first publish (a republish finds the table already changed; its `before` would hide the operator's value),
    and so does the latency snapshot taken before the first publish (`latency`: what the verify step compares
    with)."""
    out = dict(new)
    if isinstance(old, Mapping) and isinstance(old.get("latency"), Mapping):
        out["latency"] = old["latency"]
    for record in dict.fromkeys(option.record for option in TABLE.knobs()):
        old_tables = old.get(record) if isinstance(old, Mapping) else None
        new_tables = new.get(record)
        if isinstance(old_tables, Mapping) and isinstance(new_tables, Mapping):
            out[record] = {
                t: {**rec, "before": old_tables[t]["before"]}
                if isinstance(old_tables.get(t), Mapping) and "before" in old_tables[t]
                else rec
                for t, rec in new_tables.items()
            }
    return out
