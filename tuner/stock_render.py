"""A stock recommendation as what a deployment runs: `render_stock(params, tables=…, driver=…)` →
`{"cql": [...], "yaml": str, "jmx": [...], "driver": {"java": str, "python": {...}}, "notes": [...]}`.

- `cql`: one `ALTER TABLE <ks.t> WITH speculative_retry = '<normalised text>'` per table (live).
- `yaml`: the cassandra.yaml lines of the dynamic-snitch settings (persisted on restart).
- `jmx`: the live operation (`StorageServiceMBean.updateSnitch`), not persisted, resets the scores.
- `driver.java`: a Java driver 4 `application.conf` execution profile (HOCON text); `driver.python`: the settings
  `tailtune_client.cassandra` turns into an `ExecutionProfile`.

Knob names and defaults: `tailtune.simulation.stock_knobs`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from tailtune.simulation.stock import parse_speculative_retry
from tailtune.simulation.stock_knobs import STOCK_KNOBS

__all__ = ["render_stock"]


def _value(params: Mapping[str, Any], name: str, driver: str) -> Any:
    for k in STOCK_KNOBS:
        if k.name == name:
            return params.get(name, k.default_for(driver))
    return params.get(name)


def render_stock(params: Mapping[str, Any], *, tables: Sequence[str], driver: str = "java4") -> dict[str, Any]:
    """The stock knobs in `params` (unset = defaults) rendered for `tables` and `driver`."""
    spec = parse_speculative_retry(str(_value(params, "speculative_retry", driver))).render()
    cql = [f"ALTER TABLE {t} WITH speculative_retry = '{spec}';" for t in tables]
    badness = float(_value(params, "dynamic_snitch_badness_threshold", driver))
    update = int(float(_value(params, "dynamic_snitch_update_interval", driver)))
    reset = int(float(_value(params, "dynamic_snitch_reset_interval", driver)))
    yaml = (
        f"dynamic_snitch_badness_threshold: {badness:g}\n"
        f"dynamic_snitch_update_interval: {update}ms\n"
        f"dynamic_snitch_reset_interval: {reset}ms\n"
    )
    jmx = [
        "org.apache.cassandra.db:type=StorageService updateSnitch("
        f'"org.apache.cassandra.locator.DynamicEndpointSnitch", true, {update}, {reset}, {badness:g})'
    ]
    delay = float(_value(params, "driver.speculative_execution.delay", driver))
    execs = int(float(_value(params, "driver.speculative_execution.max_executions", driver)))
    java = "datastax-java-driver.profiles.tailtune {\n"
    if execs > 1:
        java += (
            "  advanced.speculative-execution-policy {\n"
            "    class = ConstantSpeculativeExecutionPolicy\n"
            f"    max-executions = {execs}\n"
            f"    delay = {delay:g} milliseconds\n"
            "  }\n"
        )
    java += "}\n"
    python = {
        "speculative_execution": {"delay_s": delay / 1000.0, "max_attempts": max(execs - 1, 0)} if execs > 1 else None,
    }
    notes = [
        "drivers speculate only on statements marked idempotent; both drivers default to non-idempotent",
        "snitch settings: not applied by tailtune (run the JMX operation live, put the yaml lines in cassandra.yaml)",
    ]
    return {"cql": cql, "yaml": yaml, "jmx": jmx, "driver": {"java": java, "python": python}, "notes": notes}
