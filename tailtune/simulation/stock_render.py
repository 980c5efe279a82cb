"""A stock recommendation as what a deployment runs: `render_stock(params, tables=…, driver=…)` →
`{"cql": [...], "yaml": str, "jmx": [...], "driver": {"java": str, "python": {...}}, "notes": [...]}`.

- `cql`: one `ALTER TABLE <ks.t> WITH speculative_retry = '<normalised text>';` per table (applied live by the
  Cassandra publisher, read back from `system_schema.tables`).
- `yaml`: the cassandra.yaml lines of the dynamic-snitch settings (Cassandra 5.0 spelling: durations with their
  unit), persisted on restart.
- `jmx`: the live operation `StorageServiceMBean.updateSnitch(String epSnitchClassName, Boolean dynamic, Integer
  dynamicUpdateInterval, Integer dynamicResetInterval, Double dynamicBadnessThreshold)`: not persisted, and it
  builds a new snitch — `epSnitchClassName` is the cluster's own `endpoint_snitch` (the class the dynamic snitch
  wraps, not `DynamicEndpointSnitch`), which the renderer cannot know: `<endpoint_snitch>` stands for it unless
  `endpoint_snitch=` is given.
- `driver.java`: a Java driver 4 `application.conf` execution profile `tailtune` (HOCON text; keys as in the
  driver's `reference.conf`); `driver.python`: the settings `tailtune_client.cassandra` turns into a
  cassandra-driver `ExecutionProfile`. Both are rendered: the deployment's driver with every driver knob of
  `params` (a knob it lacks is refused), the other with the same speculative execution (the knobs both drivers
  have) and its own defaults for its own knobs.
- `notes`: what the operator must know (idempotence, what tailtune does not apply, rounding).

Knob names, defaults and which driver has which knob: `tailtune.simulation.stock_knobs`. A knob the driver
lacks is refused with the reason (BadInputError). Exact texts: tests/simulator/test_stock_render.py; the choices:
docs/applying-stock.md.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from tailtune.base.errors import BadInputError, InputProblem
from tailtune.simulation.stock import parse_speculative_retry
from tailtune.simulation.stock_knobs import DRIVERS, STOCK_KNOBS, driver_refusal

__all__ = [
    "IDEMPOTENCE_NOTE",
    "JAVA_PROFILE",
    "SNITCH_NOTE",
    "render_stock",
    "stock_driver_settings",
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
_WHERE = "render"
_DEFAULTS = {k.name: k for k in STOCK_KNOBS}


def _bad(field: str, problem: str) -> BadInputError:
    return BadInputError([InputProblem(_WHERE, None, field, problem)])


def _value(params: Mapping[str, Any], name: str, driver: str) -> Any:
    k = _DEFAULTS[name]
    return params.get(name, k.default_for(driver))


def _number(params: Mapping[str, Any], name: str, driver: str, *, low: float, integer: bool) -> float:
    raw = _value(params, name, driver)
    try:
        x = float(raw) if not isinstance(raw, bool) else math.nan
    except (TypeError, ValueError):
        x = math.nan
    if not math.isfinite(x) or x < low or (integer and x != int(x)):
        kind = "an integer" if integer else "a number"
        raise _bad(name, f"must be {kind} >= {low:g}, got {raw!r}")
    return x


def _bool(params: Mapping[str, Any], name: str, driver: str) -> bool:
    raw = _value(params, name, driver)
    if raw in (0, 1, True, False, "0", "1", "true", "false"):
        return raw in (1, True, "1", "true")
    raise _bad(name, f"must be 0/1 or true/false, got {raw!r}")


def _check_driver(params: Mapping[str, Any], driver: str) -> None:
    if driver not in DRIVERS:
        raise _bad("driver", f"unknown driver {driver!r} (one of {', '.join(DRIVERS)})")
    for name in params:
        why = driver_refusal(name, driver)
        if why is not None:
            raise _bad(name, f"refused for driver {driver}: {why}")


def stock_driver_settings(params: Mapping[str, Any], driver: str) -> dict[str, Any]:
    """The driver knobs of `params` (unset = the driver's defaults) as numbers: `max_executions` (counting the
    first, Java's meaning), `delay_ms`, and `slow_replica_avoidance` (java4) or `shuffle_replicas` (python)."""
    _check_driver(params, driver)
    execs = int(_number(params, "driver.speculative_execution.max_executions", driver, low=1, integer=True))
    delay = _number(params, "driver.speculative_execution.delay", driver, low=0, integer=False)
    out: dict[str, Any] = {"max_executions": execs, "delay_ms": delay}
    if driver == "java4":
        out["slow_replica_avoidance"] = _bool(params, "driver.slow_replica_avoidance", driver)
    else:
        out["shuffle_replicas"] = _bool(params, "driver.shuffle_replicas", driver)
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


def render_stock(
    params: Mapping[str, Any],
    *,
    tables: Sequence[str],
    driver: str = "java4",
    endpoint_snitch: str | None = None,
) -> dict[str, Any]:
    """The stock knobs in `params` (unset = Cassandra's and the driver's defaults) rendered for `tables` and
    `driver`. Raises BadInputError for a bad value or a knob the driver lacks (with the reason)."""
    settings = stock_driver_settings(params, driver)
    spec = parse_speculative_retry(str(_value(params, "speculative_retry", driver)), where=_WHERE).render()
    cql = [f"ALTER TABLE {t} WITH speculative_retry = '{spec}';" for t in tables]
    badness = _number(params, "dynamic_snitch_badness_threshold", driver, low=0, integer=False)
    update = int(_number(params, "dynamic_snitch_update_interval", driver, low=1, integer=True))
    reset = int(_number(params, "dynamic_snitch_reset_interval", driver, low=1, integer=True))
    yaml = (
        "# not applied by tailtune: cassandra.yaml on every node (read at start)\n"
        f"dynamic_snitch_update_interval: {update}ms\n"
        f"dynamic_snitch_reset_interval: {reset}ms\n"
        f"dynamic_snitch_badness_threshold: {float(badness)!r}\n"
    )
    snitch = endpoint_snitch or "<endpoint_snitch>"
    jmx = [
        "org.apache.cassandra.db:type=StorageService updateSnitch("
        f'"{snitch}", true, {update}, {reset}, {float(badness)!r})'
    ]
    notes = [IDEMPOTENCE_NOTE, SNITCH_NOTE]
    if endpoint_snitch is None:
        notes.append(
            "<endpoint_snitch> in the JMX operation is the cluster's endpoint_snitch class (cassandra.yaml, or "
            "SELECT value FROM system_views.settings WHERE name = 'endpoint_snitch'), not DynamicEndpointSnitch"
        )
    if not tables:
        notes.append("no tables: the deployment names none, so no speculative_retry is applied")
    other = "python" if driver == "java4" else "java4"
    shared = {k: v for k, v in params.items() if k.startswith("driver.speculative_execution.")}
    both = {driver: settings, other: stock_driver_settings(shared, other)}
    java, more = _java(both["java4"])
    if driver == "java4":
        notes += more
    python = _python(both["python"])
    notes.append(
        f"driver settings: tuned for the deployment's driver ({driver}); the {other} rendering carries the same "
        f"speculative execution and the {other} driver's defaults for its own knobs"
    )
    shape = _value(params, "multiget.shape", driver)
    chunk = _value(params, "multiget.chunk", driver)
    if "multiget.shape" in params or "multiget.chunk" in params:
        how = "one SELECT ... WHERE pk IN (...) per multiget" if shape == "in" else "one query per partition"
        size = f", {int(float(chunk))} keys per query" if float(chunk) > 0 else ""
        notes.append(f"multiget shape (application code): {how}{size}")
    return {"cql": cql, "yaml": yaml, "jmx": jmx, "driver": {"java": java, "python": python}, "notes": notes}
