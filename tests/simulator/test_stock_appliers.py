"""The stock appliers' contract (`simulation.stock_appliers`), for every row of `STOCK_KNOBS`: parse →
kvsim parameters → rendering → what the publisher writes and reads back → the config check, each from the row
alone. A row added to the table is checked here without a line of this file changing."""

from __future__ import annotations

from typing import Any, get_args

import pytest

from base.errors import BadInputError
from kinds.cassandra.discovery import SETTINGS
from kinds.cassandra.publisher import SNITCH_SETTINGS
from kinds.cassandra.stock import desired_table_options
from simulation import resolve
from simulation.config_check import check_params
from simulation.stock_appliers import APPLIERS, SNITCH, TABLE, RenderContext, StockApplier, applier
from simulation.stock_knobs import EXTRA_READS_OFF, EXTRA_READS_ONLY, STOCK_KNOBS, Applied, StockKnob
from tuner.space import stock_space

KNOBS = [pytest.param(k, id=k.name) for k in STOCK_KNOBS]


def _driver(k: StockKnob) -> str:
    return k.drivers[0]


def _other(k: StockKnob, than: object) -> Any:
    """A valid value of `k` other than `than`: from its grid or choices, else the top of its search range."""
    for v in (*k.grid, *k.choices):
        if v != than:
            return v
    assert k.high is not None, k.name
    return int(k.high) if k.kind == "int" else float(k.high)


def _alternative(k: StockKnob) -> Any:
    return _other(k, k.default_for(_driver(k)))


def _context(k: StockKnob) -> dict[str, Any]:
    """The other knobs `k` needs set to act: those it exists with (`only_with`) and, for a knob acting only with
    extra reads on, the knobs that turn them on."""
    out: dict[str, Any] = dict(k.only_with)
    if k.name in EXTRA_READS_ONLY:
        rows = {r.name: r for r in STOCK_KNOBS}
        out |= {name: _other(rows[name], off) for name, off in EXTRA_READS_OFF.items()}
    return out


def test_every_row_has_exactly_one_applier() -> None:
    kinds = [a for x in APPLIERS for a in x.applied]
    assert sorted(kinds) == sorted(get_args(Applied))  # each kind of row, once
    for k in STOCK_KNOBS:
        assert [x for x in APPLIERS if k.applied in x.applied] == [applier(k)]
        assert k in applier(k).knobs()
    assert sorted(n for x in APPLIERS for n in x.names()) == sorted(k.name for k in STOCK_KNOBS)


@pytest.mark.parametrize("k", KNOBS)
def test_parse_takes_the_default_and_refuses_what_the_row_refuses(k: StockKnob) -> None:
    a = applier(k)
    a.parse(k, k.default_for(_driver(k)), where="test")
    a.parse(k, _alternative(k), where="test")
    with pytest.raises(BadInputError) as exc:
        a.parse(k, [], where="test")
    assert exc.value.problems[0].field == k.name


@pytest.mark.parametrize("k", KNOBS)
def test_kvsim_parameters_are_the_declared_ones(k: StockKnob) -> None:
    a = applier(k)
    value = a.parse(k, _alternative(k), where="test")
    selectors = SNITCH.SELECTORS if a is SNITCH else ("",)
    got = {name for replica in selectors for name in a.kvsim(k, value, replica=replica)}
    if not k.modelled:
        assert got == set()
        return
    assert got and got <= set(a.kvsim_names(k))
    # and a replay under `stock` receives them
    params = {"driver": _driver(k), **_context(k), k.name: _alternative(k)}
    resolved = resolve("stock", params, where="test")
    sent = resolved.replica_params if a is SNITCH else resolved.queue_params
    assert set(a.kvsim(k, value, replica=resolved.replica)) <= set(sent)


@pytest.mark.parametrize("k", KNOBS)
def test_the_value_changes_the_appliers_rendering(k: StockKnob) -> None:
    a: StockApplier = applier(k)
    ctx = RenderContext(["ks.t"], _driver(k))
    base = _context(k)
    before = a.render(base, ctx)
    after = a.render({**base, k.name: _alternative(k)}, ctx)
    assert (before.sections, before.notes) != (after.sections, after.notes)
    assert set(before.sections) == set(after.sections)


@pytest.mark.parametrize("k", KNOBS)
def test_publish_and_read_back(k: StockKnob) -> None:
    a = applier(k)
    back = a.read_back(k)
    if a is TABLE:
        assert back is not None and back.name == k.name
        value = TABLE.parse(k, _alternative(k), where="test")
        text = TABLE.text(k, value)
        assert TABLE.same(k, text, value) and not TABLE.same(k, None, value) and not TABLE.same(k, "\0", value)
        assert k.name in TABLE.alter("ks.t", {k.name: text}) and k.name in TABLE.select([k.name])
        assert k.record  # where the publisher records each table's before and after
        stock = desired_table_options({"policy": "stock", "params": {}}, ["ks.t"])
        assert stock["ks.t"][k.name] == TABLE.parse(k, k.default, where="test")
        given = desired_table_options({"policy": "fifo", "params": {k.name: _alternative(k)}}, ["ks.t"])
        assert given == {"ks.t": {k.name: value}}
    elif a is SNITCH:
        assert back is not None and k.name in SNITCH_SETTINGS and k.name in SETTINGS
    else:
        assert back is None  # the application's side: carried in the config's target
    assert a.writes == (a is TABLE)


@pytest.mark.parametrize("k", KNOBS)
def test_a_config_check_takes_the_value_and_the_search_offers_it(k: StockKnob) -> None:
    params = {**_context(k), k.name: _alternative(k)}
    if k.modelled:
        check_params("cassandra", "stock", params, driver=_driver(k), config=True)
        names = {p.name for p in stock_space(_driver(k)).policies[0].params}
        assert k.name in names
    with pytest.raises(BadInputError) as exc:
        check_params("cassandra", "stock", {**params, k.name: []}, driver=_driver(k), config=True)
    assert exc.value.problems[0].field == f"config.params.{k.name}"


def test_the_rows_say_what_their_appliers_need() -> None:
    records = [k.record for k in TABLE.knobs()]
    assert all(records) and len(set(records)) == len(records)
    assert sorted(k.jmx_arg for k in SNITCH.knobs()) == list(range(len(SNITCH.knobs())))
    for k in STOCK_KNOBS:
        if k.applied == "driver":
            assert k.setting
