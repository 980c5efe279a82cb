"""Config fetch under open-loop load: GET /api/v1/configs/{id} at a fixed rate on loopback, latency
percentiles.

Starts `tailtune serve` (uvicorn, one process; the test kit's `tests.servers.tailtune_service.running_serve`) on a
free port with a throw-away TAILTUNE_HOME, registers one deployment with one config version, then fires requests at
`--rate` req/s for `--seconds` over keep-alive HTTP/1.1 connections (raw asyncio sockets: a light client on a
2-core machine). Latency is measured from each request's *scheduled* send time (no coordinated omission). Half the
requests send If-None-Match (→ 304).

    PYTHONPATH=. .venv/bin/python bench/api_config_fetch.py --rate 1000 --seconds 20
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path

from tests.servers.cassandra_server import free_port
from tests.servers.tailtune_service import running_serve

ROOT = Path(__file__).resolve().parents[1]


def call(url: str, method: str = "GET", body: object | None = None, token: str | None = None) -> object:
    headers = {"Content-Type": "application/json"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    data = json.dumps(body).encode() if body is not None else None
    try:
        with urllib.request.urlopen(
            urllib.request.Request(url, data=data, method=method, headers=headers)
        ) as r:
            return json.loads(r.read())
    except urllib.error.HTTPError as exc:
        raise SystemExit(f"{method} {url}: {exc.code} {exc.read().decode(errors='replace')}") from None


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


async def load(
    port: int, path: str, token: str, etag: str, rate: float, seconds: float, conns: int
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


WRK_LUA = """
local token, etag, pause = "%s", '%s', %d
local n = 0
function delay() return pause end
function request()
  n = n + 1
  local h = {["Authorization"] = "Bearer " .. token}
  if n %% 2 == 0 then h["If-None-Match"] = etag end
  return wrk.format("GET", nil, h)
end
"""


def run_wrk(url: str, token: str, etag: str, seconds: float, conns: int, rate: float) -> dict[str, object]:
    """wrk (C, one thread), each connection pausing so that `conns` connections offer about `rate` req/s."""
    pause_ms = max(0, round(conns / rate * 1000) - 1)
    with tempfile.NamedTemporaryFile("w", suffix=".lua", delete=False) as fh:
        fh.write(WRK_LUA % (token, etag, pause_ms))
    cmd = ["wrk", "-t1", f"-c{conns}", f"-d{int(seconds)}s", "--latency", "-s", fh.name, url]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    os.unlink(fh.name)
    res: dict[str, object] = {"tool": "wrk", "pause_ms_per_connection": pause_ms}
    for line in out.splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[0] in ("50%", "75%", "90%", "99%"):
            m = re.fullmatch(r"([0-9.]+)(us|ms|s)", parts[1])
            if m:
                scale = {"us": 0.001, "ms": 1.0, "s": 1000.0}[m.group(2)]
                res[f"p{parts[0][:-1]}_ms"] = round(float(m.group(1)) * scale, 3)
        if line.startswith("Requests/sec:"):
            res["achieved_rate"] = float(parts[1])
        if "Non-2xx or 3xx" in line:
            res["non_2xx_3xx"] = int(parts[-1])
    return res


def server_cpu(pid: int) -> float:
    """utime + stime of the server process, in seconds (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def pct(xs: list[float], q: float) -> float:
    s = sorted(xs)
    return s[min(len(s) - 1, int(q * len(s)))]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rate", type=float, default=1000.0)
    ap.add_argument("--seconds", type=float, default=20.0)
    ap.add_argument("--connections", type=int, default=16)
    ap.add_argument("--warmup", type=float, default=3.0)
    ap.add_argument("--wrk", action="store_true", help="generate the load with wrk instead of Python")
    ap.add_argument(
        "--priority",
        type=int,
        default=0,
        help="renice server and client by -N (root; isolates the service from other CPU-bound jobs)",
    )
    a = ap.parse_args()
    home = Path(tempfile.mkdtemp(prefix="tailtune-bench-api-"))
    port = free_port()
    env = {**os.environ, "TAILTUNE_HOME": str(home)}
    tok = subprocess.run(
        [sys.executable, "-m", "tailtune", "serve", "--create-token", "write", "--json"],
        env=env,
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    token = json.loads(tok)["token"]
    with running_serve(env, port) as server:
        if a.priority:
            os.setpriority(os.PRIO_PROCESS, server.pid, -a.priority)
            os.setpriority(os.PRIO_PROCESS, 0, -a.priority)
        url = f"http://127.0.0.1:{port}/api/v1"
        dep = call(
            f"{url}/deployments",
            "POST",
            {
                "name": "bench",
                "kind": "memcached",
                "topology": {"servers": 8},
                "connection": {"servers": ["127.0.0.1:11211"]},
            },
            token,
        )
        dep_id = dep["id"]  # type: ignore[index]
        cfg = {"policy": "chisel", "params": {"split_keys": 4, "merge": 1, "elephant_threshold": 4096}}
        call(f"{url}/configs/{dep_id}/versions", "POST", {"config": cfg, "publish": False}, token)
        path, etag = f"/api/v1/configs/{dep_id}", f'"{dep_id}-1"'
        asyncio.run(load(port, path, token, etag, a.rate, a.warmup, a.connections))
        cpu0, self0 = server_cpu(server.pid), time.process_time()
        if a.wrk:
            res = run_wrk(f"http://127.0.0.1:{port}{path}", token, etag, a.seconds, a.connections, a.rate)
            res["server_cpu_us_per_request"] = round(
                (server_cpu(server.pid) - cpu0) / (float(res["achieved_rate"]) * a.seconds) * 1e6, 1  # type: ignore[arg-type]
            )
            res.update(date=time.strftime("%Y-%m-%d"), rate_target=a.rate, loadavg=os.getloadavg())
            print(json.dumps(res, indent=1))
            return 0
        lat, codes, wall = asyncio.run(load(port, path, token, etag, a.rate, a.seconds, a.connections))
        server_s, client_s = server_cpu(server.pid) - cpu0, time.process_time() - self0
    ms = [x * 1000 for x in lat]
    print(
        json.dumps(
            {
                "date": time.strftime("%Y-%m-%d"),
                "rate_target": a.rate,
                "requests": len(ms),
                "achieved_rate": round(len(ms) / wall, 1),
                "codes": codes,
                "connections": a.connections,
                "priority": -a.priority,
                "p50_ms": round(pct(ms, 0.50), 3),
                "p90_ms": round(pct(ms, 0.90), 3),
                "p99_ms": round(pct(ms, 0.99), 3),
                "p999_ms": round(pct(ms, 0.999), 3),
                "max_ms": round(max(ms), 3),
                "loadavg": os.getloadavg(),
                "server_cpu_us_per_request": round(server_s / len(ms) * 1e6, 1),
                "client_cpu_us_per_request": round(client_s / len(ms) * 1e6, 1),
            },
            indent=1,
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
