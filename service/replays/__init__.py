"""Replays resource: start a live replay of a deployment (a `replay` job) and read the model's fidelity on it."""

from __future__ import annotations

__all__: list[str] = []
