"""`tailtune simulate`: replay a dataset, trace file or generated profile under one scheduling policy."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

__all__ = ["register"]


def register(app: typer.Typer) -> None:
    @app.command("simulate")
    def simulate(
        policy: Annotated[
            str,
            typer.Option(
                "--policy",
                help="Cassandra: fifo, rein, rein-sbf, rein-sds, brb-equalmax, brb-unifincr, oracle, "
                "tailx, c3, ds, heron (= fifo + that --replica); memcached: batching, chisel.",
            ),
        ],
        dataset: Annotated[str | None, typer.Option("--dataset", help="Dataset id or name.")] = None,
        trace: Annotated[
            Path | None, typer.Option("--trace", help="Canonical trace (Parquet or CSV).")
        ] = None,
        profile: Annotated[str | None, typer.Option("--profile", help="Generator profile.")] = None,
        requests: Annotated[int | None, typer.Option("--requests", help="Requests to generate.")] = None,
        param: Annotated[
            list[str] | None, typer.Option("--param", help="Policy parameter NAME=VALUE.")
        ] = None,
        servers: Annotated[
            int | None, typer.Option("--servers", help="Default 128 (Cassandra) or 2 (memcached).")
        ] = None,
        slots: Annotated[int, typer.Option("--slots")] = 8,
        replication: Annotated[int, typer.Option("--replication")] = 3,
        vnodes: Annotated[int, typer.Option("--vnodes", help="Tokens per server (≤1: evenly spaced).")] = 1,
        service_rate: Annotated[float, typer.Option("--service-rate", help="ops/s per slot.")] = 3750.0,
        net_latency_us: Annotated[float, typer.Option("--net-latency-us")] = 50.0,
        clients: Annotated[int, typer.Option("--clients")] = 128,
        load: Annotated[float, typer.Option("--load", help="Fraction of total service capacity.")] = 0.75,
        seed: Annotated[int, typer.Option("--seed")] = 0,
        warmup: Annotated[float, typer.Option("--warmup", help="Fraction of first requests dropped.")] = 0.1,
        use_timestamps: Annotated[
            bool,
            typer.Option("--use-timestamps", help="Trace timestamps scaled to --load instead of Poisson."),
        ] = False,
        worker_threads: Annotated[
            int, typer.Option("--worker-threads", help="memcached: worker threads per server.")
        ] = 4,
        query_threads: Annotated[
            int | None, typer.Option("--query-threads", help="memcached: client query threads (default: rule).")
        ] = None,
        client_overhead_us: Annotated[
            float, typer.Option("--client-overhead-us", help="memcached: client overhead per query.")
        ] = 0.0,
        inter_arrival_us: Annotated[
            float | None,
            typer.Option("--inter-arrival-us", help="memcached: Poisson arrivals with this mean gap."),
        ] = None,
        replica: Annotated[
            str | None,
            typer.Option(
                "--replica",
                help="Replica selection: round-robin (default), random, least-outstanding, ds, c3, heron.",
            ),
        ] = None,
        replica_param: Annotated[
            list[str] | None, typer.Option("--replica-param", help="Replica selection parameter NAME=VALUE.")
        ] = None,
        sizes: Annotated[
            bool, typer.Option("--sizes/--no-sizes", help="Demand from value_size when present (issue 4 model).")
        ] = True,
        demand_dist: Annotated[
            str, typer.Option("--demand-dist", help="exponential (default), deterministic, lognormal.")
        ] = "exponential",
        demand_sigma: Annotated[float, typer.Option("--demand-sigma", help="lognormal shape σ.")] = 1.0,
        t0_us: Annotated[
            float | None, typer.Option("--t0-us", help="Per-op fixed demand (default: 512 KiB = 32× 1 KiB).")
        ] = None,
        bandwidth_mbps: Annotated[
            float | None, typer.Option("--bandwidth-mbps", help="Bytes/µs served per slot (MB/s).")
        ] = None,
        thr_l_bytes: Annotated[
            float | None, typer.Option("--thr-l-bytes", help="Large-value threshold (default: derived).")
        ] = None,
        server_speeds: Annotated[
            str | None,
            typer.Option("--server-speeds", help="Speed factor per server, comma-separated (service = demand/speed)."),
        ] = None,
        slow_servers: Annotated[
            int | None, typer.Option("--slow-servers", help="N servers --slow-factor times slower, spread evenly.")
        ] = None,
        slow_factor: Annotated[
            float, typer.Option("--slow-factor", help="Service-time multiplier of --slow-servers.")
        ] = 3.0,
        slowdown_interval_ms: Annotated[
            float | None,
            typer.Option("--slowdown-interval-ms", help="Time-varying slowdowns: a new random subset every interval."),
        ] = None,
        slowdown_fraction: Annotated[
            float, typer.Option("--slowdown-fraction", help="Fraction of servers slowed per interval.")
        ] = 0.2,
        slowdown_factor: Annotated[
            float, typer.Option("--slowdown-factor", help="Service-time multiplier while slowed.")
        ] = 3.0,
        slowdown_duration_ms: Annotated[
            float | None, typer.Option("--slowdown-duration-ms", help="Slowdown length (default: the interval).")
        ] = None,
        write_fraction: Annotated[
            float | None,
            typer.Option("--write-fraction", help="Each op is a write with this probability (default: reads only)."),
        ] = None,
        writes_from_op: Annotated[
            bool, typer.Option("--writes-from-op", help="Writes = the dataset's op column (set, update, ...).")
        ] = False,
        client_model: Annotated[
            str, typer.Option("--client-model", help="open (Poisson at --load, default) or closed (--threads).")
        ] = "open",
        threads: Annotated[int, typer.Option("--threads", help="Closed loop: client threads.")] = 64,
        think_ms: Annotated[float, typer.Option("--think-ms", help="Closed loop: mean think time.")] = 0.0,
        think_dist: Annotated[
            str, typer.Option("--think-dist", help="Closed loop: exponential (default) or fixed think time.")
        ] = "exponential",
        size_aware_cost: Annotated[
            bool,
            typer.Option(
                "--size-aware-cost",
                help="Opset cost = Σ op demand estimated from value sizes, not the op count (Rein as published).",
            ),
        ] = False,
        as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
    ) -> None:
        """Replay a workload on the simulated cluster and report latency percentiles."""
        from tailtune.base.console import err_console, out_console, print_json
        from tailtune.simulation.cassandra import (
            MEMCACHED_POLICIES,
            MemcachedSpec,
            SimulationSpec,
            load_table,
            parse_params,
            run_memcached_simulation,
            run_simulation,
        )

        params = parse_params(param or [])
        if policy in MEMCACHED_POLICIES:
            from tailtune.base.errors import BadInputError

            cassandra_only = {
                "--server-speeds": server_speeds is not None,
                "--slow-servers": slow_servers is not None,
                "--slowdown-interval-ms": slowdown_interval_ms is not None,
                "--write-fraction": write_fraction is not None,
                "--writes-from-op": writes_from_op,
                "--client-model": client_model != "open",
                "--size-aware-cost": size_aware_cost,
            }
            given = [k for k, v in cassandra_only.items() if v]
            if given:
                raise BadInputError.single(
                    given[0], f"not supported for the memcached policy {policy} (Cassandra model only)",
                    field=given[0].lstrip("-").replace("-", "_"),
                )
            mspec = MemcachedSpec(
                policy=policy,
                params=params,
                servers=servers if servers is not None else 2,
                worker_threads=worker_threads,
                query_threads=query_threads,
                client_overhead_us=client_overhead_us,
                inter_arrival_us=inter_arrival_us,
                seed=seed,
            )
            table = load_table(dataset=dataset, trace=trace, profile=profile, requests=requests, seed=seed)
            source = str(trace) if trace is not None else (dataset or f"profile:{profile}")
            summary = run_memcached_simulation(table, mspec, source=source)
            if not summary["steady_state"]:
                err_console.print("[yellow]warning:[/] the memcached replay is not in steady state", soft_wrap=True)
            if as_json:
                print_json(summary)
            else:
                out_console.print(
                    f"[bold]{policy}[/] {summary['params']}: p50 {summary['p50_ms']:.3f} ms, "
                    f"p95 {summary['p95_ms']:.3f} ms, p99 {summary['p99_ms']:.3f} ms, "
                    f"mean {summary['mean_ms']:.3f} ms ({summary['requests']} requests, {summary['ops']} queries)"
                )
            return
        spec = SimulationSpec(
            policy=policy,
            params=params,
            servers=servers if servers is not None else 128,
            slots=slots,
            replication=replication,
            vnodes=vnodes,
            service_rate=service_rate,
            net_latency_us=net_latency_us,
            clients=clients,
            load=load,
            seed=seed,
            warmup=warmup,
            use_timestamps=use_timestamps,
        )
        table = load_table(dataset=dataset, trace=trace, profile=profile, requests=requests, seed=seed)
        source = str(trace) if trace is not None else (dataset or f"profile:{profile}")
        from tailtune.base.errors import BadInputError
        from tailtune.simulation.replicas import ReplicaSpec, needs_sized_replay, run_sized_simulation

        speeds: tuple[float, ...] | None = None
        if server_speeds is not None:
            try:
                speeds = tuple(float(x) for x in server_speeds.split(",") if x.strip())
            except ValueError:
                raise BadInputError.single(
                    "--server-speeds", f"{server_speeds!r} is not a comma-separated list of numbers",
                    field="server_speeds",
                ) from None

        rspec = ReplicaSpec(
            replica=replica,
            replica_params=parse_params(replica_param or [], source="--replica-param"),
            use_sizes=sizes,
            demand_dist=demand_dist,
            demand_sigma=demand_sigma,
            t0_us=t0_us,
            bandwidth_mbps=bandwidth_mbps,
            thr_l_bytes=thr_l_bytes,
            server_speeds=speeds,
            slow_servers=slow_servers,
            slow_factor=slow_factor,
            slowdown_interval_ms=slowdown_interval_ms,
            slowdown_fraction=slowdown_fraction,
            slowdown_factor=slowdown_factor,
            slowdown_duration_ms=slowdown_duration_ms,
            write_fraction=write_fraction,
            writes_from_op=writes_from_op,
            client_model=client_model,
            threads=threads,
            think_ms=think_ms,
            think_dist=think_dist,
            size_aware_cost=size_aware_cost,
        )
        sized = None
        if needs_sized_replay(table, policy, rspec) or demand_dist != "exponential":
            sized = run_sized_simulation(table, spec, rspec, source=source)
            result = sized.result
        else:
            result = run_simulation(table, spec, source=source)
        if not result.steady_state:
            err_console.print(
                "[yellow]warning:[/] not in steady state (busiest server offered "
                f"{result.server_load_max:.2f} "
                f"of its capacity, second-half/first-half mean latency {result.half_ratio:.2f}): tail "
                "percentiles grow with the run length and compare nothing.",
                soft_wrap=True,
            )
        if sized is not None and sized.held.get("unstable"):
            err_console.print(
                f"[yellow]warning:[/] {sized.replica} keeps holding more opsets at the clients "
                f"({sized.held['at_half']} at the middle arrival, {sized.held['at_end']} at the last): "
                "the selector cannot keep up with these open-loop arrivals.",
                soft_wrap=True,
            )
        if as_json:
            out = sized.to_json() if sized is not None else result.to_json()
            out["size_aware_cost"] = size_aware_cost
            print_json(out)
            return
        from rich.table import Table

        t = Table(title=f"{result.policy} {result.params or ''}".strip())
        for col in ("p50 ms", "p95 ms", "p99 ms", "p99.9 ms", "mean ms", "util", "max srv load", "steady"):
            t.add_column(col, justify="right")
        t.add_row(
            f"{result.p50_ms:.3f}",
            f"{result.p95_ms:.3f}",
            f"{result.p99_ms:.3f}",
            f"{result.p999_ms:.3f}",
            f"{result.mean_ms:.3f}",
            f"{result.utilization:.2f}",
            f"{result.server_load_max:.2f}",
            "yes" if result.steady_state else "NO",
        )
        out_console.print(t)
        if sized is not None:
            out_console.print(f"replica {sized.replica} {sized.replica_params or ''}".rstrip())
            for name, c in (sized.classes or {}).items():
                if c.get("requests"):
                    out_console.print(
                        f"  {name}: {c['requests']} requests, p50 {c['p50_ms']:.3f} ms, "
                        f"p99 {c['p99_ms']:.3f} ms, p99.9 {c['p999_ms']:.3f} ms"
                    )
        if sized is not None and sized.closed is not None:
            out_console.print(
                f"closed loop: {sized.closed['threads']} threads, think {sized.closed['think_ms']} ms "
                f"({sized.closed['think_dist']}): {sized.closed['throughput_rps']:.0f} requests/s"
            )
        if sized is not None and sized.writes is not None:
            out_console.print(f"writes: {sized.writes['ops']} ops, {sized.writes['copies']} replica copies")
        out_console.print(
            f"{result.requests} requests, {result.ops} ops, {result.events} events "
            f"in {result.sim_wall_s:.3f} s "
            f"({result.events_per_s / 1e6:.1f} M events/s)"
        )
