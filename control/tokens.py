"""API tokens: scopes, who a token is (`Principal`), minting one, and the cached token table. Tokens are stored only
as SHA-256 hashes (DB table `api_tokens` or `TAILTUNE_API_TOKENS`). `service/auth.py` authenticates requests with
them; `tailtune serve --create-token` mints them.
"""

from __future__ import annotations

import hashlib
import secrets
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass

from sqlalchemy import select

from base.errors import BadInputError
from base.settings import Settings
from control.db import ApiTokenRow, Database, DeploymentRow
from control.errors import Invalid

__all__ = [
    "CLI",
    "SCOPES",
    "SETTINGS_SCOPES",
    "Principal",
    "cached_principal",
    "create_token",
    "hash_token",
    "principal_for_token",
    "settings_principal",
]

SCOPES = ("read", "write", "report", "admin")
#: The scopes a `TAILTUNE_API_TOKENS` entry may have (an admin token is minted on the service host only).
SETTINGS_SCOPES = ("read", "write", "report")
_CACHE_S = 2.0


@dataclass(frozen=True, slots=True)
class Principal:
    name: str
    scope: str
    #: A report token's deployments (names); None: not restricted.
    deployments: frozenset[str] | None = None

    @property
    def admin(self) -> bool:
        return self.scope == "admin"


#: Who `tailtune deployments create|set` acts as: a writer (an admin-only attribute is set with an admin token
#: through the API, the one privileged path).
CLI = Principal("cli", "write")


def hash_token(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def create_token(db: Database, name: str, scope: str, deployments: Sequence[str] | None = None) -> str:
    """Create a token, store its hash, and return the token itself (shown once, never stored). `deployments`:
    the deployments (names, each registered) a report token may report for; None: any."""
    if scope not in SCOPES:
        raise Invalid(f"scope must be one of {', '.join(SCOPES)}", field="scope")
    if not 0 < len(name) <= 100:  # api_tokens.name is VARCHAR(100): PostgreSQL enforces it
        raise BadInputError.single("command line", "token name must be 1..100 characters", field="token-name")
    if deployments is not None and scope != "report":
        raise BadInputError.single("command line", "only a report token is bound to deployments", field="deployment")
    token = "tt_" + secrets.token_urlsafe(32)
    with db.session() as s:
        names = None if deployments is None else sorted(set(deployments))
        if names is not None:
            known = set(s.scalars(select(DeploymentRow.name).where(DeploymentRow.name.in_(names))).all())
            missing = [n for n in names if n not in known]
            if not names or missing:
                raise BadInputError.single(
                    "command line", f"no deployment named {', '.join(map(repr, missing))}" if missing else
                    "name at least one deployment", field="deployment")
        s.add(ApiTokenRow(name=name, scope=scope, sha256=hash_token(token), created_at=time.time(),
                          deployments=names))
    _cache.clear()
    return token


class _TokenCache:
    """hash → Principal from the DB, refreshed every couple of seconds (keeps auth off the hot path).

    An unknown token is answered from the cached table too: a stream of wrong tokens costs a SHA-256 and a
    dict lookup each, and the table is re-read at most once per `_CACHE_S` whatever the rate (one reader at
    a time; the others use the table they have). A token created in another process is accepted within
    `_CACHE_S`; one created in this process at once.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._reload_lock = threading.Lock()
        self._by_url: dict[str, tuple[float, dict[str, Principal]]] = {}
        #: How often the token table was read from the DB (tests check failed auth stays bounded).
        self.reloads = 0

    def clear(self) -> None:
        with self._lock:
            self._by_url.clear()

    def peek(self, db: Database, digest: str) -> Principal | None:
        """A fresh cached answer or None — never touches the DB (for the config-fetch fast path)."""
        with self._lock:
            hit = self._by_url.get(db.url)
        if hit is None or time.monotonic() - hit[0] > _CACHE_S:
            return None
        return hit[1].get(digest)

    def lookup(self, db: Database, digest: str) -> Principal | None:
        with self._lock:
            hit = self._by_url.get(db.url)
        if hit is not None and time.monotonic() - hit[0] <= _CACHE_S:
            return hit[1].get(digest)
        with self._reload_lock:  # one reload at a time; who waited finds the fresh table
            with self._lock:
                hit = self._by_url.get(db.url)
            if hit is None or time.monotonic() - hit[0] > _CACHE_S:
                with db.session() as s:
                    rows = s.scalars(select(ApiTokenRow)).all()
                    table = {r.sha256: Principal(r.name, r.scope, _names(r.deployments)) for r in rows}
                self.reloads += 1
                hit = (time.monotonic(), table)
                with self._lock:
                    self._by_url[db.url] = hit
        return hit[1].get(digest)


#: The token table of this process (a token minted here is accepted at once).
_cache = _TokenCache()


def _names(stored: object) -> frozenset[str] | None:
    return frozenset(str(n) for n in stored) if isinstance(stored, list) else None


def settings_principal(settings: Settings, digest: str) -> Principal | None:
    """An entry `SCOPE:SHA256HEX`, or `report:SHA256HEX:NAME[+NAME...]` for a report token bound to those
    deployments."""
    for entry in settings.api_tokens:
        scope, _, rest = entry.partition(":")
        hexdigest, bound, names = rest.partition(":")
        if scope in SETTINGS_SCOPES and secrets.compare_digest(hexdigest.strip().lower(), digest):
            if bound and scope != "report":
                return None  # only a report token is bound to deployments: a malformed entry grants nothing
            deployments = frozenset(n.strip() for n in names.split("+") if n.strip()) if bound else None
            return Principal("settings", scope, deployments)
    return None


def cached_principal(settings: Settings, db: Database, digest: str) -> Principal | None:
    """Who the token of `digest` is from memory only (settings hashes, a fresh cached table), or None."""
    return settings_principal(settings, digest) or _cache.peek(db, digest)


def principal_for_token(token: str, settings: Settings, db: Database) -> Principal | None:
    """Who a token is (settings hashes first, then the cached token table), or None for an unknown token. The
    console's sign-in cookie is checked with it, as the API's bearer header is."""
    digest = hash_token(token.strip())
    return settings_principal(settings, digest) or _cache.lookup(db, digest)
