"""One applier per kind of stock knob: how a row of `STOCK_KNOBS` (`simulation.stock_knobs`) goes from a
value someone wrote to kvsim's parameters, to the rendering an operator applies, to what the Cassandra publisher
writes and reads back. The knobs' names live in their rows only; an applier reads the rows of its kind.

- `TableOption` (`TABLE`; rows `cql`): kvsim's coordinator section; rendered as `ALTER TABLE ... WITH` (`cql`);
  published by `ALTER TABLE` on every table, read back from `system_schema.tables`.
- `SnitchSetting` (`SNITCH`; rows `jmx`): the snitch selectors' parameters; rendered as cassandra.yaml lines
  (`yaml`) and the live JMX operation (`jmx`); never published by tailtune, read from `system_views.settings`
  (the live replay alone sets it for its periods, and restores it: docs/replay.md § Alternating).
- `ClientSetting` (`CLIENT`; rows `driver`, `client-code`): kvsim's coordinator section; rendered as the Java
  driver's profile and the Python settings (`driver`) and notes; published inside the config's `target`, where
  the application's driver reads it.

**The contract** (`StockApplier`; `tests/simulator/test_stock_appliers.py` checks it for every row):

- every row has exactly one applier (`applier(knob)`), the one whose `applied` names the row's;
- `parse(knob, value, where)` returns the value checked against the row (`StockKnob.refusal`, and a `text`
  row's grammar) in its normal form, and raises a BadInputError naming the knob for anything else; the row's
  default parses;
- `kvsim(knob, value, replica)` is the kvsim parameters the parsed value sets — the coordinator section's, or
  the parameters of selector `replica` (a selector that takes none of them: {}) — always a subset of
  `kvsim_names(knob)`; a knob with `modelled=False` sets none;
- `render(params, ctx)` is the applier's part of `render_stock`: the sections it owns and its notes (unset
  knobs at their defaults); a knob's value changes its part;
- `read_back(knob)` names where a live node shows the value (`ReadBack`: `system_schema.tables` per table, or
  `system_views.settings` per node), None when only the application has it; `same(knob, shown, value)` says
  whether what a node shows is the parsed value (Cassandra normalises the text it stores), False for what does
  not parse — for the appliers whose knobs the publisher writes (`writes`).
"""

from __future__ import annotations

import contextlib
import math
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

from base.errors import BadInputError, InputProblem
from simulation.java_timer import JAVA_DEFAULT_TICK_MS, rendered_tick_ms
from simulation.stock_knobs import (
    DRIVERS,
    EXTRA_READS_ONLY,
    STOCK_KNOBS,
    Applied,
    StockKnob,
    driver_refusal,
)

__all__ = [
    "APPLIERS",
    "CLIENT",
    "IDEMPOTENCE_NOTE",
    "JAVA_PROFILE",
    "SNITCH",
    "SNITCH_NOTE",
    "TABLE",
    "ClientSetting",
    "ReadBack",
    "RenderContext",
    "Rendered",
    "SnitchSetting",
    "StockApplier",
    "TableOption",
    "applier",
]

#: The name of the Java driver execution profile the rendering defines.
JAVA_PROFILE = "tailtune"
IDEMPOTENCE_NOTE = (
    "drivers speculate only on statements marked idempotent, and both drivers default to non-idempotent: mark the "
    "multiget reads idempotent (Java: Statement.setIdempotent(true); Python: is_idempotent=True on the statement) "
    "or the speculative execution settings have no effect"
)
SNITCH_NOTE = (
    "dynamic snitch settings: not applied by tailtune; run the JMX operation on each node for a live change "
    "(not persisted; it replaces the snitch and resets its scores) and put the yaml lines in cassandra.yaml"
)
#: Where a rendering's problems are reported.
RENDER_WHERE = "render"


@dataclass(frozen=True)
class RenderContext:
    """What a rendering is for: the deployment's tables (`keyspace.table`), its driver, and its `endpoint_snitch`
    class when known."""

    tables: Sequence[str]
    driver: str
    endpoint_snitch: str | None = None


@dataclass
class Rendered:
    """An applier's part of a rendering: the sections it owns (`cql`, `yaml`, `jmx`, `driver`) and its notes."""

    sections: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class ReadBack:
    """Where a live node shows a knob: `source` (`system_schema.tables`: one row per table, the knob a column;
    `system_views.settings`: one row per setting, `name` = the knob) and the column or setting `name`."""

    source: str
    name: str


def _render_problem(name: str, problem: str) -> BadInputError:
    return BadInputError([InputProblem(RENDER_WHERE, None, name, problem)])


def _value(params: Mapping[str, Any], knob: StockKnob, driver: str) -> Any:
    return params.get(knob.name, knob.default_for(driver))


def _text(knob: StockKnob, raw: Any) -> Any:
    """A `text` knob's value as its grammar reads it in a rendering (whatever was given, as text)."""
    return str(raw) if knob.grammar is not None else raw


def _render_number(params: Mapping[str, Any], knob: StockKnob, driver: str) -> float:
    """A numeric knob of `params` (unset = its default) as the rendering writes it: at least its `valid_low`,
    whole for an `int` knob."""
    raw = _value(params, knob, driver)
    integer = knob.kind == "int"
    low = knob.valid_low if knob.valid_low is not None else -math.inf
    try:
        x = float(raw) if not isinstance(raw, bool) else math.nan
    except (TypeError, ValueError):
        x = math.nan
    if not math.isfinite(x) or x < low or (integer and x != int(x)):
        kind = "an integer" if integer else "a number"
        raise _render_problem(knob.name, f"must be {kind} >= {low:g}, got {raw!r}")
    return x


def _render_bool(params: Mapping[str, Any], knob: StockKnob, driver: str) -> bool:
    raw = _value(params, knob, driver)
    if raw in (0, 1, True, False, "0", "1", "true", "false"):
        return raw in (1, True, "1", "true")
    raise _render_problem(knob.name, f"must be 0/1 or true/false, got {raw!r}")


class StockApplier(ABC):
    """How the rows of one kind (`applied`) are parsed, simulated, rendered, published and read back. The
    contract is the module's docstring."""

    #: The `applied` values of the rows this applier handles.
    applied: ClassVar[tuple[Applied, ...]]
    #: Whether the Cassandra publisher writes its knobs live (and checks them with `same` after reading back).
    writes: ClassVar[bool] = False

    def knobs(self) -> tuple[StockKnob, ...]:
        """The rows of this applier, in the table's order."""
        return tuple(k for k in STOCK_KNOBS if k.applied in self.applied)

    def names(self) -> tuple[str, ...]:
        return tuple(k.name for k in self.knobs())

    def parse(self, knob: StockKnob, value: object, *, where: str) -> Any:
        """`value` checked against `knob`'s row, in its normal form (a number or a name)."""
        why = knob.refusal(value)
        if why is not None:
            raise BadInputError.single(where, f"{knob.name} {why}", field=knob.name)
        return value

    @abstractmethod
    def kvsim_names(self, knob: StockKnob) -> tuple[str, ...]:
        """The kvsim parameters `knob` may set (the coordinator section's, or the snitch selectors')."""

    @abstractmethod
    def kvsim(self, knob: StockKnob, value: Any, *, replica: str) -> dict[str, float]:
        """The kvsim parameters the parsed `value` sets, replicas read by selector `replica`."""

    @abstractmethod
    def render(self, params: Mapping[str, Any], ctx: RenderContext) -> Rendered:
        """This applier's knobs of `params` (unset = defaults) as the operator applies them."""

    def read_back(self, knob: StockKnob) -> ReadBack | None:
        """Where a live node shows `knob` (None: only the application has it)."""
        return None

    def same(self, knob: StockKnob, shown: object, value: Any) -> bool:
        """Whether `shown` (as a node shows it) is the parsed `value`."""
        try:
            return bool(self.parse(knob, shown, where="read back") == value)
        except BadInputError:
            return False


class TableOption(StockApplier):
    """A table option (`cql`): set live on every table of the deployment by `ALTER TABLE`, read back from
    `system_schema.tables`, compared as parsed forms. A `text` row parses with its `grammar`; kvsim takes its
    `to_core` (or `core`) parameters; the publisher records each table's value under the row's `record`."""

    applied = ("cql",)
    writes = True
    SOURCE = "system_schema.tables"

    def parse(self, knob: StockKnob, value: object, *, where: str) -> Any:
        if knob.grammar is None:
            return super().parse(knob, value, where=where)
        if not isinstance(value, str):
            raise BadInputError.single(where, f"{knob.name} must be text, got {value!r}", field=knob.name)
        return knob.grammar(value, where=where)

    def kvsim_names(self, knob: StockKnob) -> tuple[str, ...]:
        return tuple(self.kvsim(knob, self.parse(knob, knob.default, where="default"), replica=""))

    def kvsim(self, knob: StockKnob, value: Any, *, replica: str) -> dict[str, float]:
        if not knob.modelled:
            return {}
        if knob.to_core is not None:
            return knob.to_core(value)
        return {knob.core: float(value)} if knob.core else {}

    def text(self, knob: StockKnob, value: Any) -> str:
        """A parsed value as Cassandra prints it."""
        return str(value.render()) if knob.grammar is not None else str(value)

    def literal(self, knob: StockKnob, text: str) -> str:
        """`text` as a CQL literal of the option (a string literal doubles its quotes)."""
        if knob.kind in ("text", "choice"):
            return "'" + text.replace("'", "''") + "'"
        return text

    def alter(self, table: str, texts: Mapping[str, str]) -> str:
        """The `ALTER TABLE` that sets the options `texts` (name → text) of `table`."""
        rows = {k.name: k for k in self.knobs()}
        sets = " AND ".join(f"{name} = {self.literal(rows[name], text)}" for name, text in texts.items())
        return f"ALTER TABLE {table} WITH {sets}"

    def select(self, names: Sequence[str]) -> str:
        """The query of `names` of one table (arguments: keyspace, table)."""
        return f"SELECT {', '.join(names)} FROM {self.SOURCE} WHERE keyspace_name = %s AND table_name = %s"

    def read_back(self, knob: StockKnob) -> ReadBack | None:
        return ReadBack(self.SOURCE, knob.name)

    def read(self, knob: StockKnob, shown: object, *, where: str) -> Any:
        """What `system_schema.tables` shows (text; a number for a numeric option), parsed."""
        if knob.grammar is None and knob.kind in ("int", "float") and isinstance(shown, str):
            with contextlib.suppress(ValueError):
                shown = int(shown) if knob.kind == "int" else float(shown)
        return self.parse(knob, shown, where=where)

    def same(self, knob: StockKnob, shown: object, value: Any) -> bool:
        if shown is None:
            return False
        try:
            return bool(self.read(knob, shown, where="read back") == value)
        except BadInputError:
            return False

    def render(self, params: Mapping[str, Any], ctx: RenderContext) -> Rendered:
        values = {k.name: self.text(k, self.parse(k, _text(k, _value(params, k, ctx.driver)), where=RENDER_WHERE))
                  for k in self.knobs()}
        out = Rendered({"cql": [self.alter(t, values) + ";" for t in ctx.tables]})
        if not ctx.tables:
            out.notes.append(f"no tables: the deployment names none, so no {', '.join(values)} is applied")
        return out


class SnitchSetting(StockApplier):
    """A dynamic-snitch setting (`jmx`): the selector parameters of its row (`selector_params`), a line of
    cassandra.yaml and an argument of `StorageServiceMBean.updateSnitch` (`jmx_arg`); tailtune never publishes it,
    and reads it (with the snitch's class and switch, `NODE_SETTINGS`) from `system_views.settings`."""

    applied = ("jmx",)
    SOURCE = "system_views.settings"
    #: The selectors that take the snitch settings: Cassandra's DynamicEndpointSnitch (stock's default) and the
    #: papers' snitch.
    SELECTORS = ("dynamic-snitch", "ds")
    #: The settings read with the knobs: the class the dynamic snitch wraps, and whether it is on.
    NODE_SETTINGS = ("endpoint_snitch", "dynamic_snitch")
    #: A kvsim `stock` parameter the `dynamic-snitch` selector takes too: (its name there, the parameter).
    TIMEOUT = ("timeout_ms", "read_timeout_ms")

    def jmx_order(self) -> tuple[StockKnob, ...]:
        """The rows in the order of updateSnitch's arguments (and of the yaml lines)."""
        return tuple(sorted(self.knobs(), key=lambda k: k.jmx_arg))

    def settings(self) -> tuple[str, ...]:
        """Every setting read from `system_views.settings`."""
        return (*self.NODE_SETTINGS, *(k.name for k in self.jmx_order()))

    def kvsim_names(self, knob: StockKnob) -> tuple[str, ...]:
        return tuple(dict.fromkeys(param for _, param, _ in knob.selector_params))

    def kvsim(self, knob: StockKnob, value: Any, *, replica: str) -> dict[str, float]:
        if not knob.modelled:
            return {}
        return {param: float(value) / divisor for sel, param, divisor in knob.selector_params if sel == replica}

    def origins(self) -> dict[str, str]:
        """Selector parameter → the knob (or `stock` parameter) that sets it."""
        out = {param: k.name for k in self.knobs() for param in self.kvsim_names(k)}
        out[self.TIMEOUT[0]] = self.TIMEOUT[1]
        return out

    def read_back(self, knob: StockKnob) -> ReadBack | None:
        return ReadBack(self.SOURCE, knob.name)

    def render(self, params: Mapping[str, Any], ctx: RenderContext) -> Rendered:
        values = {k.name: _render_number(params, k, ctx.driver) for k in self.knobs()}

        def shown(k: StockKnob) -> str:
            x = values[k.name]
            return str(int(x)) if k.kind == "int" else repr(float(x))

        yaml = "# not applied by tailtune: cassandra.yaml on every node (read at start)\n" + "".join(
            f"{k.name}: {shown(k)}{k.unit}\n" for k in self.jmx_order()
        )
        snitch = ctx.endpoint_snitch or "<endpoint_snitch>"
        args = ", ".join(shown(k) for k in self.jmx_order())
        jmx = [f'org.apache.cassandra.db:type=StorageService updateSnitch("{snitch}", true, {args})']
        out = Rendered({"yaml": yaml, "jmx": jmx}, [SNITCH_NOTE])
        if ctx.endpoint_snitch is None:
            out.notes.append(
                "<endpoint_snitch> in the JMX operation is the cluster's endpoint_snitch class (cassandra.yaml, or "
                "SELECT value FROM system_views.settings WHERE name = 'endpoint_snitch'), not DynamicEndpointSnitch"
            )
        return out


class ClientSetting(StockApplier):
    """A setting of the application's side (`driver`: the driver's configuration, `setting` its key in the
    rendered settings; `client-code`: the application's query code): kvsim's `core` parameter (a choice by its
    index); rendered as the Java driver's execution profile and the Python settings `tailtune_client.cassandra`
    reads, and notes; published inside the config's `target`, where the application reads it."""

    applied = ("driver", "client-code")

    def kvsim_names(self, knob: StockKnob) -> tuple[str, ...]:
        return (knob.core,) if knob.core else ()

    def kvsim(self, knob: StockKnob, value: Any, *, replica: str) -> dict[str, float]:
        if not knob.modelled or not knob.core:
            return {}
        return {knob.core: float(knob.choices.index(value)) if knob.kind == "choice" else float(value)}

    def driver_settings(self, params: Mapping[str, Any], driver: str) -> dict[str, Any]:
        """The driver knobs of `params` that `driver` has (unset = its defaults) under their `setting` keys:
        counts whole, delays in ms, switches as booleans. A knob the driver lacks is refused with the reason."""
        if driver not in DRIVERS:
            raise _render_problem("driver", f"unknown driver {driver!r} (one of {', '.join(DRIVERS)})")
        for name in params:
            why = driver_refusal(name, driver)
            if why is not None:
                raise _render_problem(name, f"refused for driver {driver}: {why}")
        mine = [k for k in self.knobs() if k.applied == "driver" and driver in k.drivers]
        out: dict[str, Any] = {}
        for k in sorted(mine, key=lambda k: k.name in EXTRA_READS_ONLY):  # a knob acting only with another after it
            if k.kind == "bool":
                out[k.setting] = _render_bool(params, k, driver)
            else:
                x = _render_number(params, k, driver)
                out[k.setting] = int(x) if k.kind == "int" else x
        return out

    def render(self, params: Mapping[str, Any], ctx: RenderContext) -> Rendered:
        driver = ctx.driver
        settings = self.driver_settings(params, driver)
        other = "python" if driver == "java4" else "java4"
        shared = {k.name: params[k.name] for k in self.knobs() if k.name in params and other in k.drivers
                  and k.applied == "driver"}
        both = {driver: settings, other: self.driver_settings(shared, other)}
        java, notes = _java(both["java4"])
        out = Rendered({"driver": {"java": java, "python": _python(both["python"])}},
                       notes if driver == "java4" else [])
        out.notes.append(
            f"driver settings: tuned for the deployment's driver ({driver}); the {other} rendering carries the same "
            f"speculative execution and the {other} driver's defaults for its own knobs"
        )
        code = {k.name: k for k in self.knobs() if k.applied == "client-code"}
        if any(name in params for name in code):
            shape = _value(params, code["multiget.shape"], driver)
            chunk = _value(params, code["multiget.chunk"], driver)
            how = "one SELECT ... WHERE pk IN (...) per multiget" if shape == "in" else "one query per partition"
            size = f", {int(float(chunk))} keys per query" if float(chunk) > 0 else ""
            out.notes.append(f"multiget shape (application code): {how}{size}")
        return out


def _java(settings: Mapping[str, Any]) -> tuple[str, list[str]]:
    execs, delay = int(settings["max_executions"]), float(settings["delay_ms"])
    notes: list[str] = []
    lines = [
        "# Java driver 4: an execution profile for the multiget reads (application.conf).",
        "# Select it with statement.setExecutionProfileName(\"" + JAVA_PROFILE + "\").",
        "# The driver speculates only on idempotent statements; basic.request.default-idempotence is false.",
        "datastax-java-driver.profiles." + JAVA_PROFILE + " {",
    ]
    lines.append(
        "  basic.load-balancing-policy.slow-replica-avoidance = "
        + ("true" if settings["slow_replica_avoidance"] else "false")
    )
    if execs > 1:
        ms = int(delay)
        if ms != delay:
            notes.append(
                f"the Java driver 4 drops sub-millisecond precision: a delay of {delay:g} ms runs as {ms} ms"
            )
        lines += [
            "  advanced.speculative-execution-policy {",
            "    class = ConstantSpeculativeExecutionPolicy",
            f"    max-executions = {execs}",
            f"    delay = {ms} milliseconds",
            "  }",
        ]
    else:
        lines.append("  advanced.speculative-execution-policy.class = NoSpeculativeExecutionPolicy")
    lines += [
        "  # Only if every statement run with this profile is idempotent:",
        "  # basic.request.default-idempotence = true",
        "}",
    ]
    tick = rendered_tick_ms(execs, delay)
    if tick is not None:
        lines += [
            "# Global, not in a profile (the driver reads it only here, when the session starts): the timer fires each",
            f"# speculative execution on its first tick past the delay (default tick {JAVA_DEFAULT_TICK_MS} ms).",
            f"datastax-java-driver.advanced.netty.timer.tick-duration = {tick} milliseconds",
        ]
        notes.append(
            f"the Java driver 4 fires a speculative execution on its timer's first tick past the delay: "
            f"advanced.netty.timer.tick-duration = {tick} ms keeps the {int(delay)} ms hedge within {tick} ms of it "
            f"(on the default {JAVA_DEFAULT_TICK_MS} ms tick it would fire up to {JAVA_DEFAULT_TICK_MS} ms late); "
            "it is a global setting, set outside the profile, for the whole session (its request timeouts too), "
            "read when the session starts; on Windows the driver warns that ticks under 100 ms cost CPU"
        )
    return "\n".join(lines) + "\n", notes


def _python(settings: Mapping[str, Any]) -> dict[str, Any]:
    execs, delay = int(settings["max_executions"]), float(settings["delay_ms"])
    spec: dict[str, Any] | None = None
    if execs > 1:
        spec = {
            "policy": "ConstantSpeculativeExecutionPolicy",
            "delay": round(delay / 1000.0, 9),
            "max_attempts": execs - 1,
        }
    return {
        "load_balancing": {"policy": "TokenAwarePolicy", "shuffle_replicas": bool(settings["shuffle_replicas"])},
        "speculative_execution": spec,
        "idempotent_only": True,
        "default_idempotent": False,
    }


TABLE = TableOption()
SNITCH = SnitchSetting()
CLIENT = ClientSetting()
#: Every applier; each row of the table has exactly one.
APPLIERS: tuple[StockApplier, ...] = (TABLE, SNITCH, CLIENT)
_BY_APPLIED: dict[str, StockApplier] = {a: x for x in APPLIERS for a in x.applied}


def applier(knob: StockKnob) -> StockApplier:
    """The applier of `knob`'s kind."""
    return _BY_APPLIED[knob.applied]
