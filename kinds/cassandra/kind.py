"""Cassandra's operations (`control.kind.DeploymentKind`): a cluster reached over CQL at its contact points, whose
nodes run stock Cassandra or a Rein-patched server, read by applications through a driver, with the tables a stock
config's table options are applied to (`server`, `driver`, `tables`: the body fields only this kind has)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any, ClassVar

from base.errors import BadInputError, TailtuneError
from base.settings import Settings
from control.db import DeploymentRow
from control.errors import Invalid
from control.kind import Calibrated, DeploymentKind, Discovered, Endpoint, Log, ModelInputs, Target
from control.redact import public
from kinds.cassandra import model
from kinds.cassandra.calibration import CapacityOptions, calibrate_cassandra
from kinds.cassandra.discovery import discover_cassandra
from kinds.cassandra.publisher import CassandraPublisher
from kinds.cassandra.replay.live import CassandraReplay
from kinds.cassandra.stock import TABLE_OPTIONS, merge_record, restore_options

__all__ = ["Cassandra"]


class Cassandra(DeploymentKind):
    name = "cassandra"
    references = True
    body_fields: ClassVar[frozenset[str]] = frozenset({"server", "driver", "tables"})
    model_inputs = model.INPUTS
    client_captures = True

    # --- the body -------------------------------------------------------------------------------------------
    def check_connection(self, connection: Mapping[str, Any]) -> None:
        if not connection.get("contact_points"):
            raise Invalid("a cassandra deployment needs at least one contact point", field="connection.contact_points")

    def endpoints(self, connection: Mapping[str, Any]) -> list[Endpoint]:
        port = int(connection.get("port", 9042))
        return [Endpoint(f"connection.contact_points[{i}]", str(host), port, str(host))
                for i, host in enumerate(connection.get("contact_points") or [])]

    # --- the live system ------------------------------------------------------------------------------------
    def discover(self, target: Target, settings: Settings, *, profile_servers: bool = False,
                 log: Log = lambda _: None) -> Discovered:
        return discover_cassandra(target.connection, target.tables, egress=target.egress,
                                  timeout_s=settings.discover_timeout_s, probe_reads=settings.discover_probe_reads,
                                  server=target.server, log=log)

    def calibrate(self, target: Target, settings: Settings, *, log: Log = lambda _: None) -> Calibrated:
        capacity = CapacityOptions(tuple(settings.calibrate_capacity_rates), settings.calibrate_capacity_interval_s,
                                   settings.calibrate_capacity_intervals, settings.calibrate_capacity_warmup_s)
        return calibrate_cassandra(target.connection, target.tables, driver=target.driver, egress=target.egress,
                                   timeout_s=settings.discover_timeout_s, reads=settings.calibrate_reads,
                                   warmup=settings.calibrate_warmup, keys=settings.calibrate_keys,
                                   capacity=capacity, log=log)

    # --- the model ------------------------------------------------------------------------------------------
    def model_options(self, inputs: ModelInputs, connection: Mapping[str, Any], *, timestamps: bool,
                      load: float | None) -> dict[str, Any]:
        return model.model_options(inputs, timestamps, load)

    def shown_topology(self, options: Mapping[str, Any], sources: Mapping[str, str]
                       ) -> tuple[dict[str, Any], dict[str, str]]:
        return model.shown_topology(options, sources)

    # --- config versions ------------------------------------------------------------------------------------
    def applies_to(self, row: DeploymentRow) -> dict[str, Any] | None:
        """Its server, driver and tables."""
        return {"server": row.server or "stock", "driver": row.driver or "java4", "tables": list(row.tables or [])}

    def rendered(self, config: dict[str, Any], row: DeploymentRow) -> dict[str, Any]:
        """A config that sets stock knobs without the tuner's rendering gets it in `target` (the CQL, the yaml and
        JMX lines, the driver's profile and settings, the notes: `simulation.stock_render.render_stock`), so what
        is published carries what the driver side needs. Configs that have it, and others, are unchanged."""
        from simulation.stock_knobs import knob
        from simulation.stock_render import render_stock

        params = config.get("params") or {}
        stockish = config.get("policy") == "stock" or any(knob(k) is not None for k in params)
        target = config.get("target") or {}
        if not stockish or "driver" in target:
            return config
        try:
            rendered = render_stock(params, tables=list(row.tables or []), driver=row.driver or "java4")
        except BadInputError as exc:
            p = exc.problems[0]
            raise Invalid(p.problem, field=f"config.params.{p.field}" if p.field else "config.params") from None
        return {**config, "target": {**rendered, **target}}

    def rollback_config(self, config: dict[str, Any], version: int, row: DeploymentRow,
                        published: Callable[[], Iterable[tuple[int, Mapping[str, Any]]]]) -> dict[str, Any]:
        """For each table option (`speculative_retry`) `config` does not set itself, the value each of the
        deployment's tables had while `version` was current (from what the publisher recorded: the `after` of the
        newest published version up to it, else the `before` of the first later one that changed the table), in
        `target.table_options` (`kinds.cassandra.stock.restore_options`)."""
        if not row.tables:
            return config
        options = restore_options(config, published(), version, list(row.tables))
        if options is None:
            return config
        return {**config, "target": {**(config.get("target") or {}), TABLE_OPTIONS: options}}

    def published_record(self, old: Mapping[str, Any] | None, new: Mapping[str, Any]) -> dict[str, Any]:
        """Each table keeps the `before` of the first publish, and so does the latency snapshot taken before it
        (`kinds.cassandra.stock.merge_record`)."""
        return merge_record(old, new)

    # --- publish and verify ---------------------------------------------------------------------------------
    def publisher(self, target: Target, settings: Settings) -> CassandraPublisher:
        return CassandraPublisher(target.name, dict(target.connection), settings.publish_timeout_s,
                                  tables=target.tables, driver=target.driver, server=target.server,
                                  egress=target.egress)

    def replay_driver(self, target: Target) -> CassandraReplay:  # a control.replay_trace.ReplayDriver
        """Twin scratch tables per config, read by the deployment's driver's generator
        (`kinds.cassandra.replay.live`)."""
        return CassandraReplay(target)

    def server_figures(self, target: Target, settings: Settings, *, log: Log = lambda _: None
                       ) -> dict[str, Any] | None:
        """A stock server's coordinator read latency per node and table now (`CassandraPublisher.read_latency`),
        for a deployment with tables; None otherwise."""
        if target.server != "stock" or not target.tables:
            return None
        try:
            return self.publisher(target, settings).read_latency()
        except TailtuneError as exc:
            log(f"verify: the coordinator latency could not be read: {exc}")
            return {"error": public(str(exc), settings)}
