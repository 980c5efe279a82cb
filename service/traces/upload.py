"""Streams a request body to a file in chunks — raw body or multipart/form-data — with a size limit.

Never holds the upload in memory: `request.stream()` yields the body as it arrives; multipart is parsed
incrementally by python-multipart's `MultipartParser` (the file part goes straight to disk; Starlette's
`request.form()` would spool it to a temp file first). The destination is a server-chosen path; the client's
file name is only returned as a string. On any error the partial file is removed.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fastapi import Request
from fastapi.concurrency import run_in_threadpool
from python_multipart.exceptions import MultipartParseError
from python_multipart.multipart import MultipartParser, parse_options_header
from starlette.requests import ClientDisconnect

from service.errors import Invalid, PayloadTooLarge

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


async def receive_upload(request: Request, dest: Path, limit: int) -> Received:
    """Write the body (raw, or the multipart `file` part) to `dest`; remove `dest` on any failure."""
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit + 64 * 1024:
        raise PayloadTooLarge(f"upload exceeds the limit of {limit} bytes", field="file")
    ctype, opts = parse_options_header(request.headers.get("content-type", ""))
    dest.parent.mkdir(parents=True, exist_ok=True)
    sink = _Sink(dest, limit)
    try:
        if ctype == b"multipart/form-data":
            boundary = opts.get(b"boundary")
            if not boundary:
                raise Invalid("multipart body without a boundary", field="Content-Type")
            mp = _Multipart(sink)
            parser = MultipartParser(boundary, mp.callbacks())
            try:
                async for chunk in request.stream():
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
            async for chunk in request.stream():
                sink.write(chunk)
            if declared is not None and declared.isdigit() and int(declared) != sink.size:
                raise Invalid(f"the body has {sink.size} bytes but Content-Length says {declared}", field="body")
            received = Received(sink.size, "")
        await run_in_threadpool(sink.close)  # fsync off the event loop
    except ClientDisconnect as exc:
        sink.fh.close()
        dest.unlink(missing_ok=True)
        raise Invalid("the client went away before the upload ended", field="body") from exc
    except BaseException:
        sink.fh.close()
        dest.unlink(missing_ok=True)
        raise
    if received.size == 0:
        dest.unlink(missing_ok=True)
        raise Invalid("the upload is empty", field=FILE_FIELD)
    received.sha256 = sink.hash.hexdigest()
    return received
