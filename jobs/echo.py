"""The `echo` job (a scratch kind): one step that returns the payload's `text`, upper-cased."""

from __future__ import annotations

from typing import Any

from jobs.context import JobContext, JobFailed

__all__ = ["run_echo"]


def run_echo(ctx: JobContext) -> dict[str, Any]:
    text = ctx.payload.get("text")
    if not isinstance(text, str):
        raise JobFailed("an echo job needs a text")
    return ctx.step("echo", lambda: {"echo": text.upper()})
