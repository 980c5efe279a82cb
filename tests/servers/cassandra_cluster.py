"""A small multi-node Apache Cassandra 5.0.x cluster on loopback addresses (127.0.0.1, 127.0.0.2, ...).

Linux routes all of 127/8 to `lo`, so each node gets its own address with the same storage and native ports (the
Python driver uses one port for every host). `ClusterNode` is `cassandra_server.CassandraNode` with its own
listen/rpc address, the first node as seed, a fixed token (balanced ring: each node is the primary owner of a
third of the token range with three nodes), `auto_bootstrap: false` (a fresh, empty cluster: nothing to stream)
and the dynamic snitch on or off. Nodes start one after the other (each accepts CQL before the next starts);
`running_cluster` waits until the first node sees every other one as a peer and always stops every node
(`stop()` sends SIGCONT first, so a paused node is stopped too) and removes the data.

    python -m tests.servers.cassandra_cluster --nodes 3     # start, print the ring, stop on Ctrl-C
"""

from __future__ import annotations

import argparse
import contextlib
import shutil
import socket
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

from tests.servers.cassandra_server import DEFAULT_VERSION, CassandraNode, fetch_jars, free_port

__all__ = ["ClusterNode", "balanced_tokens", "node_address", "port_free_on_all", "running_cluster"]

MIN_TOKEN = -(2**63)


def node_address(i: int) -> str:
    """Address of node `i` (0-based): 127.0.0.{i+1}."""
    return f"127.0.0.{i + 1}"


def balanced_tokens(n: int) -> list[int]:
    """Murmur3 tokens splitting the ring into `n` equal ranges (what `token-generator` prints)."""
    return [MIN_TOKEN + (2**64 // n) * i for i in range(n)]


def port_free_on_all(hosts: Sequence[str], tries: int = 50) -> int:
    """A TCP port that can be bound on every one of `hosts`."""
    for _ in range(tries):
        port = free_port()
        ok = True
        for h in hosts:
            with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
                try:
                    s.bind((h, port))
                except OSError:
                    ok = False
                    break
        if ok:
            return port
    raise RuntimeError(f"no port free on all of {list(hosts)} after {tries} tries")


class ClusterNode(CassandraNode):
    """One node of a loopback cluster: `CassandraNode` with its own address, a seed, a token and the snitch choice."""

    def __init__(
        self,
        workdir: Path,
        lib: Path,
        *,
        host: str,
        seed: str,
        storage_port: int,
        native_port: int,
        token: int,
        heap: str = "768M",
        dynamic_snitch: bool = True,
        cluster_name: str = "tailtune-cluster",
    ) -> None:
        super().__init__(workdir, lib, heap)
        self.host = host
        self.seed = seed
        self.port = native_port
        self.storage_port = storage_port
        self.token = token
        self.dynamic_snitch = dynamic_snitch
        self.cluster_name = cluster_name

    def _write_config(self) -> Path:
        yaml = super()._write_config()
        lines = []
        for line in yaml.read_text().splitlines():
            key = line.split(":", 1)[0].strip()
            if key in ("listen_address", "rpc_address"):
                line = f"{key}: {self.host}"
            elif key == "- seeds":
                line = f'      - seeds: "{self.seed}:{self.storage_port}"'
            elif key == "cluster_name":
                line = f"cluster_name: {self.cluster_name}"
            lines.append(line)
        lines += [
            f"initial_token: {self.token}",
            "auto_bootstrap: false",
            f"dynamic_snitch: {'true' if self.dynamic_snitch else 'false'}",
        ]
        yaml.write_text("\n".join(lines) + "\n")
        return yaml


def _peers_seen(first: ClusterNode, expected: int) -> int:
    from cassandra.cluster import Cluster
    from cassandra.policies import WhiteListRoundRobinPolicy

    cluster = Cluster(
        [first.host], port=first.port, protocol_version=5, connect_timeout=2,
        load_balancing_policy=WhiteListRoundRobinPolicy([first.host]),
    )
    try:
        rows = cluster.connect().execute("SELECT peer FROM system.peers_v2")
        return len(list(rows))
    except Exception:
        return -1
    finally:
        cluster.shutdown()


@contextlib.contextmanager
def running_cluster(
    nodes: int = 3,
    *,
    version: str = DEFAULT_VERSION,
    heap: str = "768M",
    dynamic_snitch: bool = True,
    timeout_s: float = 120.0,
) -> Iterator[list[ClusterNode]]:
    """Start `nodes` nodes on 127.0.0.1..n (fetching jars if needed); always stop them all and remove their data."""
    lib = fetch_jars(version)
    root = Path(tempfile.mkdtemp(prefix="tailtune-cassandra-cluster-"))
    hosts = [node_address(i) for i in range(nodes)]
    storage = port_free_on_all(hosts)
    native = port_free_on_all(hosts)
    while native == storage:
        native = port_free_on_all(hosts)
    members = [
        ClusterNode(root / f"node{i + 1}", lib, host=h, seed=hosts[0], storage_port=storage, native_port=native,
                    token=t, heap=heap, dynamic_snitch=dynamic_snitch)
        for i, (h, t) in enumerate(zip(hosts, balanced_tokens(nodes), strict=True))
    ]
    try:
        for m in members:
            m.workdir.mkdir(parents=True, exist_ok=True)
            m.start(timeout_s)
        deadline = time.monotonic() + timeout_s
        while _peers_seen(members[0], nodes - 1) < nodes - 1:
            if time.monotonic() > deadline:
                raise RuntimeError(f"the nodes did not form a ring of {nodes} within {timeout_s}s; see {root}")
            time.sleep(1.0)
        yield members
    finally:
        for m in members:
            m.stop()
        shutil.rmtree(root, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tests.servers.cassandra_cluster", description=__doc__)
    ap.add_argument("--nodes", type=int, default=3)
    ap.add_argument("--heap", default="768M")
    ap.add_argument("--no-dynamic-snitch", action="store_true")
    a = ap.parse_args(argv)
    with running_cluster(a.nodes, heap=a.heap, dynamic_snitch=not a.no_dynamic_snitch) as members:
        for m in members:
            print(f"node {m.host}:{m.port} token {m.token} pid {m.proc.pid if m.proc else None}", flush=True)
        with contextlib.suppress(KeyboardInterrupt):
            while all(m.proc is not None and m.proc.poll() is None for m in members):
                time.sleep(1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
