"""Streams a request body to a file in chunks — raw body or multipart/form-data — with a size limit.

Never holds the upload in memory: `request.stream()` yields the body as it arrives; multipart is parsed
incrementally by python-multipart's `MultipartParser` (the file part goes straight to disk; Starlette's
`request.form()` would spool it to a temp file first). The destination is a server-chosen path; the client's
file name is only returned as a string. On any error — a limit, a stalled client, a full disk — the partial file
is removed.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
from collections.abc import AsyncGenerator
from contextlib import aclosing, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fastapi import Request
from fastapi.concurrency import run_in_threadpool
from python_multipart.exceptions import MultipartParseError
from python_multipart.multipart import MultipartParser, parse_options_header
from starlette.requests import ClientDisconnect

from base.settings import Settings
from control.storage import disk_full_cause, free_bytes, storage_full
from service.errors import InsufficientStorage, Invalid, PayloadTooLarge, RequestTimeout

__all__ = ["FILE_FIELD", "Received", "receive_upload"]

FILE_FIELD = "file"
_MAX_FIELD = 4096


@dataclass
class Received:
    size: int
    sha256: str
    filename: str | None = None
    fields: dict[str, str] = field(default_factory=dict)


class _Sink:
    """Counts, hashes and writes bytes; raises PayloadTooLarge past the limit."""

    def __init__(self, path: Path, limit: int) -> None:
        self.fh = path.open("wb")
        self.limit = limit
        self.size = 0
        self.hash = hashlib.sha256()

    def write(self, data: bytes) -> None:
        self.size += len(data)
        if self.size > self.limit:
            raise PayloadTooLarge(f"upload exceeds the limit of {self.limit} bytes", field="file")
        self.hash.update(data)
        self.fh.write(data)

    def close(self) -> None:
        self.fh.flush()
        os.fsync(self.fh.fileno())
        self.fh.close()

    def abandon(self) -> None:
        """Close without caring for what is still buffered (a full disk would fail the flush again)."""
        with suppress(OSError):
            self.fh.close()


class _Multipart:
    """Callbacks for MultipartParser: the `file` part into the sink, small text fields into a dict."""

    def __init__(self, sink: _Sink) -> None:
        self.sink = sink
        self.fields: dict[str, str] = {}
        self.filename: str | None = None
        self.files = 0
        self._hname = b""
        self._hvalue = b""
        self._headers: dict[bytes, bytes] = {}
        self._name: str | None = None
        self._is_file = False
        self._buf = bytearray()
        #: The closing boundary was seen: without it the body was cut short (the file part may be partial).
        self.complete = False

    def callbacks(self) -> Any:
        """The parser wants a dict of callbacks (python-multipart's MultipartCallbacks)."""
        names = (
            "on_part_begin",
            "on_part_data",
            "on_part_end",
            "on_header_field",
            "on_header_value",
            "on_header_end",
            "on_headers_finished",
            "on_end",
        )
        return {name: getattr(self, name) for name in names}

    def on_part_begin(self) -> None:
        self._headers = {}
        self._buf = bytearray()

    def on_header_field(self, data: bytes, start: int, end: int) -> None:
        self._hname += data[start:end]

    def on_header_value(self, data: bytes, start: int, end: int) -> None:
        self._hvalue += data[start:end]

    def on_header_end(self) -> None:
        self._headers[self._hname.lower()] = self._hvalue
        self._hname, self._hvalue = b"", b""

    def on_headers_finished(self) -> None:
        _, opts = parse_options_header(self._headers.get(b"content-disposition", b""))
        self._name = opts.get(b"name", b"").decode("utf-8", "replace")
        self._is_file = self._name == FILE_FIELD
        if self._is_file:
            self.files += 1
            if self.files > 1:
                raise Invalid("exactly one file part is allowed", field=FILE_FIELD)
            raw = opts.get(b"filename")
            self.filename = raw.decode("utf-8", "replace") if raw is not None else None

    def on_part_data(self, data: bytes, start: int, end: int) -> None:
        if self._is_file:
            self.sink.write(data[start:end])
        else:
            self._buf += data[start:end]
            if len(self._buf) > _MAX_FIELD:
                raise Invalid(f"form field is longer than {_MAX_FIELD} bytes", field=self._name or "form")

    def on_part_end(self) -> None:
        if not self._is_file and self._name:
            self.fields[self._name] = self._buf.decode("utf-8", "replace")

    def on_end(self) -> None:
        self.complete = True


async def _body(request: Request, timeout_s: float) -> AsyncGenerator[bytes, None]:
    """The body's chunks as they arrive; `RequestTimeout` when none comes for `timeout_s` (a stalled client)."""
    async with aclosing(request.stream()) as chunks:
        while True:
            try:
                async with asyncio.timeout(timeout_s):
                    chunk = await anext(chunks)
            except StopAsyncIteration:
                return
            except TimeoutError:
                raise RequestTimeout(
                    f"no byte of the body arrived for {timeout_s:g} s (api_read_timeout_s)", field="body"
                ) from None
            yield chunk


async def receive_upload(request: Request, dest: Path, settings: Settings) -> Received:
    """Write the body (raw, or the multipart `file` part) to `dest`; remove `dest` on any failure.

    Limits: `upload_max_bytes` (413), `api_read_timeout_s` between two chunks (408), the free space of `dest`'s
    filesystem (507: a declared size that does not fit is refused before anything is written; a write that
    finds the disk full ends the upload).
    """
    limit = settings.upload_max_bytes
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit + 64 * 1024:
        raise PayloadTooLarge(f"upload exceeds the limit of {limit} bytes", field="file")
    ctype, opts = parse_options_header(request.headers.get("content-type", ""))
    sink: _Sink | None = None
    try:
        dest.parent.mkdir(parents=True, exist_ok=True)
        if declared is not None and declared.isdigit() and int(declared) > free_bytes(dest.parent):
            raise storage_full(settings, None, dest, needed=int(declared))
        sink = _Sink(dest, limit)
        if ctype == b"multipart/form-data":
            boundary = opts.get(b"boundary")
            if not boundary:
                raise Invalid("multipart body without a boundary", field="Content-Type")
            mp = _Multipart(sink)
            parser = MultipartParser(boundary, mp.callbacks())
            try:
                async with aclosing(_body(request, settings.api_read_timeout_s)) as body:
                    async for chunk in body:
                        parser.write(chunk)
                parser.finalize()
            except MultipartParseError as exc:
                raise Invalid(f"malformed multipart body: {exc}", field="body") from exc
            if not mp.complete:
                raise Invalid(
                    "multipart body ends without its closing boundary (truncated upload?)", field="body"
                )
            if mp.files == 0:
                raise Invalid(f"multipart body has no '{FILE_FIELD}' part", field=FILE_FIELD)
            received = Received(sink.size, "", mp.filename, mp.fields)
        else:
            async with aclosing(_body(request, settings.api_read_timeout_s)) as body:
                async for chunk in body:
                    sink.write(chunk)
            if declared is not None and declared.isdigit() and int(declared) != sink.size:
                raise Invalid(f"the body has {sink.size} bytes but Content-Length says {declared}", field="body")
            received = Received(sink.size, "")
        await run_in_threadpool(sink.close)  # fsync off the event loop
    except BaseException as exc:
        if sink is not None:
            sink.abandon()
        dest.unlink(missing_ok=True)
        if isinstance(exc, ClientDisconnect):
            raise Invalid("the client went away before the upload ended", field="body") from exc
        cause = disk_full_cause(exc)
        if cause is not None and not isinstance(exc, InsufficientStorage):
            raise storage_full(settings, cause, dest) from exc
        raise
    if received.size == 0:
        dest.unlink(missing_ok=True)
        raise Invalid("the upload is empty", field=FILE_FIELD)
    received.sha256 = sink.hash.hexdigest()
    return received
