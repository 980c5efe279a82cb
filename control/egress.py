"""What the worker may send, and where: the rules between a write token and the worker's secrets.

A deployment is written through the API (a write token), and the worker then connects where it says and logs
in with the password it names. Three rules keep a write token from turning the worker into a courier:

* **Which variable.** `connection.password_env` names the environment variable that holds a Cassandra
  password. Only names under `TAILTUNE_CASSANDRA_PASSWORD_` (for example `TAILTUNE_CASSANDRA_PASSWORD_ORDERS`)
  or listed by the operator in `TAILTUNE_PASSWORD_ENVS` may be named: every other variable of the worker's
  environment (the metadata database URL, cloud credentials, ...) is not the API's to name. The API refuses
  the rest with a 422, and the worker checks again before it reads a variable (a row written before the rule,
  or straight into the database, is refused the same way, and the variable is never read).
* **Whose variable.** A password variable is sent only for the deployment, login and contact points an admin
  token bound it to (`control.grants`): the worker acts on one deployment with `Egress.bound(grant)`,
  and a connection naming a variable without that binding is refused before any connection is made.
* **Which hosts.** `TAILTUNE_CONNECT_NETWORKS` (CIDRs; empty: any) lists the networks the service and the
  worker may connect to for a deployment (readiness, discovery, calibration, capture, publishing). The API
  refuses an address literal outside them. Every connection is opened through one check, `Egress.resolve`:
  a host name is resolved once, refused when any of its addresses is outside, and connected to at the
  addresses checked (a name that resolves differently a moment later cannot redirect it). On top of it:

  - Python sockets: `Egress.connect` (readiness, capture, the publisher's ping); a client library that takes
    an address (pymemcache) is given `resolve`'s address, never the name.
  - The Cassandra driver: `kinds.cassandra.cql.cassandra_policies(egress)` — the contact points are the checked
    addresses, and the driver connects to no host the check does not allow (a node filter over every host, peers
    it discovers included) at the address the cluster reports (no address translation by name).
  - A JVM tailtune starts: `Egress.jvm_options` — a security policy (`base.jvm_sandbox`) under which
    it may connect only to the checked addresses and ports it is given (none: no connection at all, the full
    query log reader) and resolve no name. A JMX client's RMI stub names the host and port to connect back to;
    one naming another host or port is refused inside the JVM.
"""

from __future__ import annotations

import ipaddress
import os
import socket
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from base.errors import BadInputError, TailtuneError
from base.jvm_sandbox import sandbox_options
from base.settings import Settings

__all__ = [
    "PASSWORD_ENV_PREFIX",
    "Egress",
    "EgressRefused",
    "EgressUnresolved",
    "parse_server",
]

#: The environment variables a deployment may name as its password's holder, besides the operator's list.
PASSWORD_ENV_PREFIX = "TAILTUNE_CASSANDRA_PASSWORD_"
IpNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network


class EgressRefused(TailtuneError):
    """The worker will not read this variable or connect to this host (a rule of `control.egress`).
    `permanent`: another try would be refused the same way."""

    permanent: bool = True


class EgressUnresolved(EgressRefused):
    """A host name that does not resolve (nothing is connected to; it may resolve later: not permanent)."""

    permanent = False


def parse_server(text: str, where: str = "command line", field: str = "server") -> tuple[str, int]:
    """`HOST:PORT` (`[v6]:PORT` for an IPv6 literal) → (host, port); BadInputError naming `field` otherwise."""
    host, sep, port = text.strip().rpartition(":")
    host = host.strip("[]")
    bad_host = not host or any(c.isspace() for c in host)
    if not sep or bad_host or not (port.isascii() and port.isdigit()) or not 0 < int(port) < 65536:
        raise BadInputError.single(where, f"expected HOST:PORT, got {text!r}", field=field)
    return host, int(port)


def _literal(host: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    try:
        return ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return None


@dataclass(frozen=True)
class Egress:
    """The operator's rules (from settings): extra password variables, and the networks the worker may reach."""

    password_envs: frozenset[str] = frozenset()
    networks: tuple[IpNetwork, ...] = ()
    #: The admin's binding of the password of the deployment the worker acts on (`control.grants`);
    #: None: no password may be sent.
    password_grant: Any = None

    @classmethod
    def of(cls, settings: Settings) -> Egress:
        nets = []
        for text in settings.connect_networks:
            try:
                nets.append(ipaddress.ip_network(text.strip(), strict=False))
            except ValueError as exc:
                raise EgressRefused(
                    f"TAILTUNE_CONNECT_NETWORKS: {text!r} is not a network (CIDR such as 10.0.0.0/8): {exc}"
                ) from None
        return cls(frozenset(settings.password_envs), tuple(nets))

    def bound(self, grant: Any) -> Egress:
        """These rules for one deployment whose password an admin bound as `grant` (None: not bound)."""
        return replace(self, password_grant=grant)

    # --- which variable ------------------------------------------------------------------------------------
    def password_env_problem(self, name: str) -> str | None:
        """Why the worker may not read variable `name` (None: it may)."""
        if name.startswith(PASSWORD_ENV_PREFIX) and len(name) > len(PASSWORD_ENV_PREFIX):
            return None
        if name in self.password_envs:
            return None
        return (
            f"{name!r} is not a variable the worker may read: put the password in a variable named "
            f"{PASSWORD_ENV_PREFIX}<NAME> (for example {PASSWORD_ENV_PREFIX}ORDERS) in the worker's environment, "
            "or have the operator list this name in TAILTUNE_PASSWORD_ENVS"
        )

    def read_password(self, name: str) -> str | None:
        """The value of variable `name` (None when unset), read only when the rule allows the name."""
        problem = self.password_env_problem(name)
        if problem is not None:
            raise EgressRefused(f"connection.password_env: {problem}")
        return os.environ.get(name)

    # --- which hosts ---------------------------------------------------------------------------------------
    def allows(self, address: str) -> bool:
        """Is this address (an IP literal) inside the allowed networks (any, when none is set)?"""
        if not self.networks:
            return True
        ip = _literal(address)
        if ip is None:
            return False
        if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
            ip = ip.ipv4_mapped
        return any(ip.version == n.version and ip in n for n in self.networks)

    def host_problem(self, host: str) -> str | None:
        """API side: why an endpoint's host is refused (None: accepted). A name is resolved by the worker."""
        if _literal(host) is None or self.allows(host):
            return None
        return self._outside(host)

    def _outside(self, host: str, addresses: Iterable[str] = ()) -> str:
        shown = f" ({', '.join(addresses)})" if addresses else ""
        nets = ", ".join(str(n) for n in self.networks)
        return (
            f"{host}{shown} is outside the networks the worker may connect to ({nets}): use a host inside them, "
            "or have the operator add its network to TAILTUNE_CONNECT_NETWORKS"
        )

    def resolve(self, host: str, port: int) -> list[str]:
        """The one egress check: the addresses of `host` the service or the worker will connect to, every one
        checked. A name is resolved here, once; raises EgressRefused when it does not resolve or when any of its
        addresses is outside the allowed networks (a name half inside is refused whole). Connect to what it
        returns, never to the name again."""
        literal = _literal(host)
        if literal is not None:
            addresses = [str(literal)]
        else:
            try:
                infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
            except (OSError, UnicodeError) as exc:
                raise EgressUnresolved(f"{host}: cannot resolve ({exc})") from None
            addresses = sorted({str(info[4][0]) for info in infos})
            if not addresses:
                raise EgressUnresolved(f"{host}: cannot resolve (no address)")
        bad = [a for a in addresses if not self.allows(a)]
        if bad:
            raise EgressRefused(self._outside(host, bad))
        return addresses

    def connect(self, host: str, port: int, timeout_s: float) -> socket.socket:
        """A TCP connection to `host`:`port` at an address `resolve` checked (each in turn until one answers).
        Raises EgressRefused (the check), OSError (the last address's failure to connect)."""
        failure: OSError | None = None
        for address in self.resolve(host, port):
            try:
                return socket.create_connection((address, port), timeout=timeout_s)
            except OSError as exc:
                failure = exc
        assert failure is not None
        raise failure

    def jvm_options(self, endpoints: Sequence[tuple[str, int]] = ()) -> list[str]:
        """Options for a JVM tailtune starts to reach `endpoints` ((address, port) pairs, each an address
        `resolve` returned: checked again here): under them it may connect to those endpoints only, resolve no
        name, and one naming another host or port (a JMX client's RMI stub) is refused inside the JVM
        (`base.jvm_sandbox`). None: no connection at all."""
        for address, _ in endpoints:
            if _literal(address) is None:
                raise EgressRefused(f"{address}: a JVM is given a checked address, never a name")
            if not self.allows(address):
                raise EgressRefused(self._outside(address))
        return sandbox_options(endpoints)
