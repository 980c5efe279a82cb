"""Every connection the service or the worker opens goes to an address the egress check approved
(`control.egress`): a host name is resolved once, checked, and connected to at the checked address.

The attack is DNS rebinding: a name that answers an allowed address to the check and another address to any later
lookup. The tests' resolver answers the real server's address to the egress check's own lookup and an attacker's
to every other, and an audit hook (`socket.connect`, `socket.getaddrinfo`) records every connection Python opens
while readiness, discovery, calibration, capture and publishing run against real servers. A JVM tailtune starts is
pinned the same way (a security policy): a JMX server's RMI stub naming another host is refused.
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from control.egress import Egress, EgressRefused
from jobs.handlers import default_handlers
from jobs.worker import Worker
from kinds.cassandra.cql import cassandra_policies
from tests.app_fixtures import Svc, cassandra_deployment, memcached_deployment
from tests.servers.cassandra_server import CassandraNode, fetch_jars, free_port, jmx_tool, nodetool
from tests.servers.memcached_server import MemcachedNode

API = "/api/v1"
ATTACKER = "127.0.0.2"  # outside the allowed network 127.0.0.1/32 (Linux routes all of 127/8 to the loopback)
ALLOWED = ["127.0.0.1/32"]

_REAL_GETADDRINFO = socket.getaddrinfo


# --- what Python connects to -------------------------------------------------------------------------------------
@dataclass
class Audit:
    """Every `socket.connect` (address) and `socket.getaddrinfo` (host) while `on`, and what the check approved."""

    on: bool = False
    connects: list[tuple[str, int]] = field(default_factory=list)
    lookups: list[str] = field(default_factory=list)
    approved: set[str] = field(default_factory=set)

    def hook(self, event: str, args: tuple[Any, ...]) -> None:
        if not self.on:
            return
        if event == "socket.connect" and isinstance(args[1], tuple) and isinstance(args[1][0], str):
            self.connects.append((args[1][0], int(args[1][1])))
        elif event == "socket.getaddrinfo" and isinstance(args[0], (str, bytes)):
            self.lookups.append(args[0].decode() if isinstance(args[0], bytes) else args[0])

    def unchecked(self) -> list[tuple[str, int]]:
        return [c for c in self.connects if c[0] not in self.approved]


_AUDIT = Audit()
sys.addaudithook(_AUDIT.hook)  # an audit hook cannot be removed: it records only while a test switches it on


class Attacker:
    """A TCP listener on ATTACKER:port that counts the connections it accepts (and closes them)."""

    def __init__(self, port: int) -> None:
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind((ATTACKER, port))
        self.sock.listen(16)
        self.sock.settimeout(0.1)
        self.accepted = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                continue
            self.accepted += 1
            conn.close()

    def close(self) -> None:
        self._stop.set()
        self._thread.join()
        self.sock.close()


@pytest.fixture
def rebinding(monkeypatch: pytest.MonkeyPatch) -> Iterator[Audit]:
    """Names under `.rebind.test` answer 127.0.0.1 to the egress check's lookup (`Egress.resolve`) and ATTACKER to
    every other lookup; the audit records what the check approved and every connection and lookup."""
    check_code = Egress.resolve.__code__

    def getaddrinfo(host: Any, port: Any, *args: Any, **kwargs: Any) -> Any:
        name = host.decode() if isinstance(host, bytes) else host
        if isinstance(name, str) and name.endswith(".rebind.test"):
            answer = "127.0.0.1" if sys._getframe(1).f_code is check_code else ATTACKER
            return [(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP, "", (answer, int(port or 0)))]
        return _REAL_GETADDRINFO(host, port, *args, **kwargs)

    real_resolve = Egress.resolve

    def resolve(self: Egress, host: str, port: int) -> list[str]:
        addresses = real_resolve(self, host, port)
        _AUDIT.approved.update(addresses)
        return addresses

    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
    monkeypatch.setattr(Egress, "resolve", resolve)
    _AUDIT.connects.clear()
    _AUDIT.lookups.clear()
    _AUDIT.approved.clear()
    _AUDIT.on = True
    try:
        yield _AUDIT
    finally:
        _AUDIT.on = False


def _worker(svc: Svc) -> Worker:
    return Worker(svc.settings, svc.db, "w-rebind", handlers=default_handlers(), schedule=False)


def _job(svc: Svc, path: str, body: dict[str, Any] | None = None) -> dict[str, Any]:
    r = svc.client.post(f"{API}{path}", json=body, headers=svc.write)
    assert r.status_code in (201, 202), r.text
    _worker(svc).run_once()
    out: dict[str, Any] = svc.client.get(f"{API}/jobs/{r.json()['id']}", headers=svc.read).json()
    return out


def _ready_targets(svc: Svc) -> dict[str, dict[str, Any]]:
    ready = svc.client.get(f"{API}/health/ready", headers=svc.read).json()
    return {t["name"]: t for t in ready["targets"]}


# --- readiness ---------------------------------------------------------------------------------------------------
def test_readiness_connects_to_the_address_it_checked(svc: Svc, memcached_node: MemcachedNode,
                                                      rebinding: Audit) -> None:
    svc.settings.connect_networks = ALLOWED
    attacker = Attacker(memcached_node.port)
    try:
        name = f"mc.rebind.test:{memcached_node.port}"
        r = svc.client.post(f"{API}/deployments", json=memcached_deployment("rebind-ready", [name]),
                            headers=svc.write)
        assert r.status_code == 201, r.text
        targets = _ready_targets(svc)
        assert targets["rebind-ready (memcached)"]["ok"], targets
        assert targets["rebind-ready (memcached)"]["detail"] == "reachable"
        assert attacker.accepted == 0
        assert (("127.0.0.1", memcached_node.port) in rebinding.connects) and not rebinding.unchecked()
    finally:
        attacker.close()


def test_readiness_reports_a_name_outside_and_one_that_does_not_resolve(svc: Svc, memcached_node: MemcachedNode,
                                                                         rebinding: Audit) -> None:
    svc.settings.connect_networks = ["10.0.0.0/8"]
    for name, server in (("rebind-out", f"mc.rebind.test:{memcached_node.port}"),
                         ("rebind-none", "no-such-host.invalid:11211")):
        r = svc.client.post(f"{API}/deployments", json=memcached_deployment(name, [server]), headers=svc.write)
        assert r.status_code == 201, r.text
    targets = _ready_targets(svc)
    assert not targets["rebind-out (memcached)"]["ok"]
    assert "outside TAILTUNE_CONNECT_NETWORKS" in targets["rebind-out (memcached)"]["detail"], targets
    none = targets["rebind-none (memcached)"]
    assert not none["ok"] and "unreachable: no-such-host.invalid:11211" in none["detail"], none
    assert rebinding.connects == []


# --- every path, memcached -----------------------------------------------------------------------------------------
def test_no_python_path_connects_to_an_unchecked_address_memcached(svc: Svc, memcached_node: MemcachedNode,
                                                                    rebinding: Audit) -> None:
    """Readiness, discovery (with the server profile), calibration, capture and publishing of a memcached
    deployment named by a rebinding name: every connection goes to the checked address, none to the attacker."""
    svc.settings.connect_networks = ALLOWED
    svc.settings.discover_profile_reps = 3
    port = memcached_node.port
    attacker = Attacker(port)
    try:
        server = f"mc.rebind.test:{port}"
        dep = svc.client.post(f"{API}/deployments", json=memcached_deployment("rebind-mc", [server]),
                              headers=svc.write).json()
        assert _ready_targets(svc)["rebind-mc (memcached)"]["ok"]
        job = _job(svc, f"/deployments/{dep['id']}/discover", {"profile_servers": True})
        assert job["status"] == "succeeded", job["error"]
        job = _job(svc, f"/deployments/{dep['id']}/calibrate")
        assert job["status"] == "succeeded", job["error"]
        r = svc.client.post(f"{API}/jobs", json={"deployment_id": dep["id"], "capture": {"duration_s": 1}},
                            headers=svc.write)
        assert r.status_code == 202, r.text
        from jobs import nightly
        from jobs.context import JobContext

        def capture_only(ctx: JobContext) -> dict[str, Any]:
            assert ctx.deployment_id is not None
            dep_id = ctx.deployment_id
            return ctx.step("ingest", lambda: nightly._step_ingest(ctx, dep_id))

        worker = Worker(svc.settings, svc.db, "w-rebind-cap", handlers={"nightly": capture_only}, schedule=False)
        worker.run_once()
        got = svc.client.get(f"{API}/jobs/{r.json()['id']}", headers=svc.read).json()
        assert f"capture: watching {server}" in got["logs"], got  # the watch was on (an empty capture may fail after)
        r = svc.client.post(f"{API}/configs/{dep['id']}/versions",
                            json={"config": {"policy": "batching", "params": {}}}, headers=svc.write)
        assert r.status_code == 201, r.text
        _worker(svc).run_once()
        got = svc.client.get(f"{API}/deployments/{dep['id']}", headers=svc.read).json()
        assert got["publish_status"] == "ok", got["publish_error"]
    finally:
        attacker.close()
    assert attacker.accepted == 0
    assert rebinding.approved == {"127.0.0.1"}
    assert rebinding.connects and not rebinding.unchecked(), rebinding.unchecked()
    assert ("127.0.0.1", port) in rebinding.connects


# --- every path, Cassandra ---------------------------------------------------------------------------------------
def test_no_python_path_connects_to_an_unchecked_address_cassandra(svc: Svc, cassandra_node: CassandraNode,
                                                                    rebinding: Audit) -> None:
    """Readiness, discovery and publishing of a Cassandra deployment whose contact point is a rebinding name:
    the driver is given the checked address and connects nowhere else; nodetool over JMX is pinned to the node's
    checked address and port."""
    svc.settings.connect_networks = ALLOWED
    attacker = Attacker(cassandra_node.port)
    try:
        body = cassandra_deployment("rebind-cas", cassandra_node.port)
        body["connection"] = {**body["connection"], "contact_points": ["cas.rebind.test"]}  # type: ignore[dict-item]
        dep = svc.client.post(f"{API}/deployments", json=body, headers=svc.write).json()
        assert _ready_targets(svc)["rebind-cas (cassandra)"]["ok"]
        job = _job(svc, f"/deployments/{dep['id']}/discover")
        assert job["status"] == "succeeded", job["error"]
        r = svc.client.post(f"{API}/configs/{dep['id']}/versions", json={"config": {"policy": "fifo", "params": {}}},
                            headers=svc.write)
        assert r.status_code == 201, r.text
        _worker(svc).run_once()
        got = svc.client.get(f"{API}/deployments/{dep['id']}", headers=svc.read).json()
        assert got["publish_status"] == "ok", got["publish_error"]
        assert "ReleaseVersion" in nodetool(cassandra_node, "version")  # the pinned JMX client reaches the node
    finally:
        attacker.close()
    assert attacker.accepted == 0
    assert rebinding.connects and not rebinding.unchecked(), rebinding.unchecked()
    assert ("127.0.0.1", cassandra_node.port) in rebinding.connects


def test_the_cassandra_driver_is_restricted_to_checked_addresses() -> None:
    """The node filter refuses a peer outside the networks; no address is translated."""
    import ipaddress

    balancing, translator = cassandra_policies(Egress(networks=(ipaddress.ip_network("127.0.0.1/32"),)))

    class Host:
        def __init__(self, address: str) -> None:
            self.address = address

    assert balancing.predicate(Host("127.0.0.1")) and not balancing.predicate(Host(ATTACKER))
    assert translator.translate(ATTACKER) == ATTACKER


# --- a JVM tailtune starts ---------------------------------------------------------------------------------------
_SLEEPER = "public class Sleep { public static void main(String[] a) throws Exception { Thread.sleep(600000); } }\n"


class JmxServer:
    """A JVM whose JMX registry listens on 127.0.0.1:`port` and whose RMI stub names `stub_host`:`rmi_port`: what a
    hostile server sends to make a JMX client connect elsewhere."""

    def __init__(self, tmp: Path, port: int, rmi_port: int, stub_host: str) -> None:
        source = tmp / "Sleep.java"
        source.write_text(_SLEEPER)
        self.proc = subprocess.Popen(
            ["java", f"-Dcom.sun.management.jmxremote.port={port}",
             f"-Dcom.sun.management.jmxremote.rmi.port={rmi_port}",
             "-Dcom.sun.management.jmxremote.authenticate=false", "-Dcom.sun.management.jmxremote.ssl=false",
             f"-Djava.rmi.server.hostname={stub_host}", str(source)],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
                return
            except OSError:
                time.sleep(0.2)
        self.close()
        raise RuntimeError("the JMX server did not start")

    def close(self) -> None:
        self.proc.kill()
        self.proc.wait()


@pytest.mark.skipif(shutil.which("java") is None, reason="needs Java 17")
def test_a_jmx_stub_naming_another_host_or_port_is_refused(tmp_path: Path) -> None:
    lib = fetch_jars()
    port, rmi_port = free_port(), free_port()
    bean = ("sjk", "mx", "-b", "java.lang:type=Runtime", "-mg", "-f", "Uptime")
    hostile = JmxServer(tmp_path, port, rmi_port, ATTACKER)
    try:
        with pytest.raises(RuntimeError, match=rf"SocketPermission.*{ATTACKER}:{rmi_port}"):
            jmx_tool(lib, "127.0.0.1", port, *bean)
    finally:
        hostile.close()
    # the stub names the checked host but another port than the one the client is pinned to: refused too
    other = JmxServer(tmp_path, port, rmi_port, "127.0.0.1")
    try:
        with pytest.raises(RuntimeError, match=rf"SocketPermission.*127.0.0.1:{rmi_port}"):
            jmx_tool(lib, "127.0.0.1", port, *bean)
    finally:
        other.close()
    # the connector on the registry's own port (as the test nodes run it): the pinned client reads the bean
    same = JmxServer(tmp_path, port, port, "127.0.0.1")
    try:
        assert "java.lang:type=Runtime" in jmx_tool(lib, "127.0.0.1", port, *bean)
    finally:
        same.close()


def test_a_jvm_is_given_checked_addresses_only() -> None:
    import ipaddress

    egress = Egress(networks=(ipaddress.ip_network("127.0.0.1/32"),))
    with pytest.raises(EgressRefused, match="never a name"):
        egress.jvm_options([("localhost", 7199)])
    with pytest.raises(EgressRefused, match="outside the networks"):
        egress.jvm_options([(ATTACKER, 7199)])
    options = egress.jvm_options([("127.0.0.1", 7199)])
    policy = Path(options[-1].split("==", 1)[1]).read_text()
    assert '"127.0.0.1:7199", "connect"' in policy and policy.count("SocketPermission") == 1
    none = Path(Egress().jvm_options()[-1].split("==", 1)[1]).read_text()
    assert "SocketPermission" not in none  # the full query log reader: no connection at all
