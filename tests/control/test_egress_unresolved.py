"""A host name that does not resolve right now (a DNS outage, a record not yet created) is refused without a
connection, but not for good: discovery, publishing and capture retry it, as they retry a server that is down.
A name outside the allowed networks stays refused for good."""

from __future__ import annotations

import ipaddress
import socket
from typing import Any

import pytest

from control.discovery import DiscoveryFailed
from control.egress import Egress, EgressRefused, EgressUnresolved
from control.publishers.base import PublishRejected, TargetUnavailable
from kinds.cassandra.cql import CqlTarget
from kinds.cassandra.discovery import discover_cassandra
from kinds.memcached.discovery import discover_memcached
from kinds.memcached.publisher import MemcachedPublisher

GONE = "cache.not-yet.invalid"
_real = socket.getaddrinfo


@pytest.fixture(autouse=True)
def _dns_down_for_gone(monkeypatch: pytest.MonkeyPatch) -> None:
    def lookup(host: Any, *args: Any, **kwargs: Any) -> Any:
        if host == GONE:
            raise socket.gaierror(socket.EAI_AGAIN, "Temporary failure in name resolution")
        return _real(host, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", lookup)


def test_a_name_that_does_not_resolve_is_not_refused_for_good() -> None:
    with pytest.raises(EgressUnresolved) as caught:
        Egress().resolve(GONE, 11211)
    assert caught.value.permanent is False
    outside = Egress(networks=(ipaddress.ip_network("10.0.0.0/8"),))
    with pytest.raises(EgressRefused) as refused:
        outside.resolve("127.0.0.1", 11211)
    assert refused.value.permanent is True and not isinstance(refused.value, EgressUnresolved)


def test_discovery_retries_a_name_that_does_not_resolve() -> None:
    with pytest.raises(DiscoveryFailed) as mc:
        discover_memcached({"servers": [f"{GONE}:11211"]}, egress=Egress(), timeout_s=1.0)
    assert not mc.value.permanent and GONE in str(mc.value)
    with pytest.raises(DiscoveryFailed) as cas:
        discover_cassandra({"contact_points": [GONE], "port": 9042}, [], egress=Egress(), timeout_s=1.0)
    assert not cas.value.permanent and GONE in str(cas.value)


def test_publishing_retries_a_name_that_does_not_resolve() -> None:
    with pytest.raises(EgressUnresolved):  # the same kind reaches the Cassandra publisher
        CqlTarget({"contact_points": [GONE]}).contact_points()
    pub = MemcachedPublisher("mc", {"servers": [f"{GONE}:11211"]}, 1.0)
    with pytest.raises(TargetUnavailable) as caught:
        pub._address(f"{GONE}:11211")
    assert not isinstance(caught.value, PublishRejected) and GONE in str(caught.value)
