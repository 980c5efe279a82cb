"""Config fetch under open-loop load: GET /api/v1/configs/{id} at a fixed rate on loopback, latency percentiles.

Starts `tailtune serve` (uvicorn, one process) on a free port with a throw-away TAILTUNE_HOME, registers one
deployment with one config version, then fires requests at `--rate` req/s for `--seconds` over keep-alive
HTTP/1.1 connections (raw asyncio sockets: a light client on a 2-core machine). Latency is measured from each
request's *scheduled* send time (no coordinated omission). Half the requests send If-None-Match (→ 304).

    .venv/bin/python bench/api_config_fetch.py --rate 1000 --seconds 20
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def call(url: str, method: str = "GET", body: object | None = None, token: str | None = None) -> object:
    headers = {"Content-Type": "application/json"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    data = json.dumps(body).encode() if body is not None else None
    with urllib.request.urlopen(urllib.request.Request(url, data=data, method=method, headers=headers)) as r:
        return json.loads(r.read())


async def one(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, request: bytes) -> int:
    writer.write(request)
    await writer.drain()
    status = int((await reader.readline()).split()[1])
    length = 0
    while (line := await reader.readline()) not in (b"\r\n", b""):
        if line.lower().startswith(b"content-length:"):
            length = int(line.split(b":")[1])
    if length:
        await reader.readexactly(length)
    return status


async def load(port: int, path: str, token: str, etag: str, rate: float, seconds: float, conns: int
               ) -> tuple[list[float], dict[int, int], float]:
    base = f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {token}\r\n"
    plain = (base + "\r\n").encode()
    conditional = (base + f"If-None-Match: {etag}\r\n\r\n").encode()
    pool: asyncio.Queue[tuple[asyncio.StreamReader, asyncio.StreamWriter]] = asyncio.Queue()
    for _ in range(conns):
        pool.put_nowait(await asyncio.open_connection("127.0.0.1", port))
    lat: list[float] = []
    codes: dict[int, int] = {}
    n = int(rate * seconds)
    loop = asyncio.get_running_loop()
    t0 = loop.time() + 0.05

    async def fire(i: int, due: float) -> None:
        conn = await pool.get()
        try:
            code = await one(*conn, conditional if i % 2 else plain)
        finally:
            pool.put_nowait(conn)
        codes[code] = codes.get(code, 0) + 1
        lat.append(loop.time() - due)

    tasks = []
    for i in range(n):
        due = t0 + i / rate
        delay = due - loop.time()
        if delay > 0:
            await asyncio.sleep(delay)
        tasks.append(asyncio.create_task(fire(i, due)))
    await asyncio.gather(*tasks)
    wall = loop.time() - t0
    while not pool.empty():
        pool.get_nowait()[1].close()
    return lat, codes, wall


def pct(xs: list[float], q: float) -> float:
    s = sorted(xs)
    return s[min(len(s) - 1, int(q * len(s)))]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rate", type=float, default=1000.0)
    ap.add_argument("--seconds", type=float, default=20.0)
    ap.add_argument("--connections", type=int, default=16)
    ap.add_argument("--warmup", type=float, default=3.0)
    a = ap.parse_args()
    home = Path(tempfile.mkdtemp(prefix="tailtune-bench-api-"))
    port = free_port()
    env = {**os.environ, "TAILTUNE_HOME": str(home)}
    tok = subprocess.run([sys.executable, "-m", "tailtune", "serve", "--create-token", "write", "--json"], env=env,
                         check=True, capture_output=True, text=True).stdout
    token = json.loads(tok)["token"]
    server = subprocess.Popen([sys.executable, "-m", "tailtune", "serve", "--port", str(port)], env=env,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        url = f"http://127.0.0.1:{port}/api/v1"
        for _ in range(200):
            try:
                call(f"{url}/health")
                break
            except OSError:
                time.sleep(0.1)
        dep = call(f"{url}/deployments", "POST", {
            "name": "bench", "kind": "memcached", "topology": {"servers": 8},
            "connection": {"servers": ["127.0.0.1:11211"]}}, token)
        dep_id = dep["id"]  # type: ignore[index]
        cfg = {"policy": "chisel", "params": {"thr_l": 4096, "window_us": 50, "batch": 8}}
        call(f"{url}/configs/{dep_id}/versions", "POST", {"config": cfg, "publish": False}, token)
        path, etag = f"/api/v1/configs/{dep_id}", f'"{dep_id}-1"'
        asyncio.run(load(port, path, token, etag, a.rate, a.warmup, a.connections))
        lat, codes, wall = asyncio.run(load(port, path, token, etag, a.rate, a.seconds, a.connections))
    finally:
        server.terminate()
        server.wait(timeout=10)
    ms = [x * 1000 for x in lat]
    print(json.dumps({
        "date": time.strftime("%Y-%m-%d"), "rate_target": a.rate, "requests": len(ms),
        "achieved_rate": round(len(ms) / wall, 1), "codes": codes, "connections": a.connections,
        "p50_ms": round(pct(ms, 0.50), 3), "p90_ms": round(pct(ms, 0.90), 3), "p99_ms": round(pct(ms, 0.99), 3),
        "p999_ms": round(pct(ms, 0.999), 3), "max_ms": round(max(ms), 3), "loadavg": os.getloadavg(),
    }, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
