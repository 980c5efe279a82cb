"""`tailtune capture memcached` on a real memcached: known requests in, exactly those requests out of the ingest;
lost lines counted; Ctrl-C keeps the file.

Each test starts its own memcached (`tests/servers/memcached_server.py`), so its counters and log ids start at zero.
Waits are on states (memcached's logger stats, the capture's progress, a line in the file), never on delays; the
grouping of requests sent 0.3 s apart is checked with a 100 ms gap, far from any stall inside one command.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from base.settings import Settings
from ingest.pipeline import ingest_file
from tests.servers.memcached_server import running_memcached
from validation.memcached_capture import LiveCapture, compare, main, plan, populate, run_client, shared_sizes, stats


@pytest.fixture(autouse=True)
def _memcached_installed(memcached_server: object) -> None:
    """The folder's fixture skips these tests when memcached is not installed (each test starts its own)."""

PAUSE_S = 0.3
GAP_US = 100_000


def test_two_clients_at_once_give_exactly_their_requests(tmp_path: Path, settings: Settings) -> None:
    with running_memcached(threads=2) as node:
        populate(node.host, node.port, shared_sizes())
        sent = [plan(client, 8, seed=3, sets_every=4) for client in range(2)]  # gets, and sets now and then
        live = LiveCapture(node.host, node.port, tmp_path / "two.watch", gap_us=GAP_US).start()
        both = threading.Barrier(2)
        clients = [
            threading.Thread(target=run_client, args=(node.host, node.port, ops), kwargs={"pause_s": PAUSE_S,
                                                                                       "start": both})
            for ops in sent
        ]
        for t in clients:
            t.start()
        for t in clients:
            t.join()
        live.drain()
        result = live.stop()
    gets = [op for ops in sent for op in ops if op[0] == "get"]
    assert (result.requests, result.fetches, result.lost) == (len(gets), sum(len(op[1]) for op in gets), 0)
    assert result.stores == sum(op[0] == "set" for ops in sent for op in ops) > 0
    info = ingest_file(tmp_path / "two.watch", watch_gap_us=GAP_US, settings=settings)
    assert info.manifest["source"]["format"] == "memcached-watch"
    report = compare("two clients", GAP_US, sent, info.read_table())
    assert report.keys_exact and report.sizes_exact and report.unmatched_clients == 0
    assert report.exact == report.true_requests == report.captured_requests == len(gets)
    # the dataset: those requests' keys, with the sizes the server held (null for a miss), nothing else
    table = info.read_table()
    want = sorted((k, s) for op in gets for k, s in zip(op[1], op[2], strict=True))
    got = sorted(zip(table.column("key").to_pylist(), table.column("value_size").to_pylist(), strict=True),
                 key=lambda r: (r[0], -1 if r[1] is None else r[1]))
    assert got == sorted(want, key=lambda r: (r[0], -1 if r[1] is None else r[1]))
    assert any(k.startswith("user:") for k, _ in want)  # memcached URI-encodes ':'; the dataset has the real key
    assert any(s is None for _, s in want)


def test_pipelined_client_accuracy_is_reported(capsys: pytest.CaptureFixture[str]) -> None:
    # the validation script, tiny: the keys and sizes are exact whatever the grouping; the grouping is measured
    main(["--requests", "40", "--modes", "pipelined", "--gaps", "3", "100000", "--depth", "10"])
    out = capsys.readouterr().out
    rows = [line.split("|") for line in out.splitlines() if line.startswith("| pipelined |")]
    assert [r[2].strip() for r in rows] == ["3", "100000"]
    for r in rows:
        sent, found, exact, merged, split = (r[3].strip(), r[4].strip(), r[5].strip(), r[6].strip(), r[7].strip())
        assert sent == "40" and r[8].strip() == "exact" and r[9].strip() == "0"
        assert exact.endswith("%") and 0.0 <= float(exact[:-1]) <= 100.0
        assert int(found) == int(sent) - int(merged) + int(split)
    # with a gap far above the pause between pipelined commands, requests of one write merge
    assert int(rows[1][6].strip()) > 0


def test_lost_lines_are_counted_not_hidden(tmp_path: Path, settings: Settings) -> None:
    keys = [f"k{i}" for i in range(50)]
    with running_memcached(threads=2) as node:
        populate(node.host, node.port, {k: 10 for k in keys})
        live = LiveCapture(node.host, node.port, tmp_path / "lossy.watch").start()
        live.hold()  # the capture stops reading: memcached's buffers for it fill up
        assert live.held.wait(30)
        logged = 0
        with socket.create_connection((node.host, node.port)) as client, socket.create_connection(
            (node.host, node.port)
        ) as probe:
            batch = b"".join(b"get " + " ".join(keys).encode() + b"\r\n" for _ in range(200))
            for _ in range(500):  # until memcached says it skipped lines for the watcher
                client.sendall(batch)
                buf = b""
                while buf.count(b"END\r\n") < 200:
                    buf += client.recv(1 << 20)
                logged += 200 * len(keys)
                if int(stats(probe)["log_watcher_skipped"]) > 0:
                    break
            live.release()
            client.sendall(b"get k0\r\n")  # memcached reports the skips before its next line
            while not client.recv(1 << 16).endswith(b"END\r\n"):
                pass
            logged += 1
            live.drain()
        result = live.stop()
    assert result.lost > 0 and not result.complete
    # every line memcached logged is in the file or counted as lost
    assert result.fetches + result.lost == logged
    info = ingest_file(tmp_path / "lossy.watch", settings=settings)
    assert info.manifest["rows"] == result.fetches
    assert any(n.startswith(f"LOST: the watch lost {result.lost:,} line(s)") for n in info.manifest["notes"])


def _cli(args: list[str], home: Path) -> subprocess.Popen[str]:
    env = {**os.environ, "TAILTUNE_HOME": str(home), "COLUMNS": "200"}
    return subprocess.Popen(
        [sys.executable, "-m", "tailtune", *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env
    )


def test_ctrl_c_stops_the_capture_and_keeps_the_file(tmp_path: Path, settings: Settings) -> None:
    out = tmp_path / "cli.watch"
    with running_memcached() as node:
        populate(node.host, node.port, {"a": 3, "b": 5})
        proc = _cli(["capture", "memcached", node.address, "--out", str(out), "--json"], tmp_path / "home")
        assert proc.stderr is not None
        line = proc.stderr.readline()
        assert line.startswith(f"capturing {node.address} until Ctrl-C"), line
        with socket.create_connection((node.host, node.port)) as c:
            c.sendall(b"get a b\r\n")
            while not c.recv(1024).endswith(b"END\r\n"):
                pass
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:  # the hidden file holds the get's lines: the capture has seen them
            if any(b"key=b " in p.read_bytes() for p in tmp_path.glob(".cli.watch.tmp-*")):
                break
            time.sleep(0.05)
        proc.send_signal(signal.SIGINT)
        stdout, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 0, stderr
    summary = json.loads(stdout)
    assert (summary["stopped"], summary["fetches"], summary["requests"], summary["lost"]) == ("interrupted", 2, 1, 0)
    assert summary["complete"] is True and summary["out"] == str(out)
    assert f"next: tailtune ingest {out}" in stderr
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".cli")) == []
    info = ingest_file(out, settings=settings)
    assert info.read_table().select(["request_id", "key", "value_size"]).to_pylist() == [
        {"request_id": 0, "key": "a", "value_size": 3},
        {"request_id": 0, "key": "b", "value_size": 5},
    ]


def test_capture_for_a_duration(tmp_path: Path, cli) -> None:
    with running_memcached() as node:
        r = cli("capture", "memcached", node.address, "--out", str(tmp_path / "d.watch"), "--duration", "0.3",
                "--json")
    assert r.exit_code == 0, r.stderr
    summary = json.loads(r.stdout)
    assert (summary["stopped"], summary["lines"], summary["requests"]) == ("duration", 0, 0)
    assert summary["seconds"] >= 0.3
    assert (tmp_path / "d.watch").read_text().startswith(f"# tailtune capture memcached {node.address} started ")


def test_capture_errors_are_one_line(tmp_path: Path, cli) -> None:
    out = tmp_path / "x.watch"
    r = cli("capture", "memcached", "127.0.0.1:1", "--out", str(out))
    assert r.exit_code == 1 and r.stderr.startswith("error: memcached 127.0.0.1:1: cannot connect:")
    r = cli("capture", "memcached", "nowhere", "--out", str(out))
    assert r.exit_code == 2 and "field 'server': expected HOST:PORT, got 'nowhere'" in r.stderr
    r = cli("capture", "memcached", "127.0.0.1:1", "--out", str(out), "--duration", "0")
    assert r.exit_code == 2 and "--duration must be > 0, got 0.0" in r.stderr
    assert [p.name for p in tmp_path.iterdir() if "x.watch" in p.name] == []  # nothing half-written
