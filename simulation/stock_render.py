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

Knob names, defaults and which driver has which knob: `simulation.stock_knobs`; each part is rendered
by the knobs' applier (`simulation.stock_appliers`: `cql` by the table options', `yaml` and `jmx` by the
snitch settings', `driver` by the client settings'), and the notes follow in that order after the idempotence
note. A knob the driver lacks is refused with the reason (BadInputError). Exact texts:
tests/simulator/test_stock_render.py; the choices: docs/applying-stock.md.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from simulation.stock_appliers import (
    CLIENT,
    IDEMPOTENCE_NOTE,
    JAVA_PROFILE,
    SNITCH,
    SNITCH_NOTE,
    TABLE,
    RenderContext,
)

__all__ = [
    "IDEMPOTENCE_NOTE",
    "JAVA_PROFILE",
    "SNITCH_NOTE",
    "render_stock",
    "stock_driver_settings",
]

#: The sections of a rendering, in order.
SECTIONS = ("cql", "yaml", "jmx", "driver")


def stock_driver_settings(params: Mapping[str, Any], driver: str) -> dict[str, Any]:
    """The driver knobs of `params` (unset = the driver's defaults) as numbers: `max_executions` (counting the
    first, Java's meaning), `delay_ms`, and `slow_replica_avoidance` (java4) or `shuffle_replicas` (python)."""
    return CLIENT.driver_settings(params, driver)


def render_stock(
    params: Mapping[str, Any],
    *,
    tables: Sequence[str],
    driver: str = "java4",
    endpoint_snitch: str | None = None,
) -> dict[str, Any]:
    """The stock knobs in `params` (unset = Cassandra's and the driver's defaults) rendered for `tables` and
    `driver`. Raises BadInputError for a bad value or a knob the driver lacks (with the reason)."""
    ctx = RenderContext(tables, driver, endpoint_snitch)
    client = CLIENT.render(params, ctx)  # first: a knob the driver lacks is the first problem named
    table, snitch = TABLE.render(params, ctx), SNITCH.render(params, ctx)
    parts = [table, snitch, client]
    sections = {k: v for part in parts for k, v in part.sections.items()}
    notes = [IDEMPOTENCE_NOTE, *snitch.notes, *table.notes, *client.notes]
    return {**{k: sections[k] for k in SECTIONS}, "notes": notes}
