"""Database URLs as tailtune's drivers need them (metadata DB and Optuna storage alike)."""

from __future__ import annotations

__all__ = ["normalize_url"]


def normalize_url(url: str) -> str:
    """`postgresql://` and `postgres://` mean PostgreSQL through psycopg 3, the driver tailtune installs
    (SQLAlchemy 2.0 would pick psycopg2 for a bare URL; 2.1 picks psycopg). Other URLs are returned unchanged.
    """
    for bare in ("postgresql://", "postgres://"):
        if url.startswith(bare):
            return "postgresql+psycopg://" + url.removeprefix(bare)
    return url
