"""Connecting to a deployment's Cassandra cluster, for the publisher and for discovery alike.

Every connection goes through the operator's egress rules (`control.egress`): the contact points are
resolved and checked by `Egress.resolve` (the driver is given the checked addresses), the password is read only
through `Egress.read_password` and only for the login and contact points an admin bound it to
(`control.grants`, checked before any connection), and the driver connects to no host, contact point
or discovered peer that the check does not allow (`cassandra_policies`). Error texts are scrubbed of the
password wherever it appears.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from base.errors import TailtuneError
from control.egress import Egress, EgressRefused
from control.grants import password_grant_problem
from control.redact import redact

__all__ = ["ConnectFailed", "CqlTarget", "PasswordMissing", "cassandra_policies"]


def cassandra_policies(egress: Egress) -> tuple[Any, Any]:
    """(load balancing policy, address translator) for the Cassandra driver: it connects to no host (a contact
    point or a peer it discovers) whose address `egress` does not allow, and it translates no address (the one
    the cluster reports is the one checked)."""
    from cassandra.policies import HostFilterPolicy, IdentityTranslator, RoundRobinPolicy

    return HostFilterPolicy(RoundRobinPolicy(), lambda host: egress.allows(str(host.address))), IdentityTranslator()


class PasswordMissing(TailtuneError):
    """`connection.password_env` names a variable that is not set in this process's environment."""


class ConnectFailed(TailtuneError):
    """The driver could not open a session: `errors` is each contact point's own error (`host:port` → error)."""

    def __init__(self, message: str, *, points: list[str], errors: dict[str, BaseException]) -> None:
        super().__init__(message)
        self.points = points
        self.errors = errors


@dataclass
class CqlTarget:
    """One deployment's cluster as the worker reaches it: its `connection` (contact_points, port, username,
    password_env), the operator's egress rules and the timeout of one request."""

    connection: Mapping[str, Any]
    egress: Egress = field(default_factory=Egress)
    timeout_s: float = 5.0

    @property
    def port(self) -> int:
        return int(self.connection.get("port", 9042))

    @property
    def username(self) -> str | None:
        name = self.connection.get("username")
        return str(name) if name else None

    def password(self) -> str | None:
        """The password from the variable `connection.password_env` names (never stored), read only when the
        egress rule allows that name and an admin bound it to this login and these contact points: EgressRefused
        otherwise, PasswordMissing when it is unset."""
        name = self.connection.get("password_env")
        if not self.username or not name:
            return None
        problem = self.egress.password_env_problem(str(name)) or password_grant_problem(
            self.connection, self.egress.password_grant)
        if problem is not None:
            raise EgressRefused(f"connection.password_env: {problem}")
        value = self.egress.read_password(str(name))
        if not value:
            raise PasswordMissing(
                f"connection.password_env names {name}, which is not set in this process's environment"
            )
        return value

    def scrub(self, text: str) -> str:
        """`text` without credentials: redact()'s patterns and the password itself, wherever it appears."""
        name = self.connection.get("password_env")
        secret = None
        if name and self.egress.password_env_problem(str(name)) is None:
            secret = os.environ.get(str(name))
        text = redact(text)
        return text.replace(secret, "***") if secret else text

    def contact_points(self) -> list[str]:
        """The contact points' addresses, each checked against the egress rules (names resolved here); raises
        EgressRefused ("contact point ...") for the first one outside them."""
        points: list[str] = []
        for host in self.connection.get("contact_points", []):
            try:
                points += [a for a in self.egress.resolve(str(host), self.port) if a not in points]
            except EgressRefused as exc:  # the same kind (a name that does not resolve may resolve later)
                raise type(exc)(f"contact point {exc}") from None
        return points

    def connect(self, *, consistency: str = "QUORUM") -> tuple[Any, Any]:
        """(cluster, session) — the caller shuts the cluster down. Raises EgressRefused, PasswordMissing, or
        ConnectFailed naming each contact point's error."""
        from cassandra import ConsistencyLevel
        from cassandra.cluster import EXEC_PROFILE_DEFAULT, Cluster, ExecutionProfile, NoHostAvailable
        password = self.password()  # before any name is resolved or host reached
        port = self.port
        points = self.contact_points()
        # peers the driver discovers (system.peers) outside the allowed networks are never connected to, and
        # no address is translated: the driver connects where the check looked
        balancing, translator = cassandra_policies(self.egress)
        profile = ExecutionProfile(
            load_balancing_policy=balancing,
            request_timeout=self.timeout_s,
            consistency_level=getattr(ConsistencyLevel, consistency),
            serial_consistency_level=ConsistencyLevel.SERIAL,
        )
        auth: dict[str, Any] = {}
        if password is not None:
            from cassandra.auth import PlainTextAuthProvider

            auth["auth_provider"] = PlainTextAuthProvider(str(self.username), password)
        cluster = Cluster(
            points,
            **auth,
            port=port,
            address_translator=translator,
            protocol_version=5,
            execution_profiles={EXEC_PROFILE_DEFAULT: profile},
            connect_timeout=self.timeout_s,
            control_connection_timeout=self.timeout_s,
            executor_threads=1,
        )
        try:
            session = cluster.connect()
        except Exception as exc:
            cluster.shutdown()
            errors: dict[str, BaseException] = {}
            if isinstance(exc, NoHostAvailable):
                errors = {_hostport(k): v for k, v in (exc.errors or {}).items()}
            raise ConnectFailed(
                f"cassandra {points}: {self.scrub(str(exc))}", points=[f"{p}:{port}" for p in points], errors=errors
            ) from None
        return cluster, session


def _hostport(key: Any) -> str:
    """`host:port` of a driver endpoint (an EndPoint, a Host or a plain address)."""
    address = getattr(key, "address", None)
    port = getattr(key, "port", None)
    if address is not None and port is not None:
        return f"{address}:{port}"
    return str(key)
