"""memcached's operations (`control.kind.DeploymentKind`): a pool of servers (`connection.servers`, `host:port`)
that applications shard their keys over with tailtune-client's hash; the config is replicated to every server.
Its live system can be captured (`watch fetchers mutations`) as a `memcached-watch` trace."""

from __future__ import annotations

import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from base.errors import BadInputError
from base.settings import Settings
from control.egress import EgressRefused, EgressUnresolved, parse_server
from control.errors import Invalid
from control.kind import (
    Calibrated,
    Captured,
    CaptureFailed,
    DeploymentKind,
    Discovered,
    Endpoint,
    Log,
    ModelInputs,
    Target,
)
from kinds.memcached import model
from kinds.memcached.calibration import calibrate_memcached
from kinds.memcached.capture import CaptureTarget, capture_memcached, stats_caps
from kinds.memcached.discovery import discover_memcached
from kinds.memcached.publisher import MemcachedPublisher
from kinds.memcached.replay.live import MemcachedReplay

__all__ = ["FORMAT", "Memcached"]

#: The trace format of a capture (`ingest.formats`).
FORMAT = "memcached-watch"
#: What the nightly job keeps of what a capture saw.
_KEPT = ("servers", "seconds", "stopped", "lines", "fetches", "requests", "skipped", "dropped", "lost", "complete",
         "closed", "gap_us")


class Memcached(DeploymentKind):
    name = "memcached"
    references = True
    model_inputs = model.INPUTS
    captures = True
    capture_source = "watch"
    client_captures = True

    # --- the body -------------------------------------------------------------------------------------------
    def check_connection(self, connection: Mapping[str, Any]) -> None:
        if not connection.get("servers"):
            raise Invalid("a memcached deployment needs at least one host:port", field="connection.servers")

    def check_body(self, fields: Mapping[str, Any], *, creating: bool) -> None:
        """No tables, and the default server kind and driver (a Cassandra deployment's fields)."""
        if fields.get("tables"):
            raise Invalid("only a cassandra deployment has tables", field="tables")
        defaults = (("server", "stock"), ("driver", "java4"))
        if creating:
            if any(fields.get(key, default) != default for key, default in defaults):
                raise Invalid("only a cassandra deployment has a server kind and a driver", field="server, driver")
            return
        for key, default in defaults:
            if fields.get(key, default) != default:
                raise Invalid("only a cassandra deployment has a server kind and a driver", field=key)

    def endpoints(self, connection: Mapping[str, Any]) -> list[Endpoint]:
        out = []
        for i, server in enumerate(connection.get("servers") or []):
            host, _, port = str(server).rpartition(":")
            out.append(Endpoint(f"connection.servers[{i}]", host.strip("[]"), int(port), host))
        return out

    # --- the live system ------------------------------------------------------------------------------------
    def discover(self, target: Target, settings: Settings, *, profile_servers: bool = False,
                 log: Log = lambda _: None) -> Discovered:
        return discover_memcached(target.connection, egress=target.egress, timeout_s=settings.discover_timeout_s,
                                  profile_servers=profile_servers, profile_reps=settings.discover_profile_reps,
                                  caps=stats_caps(settings), log=log)

    def calibrate(self, target: Target, settings: Settings, *, log: Log = lambda _: None) -> Calibrated:
        return calibrate_memcached(target.connection, egress=target.egress, timeout_s=settings.discover_timeout_s,
                                   reps=settings.discover_profile_reps, caps=stats_caps(settings), log=log)

    def capture(self, target: Target, out: Path, *, duration_s: float, stop: threading.Event, settings: Settings,
                log: Log = lambda _: None) -> Captured:
        """Watch every server of `connection.servers` into one memcached-watch file (`capture_memcached`),
        connecting only to addresses `target.egress` allows (each name resolved once, here)."""
        servers = [str(x) for x in target.connection.get("servers", [])]
        if not servers:
            raise CaptureFailed("the deployment has no connection.servers to capture", permanent=True)
        targets = []
        for server in servers:
            try:
                host, port = parse_server(server)
                address = target.egress.resolve(host, port)[0]
            except EgressUnresolved as exc:  # it may resolve later: worth another try
                raise CaptureFailed(f"memcached {server}: {exc}", permanent=False) from None
            except EgressRefused as exc:
                raise CaptureFailed(f"memcached {server}: {exc}", permanent=True) from None
            except BadInputError:  # a server the API would not have accepted (written straight into the DB)
                raise CaptureFailed(f"connection.servers: expected HOST:PORT, got {server!r}", permanent=True) from None
            targets.append(CaptureTarget(server, address, port))
        log(f"capture: watching {', '.join(servers)} for {duration_s:g} s")
        result = capture_memcached(
            targets,
            out,
            duration_s=duration_s,
            stop=stop,
            timeout_s=settings.capture_timeout_s,
            max_bytes=settings.capture_max_bytes,
            max_line=settings.capture_max_line_bytes,
            stats_caps=stats_caps(settings),
            gap_us=settings.memcached_watch_gap_us,
        )
        report = [f"capture: {result.seconds:g} s ({result.stopped}), {result.lines:,} watch lines, "
                  f"{result.fetches:,} fetches, {result.requests:,} requests, {result.lost:,} lines lost"]
        if result.lost:
            report.append(f"warning: the watch lost {result.lost:,} line(s) (memcached skipped {result.skipped:,}, "
                          f"its worker threads dropped {result.dropped:,}): the trace misses their fetches")
        report += [f"warning: {server} closed the watch before the end of the capture" for server in result.closed]
        nothing = (f"no get/gets reached {', '.join(servers)} in {result.seconds:g} s: nothing to tune on"
                   if result.fetches == 0 else None)
        seen = result.as_dict()
        return Captured(FORMAT, result.bytes, {k: seen[k] for k in _KEPT}, tuple(report), nothing)

    def reshapes(self, config: Mapping[str, Any] | None) -> str | None:
        """Chisel: a request of more than `elephant_threshold` keys reaches each server as chunks of
        `split_keys`, and with `merge` > 1 mice share one multiget — the watch sees the chunks and the merged
        queries, not the application's requests. Batching sends each server its part of a request whole: the
        watch groups it back (None)."""
        if not isinstance(config, Mapping):
            return None
        target = config.get("target")
        rendered = target.get("json") if isinstance(target, Mapping) else None
        block = rendered.get("memcached_client") if isinstance(rendered, Mapping) else None
        block = block if isinstance(block, Mapping) else {}
        if (config.get("policy") or block.get("mode")) != "chisel":
            return None
        params = config.get("params")
        p = params if isinstance(params, Mapping) and params else block
        split, merge, threshold = p.get("split_keys"), p.get("merge"), p.get("elephant_threshold")
        return (f"Chisel (elephant_threshold {threshold}, split_keys {split}, merge {merge}) splits the large "
                "requests and merges the small ones before memcached sees them")

    # --- the model ------------------------------------------------------------------------------------------
    def model_options(self, inputs: ModelInputs, connection: Mapping[str, Any], *, timestamps: bool,
                      load: float | None) -> dict[str, Any]:
        return model.model_options(inputs, connection, timestamps)

    def shown_topology(self, options: Mapping[str, Any], sources: Mapping[str, str]
                       ) -> tuple[dict[str, Any], dict[str, str]]:
        return model.shown_topology(options, sources)

    # --- publish --------------------------------------------------------------------------------------------
    def publisher(self, target: Target, settings: Settings) -> MemcachedPublisher:
        return MemcachedPublisher(
            target.name,
            dict(target.connection),
            settings.publish_timeout_s,
            item_max_bytes=settings.memcached_item_max_bytes,
            stale_versions_max=settings.memcached_stale_versions_max,
            config_key_env=settings.memcached_config_key_env,
            egress=target.egress,
        )

    # --- replay ---------------------------------------------------------------------------------------------
    def replay_driver(self, target: Target) -> MemcachedReplay:
        """Scratch keys read through tailtune-client, one client per config (`kinds.memcached.replay.live`)."""
        return MemcachedReplay(target)
