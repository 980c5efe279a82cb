"""jobs package (filled by its issue)."""

from __future__ import annotations

__all__: list[str] = []
