"""The client package installs alone: a fresh venv, `pip install clients/python`, and the installed set is exactly
tailtune-client, pymemcache, httpx and httpx's own dependencies — no numpy, Spark, MLflow or FastAPI."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import venv
from pathlib import Path
from typing import Any

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
CLIENT = REPO_ROOT / "clients" / "python"
FORBIDDEN = {"numpy", "pandas", "pyspark", "mlflow", "fastapi", "pydantic", "tailtune", "cassandra-driver"}

# Run inside the new venv: every installed distribution, and the closure of httpx's requirements (markers
# evaluated for this interpreter, extras not taken).
_INSPECT = r"""
import json, re
from importlib import metadata
from pip._vendor.packaging.requirements import Requirement

def norm(name):
    return re.sub(r"[-_.]+", "-", name).lower()

installed = {norm(d.metadata["Name"]) for d in metadata.distributions()}
closure, todo = set(), ["httpx"]
while todo:
    name = todo.pop()
    if name in closure:
        continue
    closure.add(name)
    for text in metadata.requires(name) or []:
        req = Requirement(text)
        if req.marker is None or req.marker.evaluate({"extra": ""}):
            todo.append(norm(req.name))
import tailtune_client.memcached as m
from pathlib import Path
typed = (Path(m.__file__).parent / "py.typed").is_file()
print(json.dumps({"installed": sorted(installed), "httpx": sorted(closure), "client": m.Client.__name__,
                  "typed": typed}))
"""


def _inspect(python: Path) -> dict[str, Any]:
    out = subprocess.run([str(python), "-c", _INSPECT], capture_output=True, text=True, check=True, timeout=60)
    result: dict[str, Any] = json.loads(out.stdout)
    return result


@pytest.mark.slow
def test_fresh_venv_gets_exactly_the_client_and_its_two_dependencies(tmp_path: Path) -> None:
    env_dir = tmp_path / "venv"
    venv.EnvBuilder(with_pip=True).create(env_dir)
    python = env_dir / "bin" / "python"
    env = {**os.environ, "PIP_DISABLE_PIP_VERSION_CHECK": "1"}
    env.pop("PYTHONPATH", None)
    baseline = set(subprocess.run(
        [str(python), "-c", "from importlib import metadata; import re; "
         "print('\\n'.join(re.sub(r'[-_.]+', '-', d.metadata['Name']).lower() for d in metadata.distributions()))"],
        capture_output=True, text=True, check=True, env=env, timeout=60,
    ).stdout.split())
    # a copy, so the build leaves nothing (build/, *.egg-info) in the checkout
    source = tmp_path / "client"
    shutil.copytree(CLIENT, source, ignore=shutil.ignore_patterns("build", "*.egg-info", "__pycache__", "tests"))
    subprocess.run(
        [str(python), "-m", "pip", "install", "-q", str(source)],
        check=True, env=env, timeout=300, cwd=tmp_path, capture_output=True,
    )
    seen = _inspect(python)
    added = set(seen["installed"]) - baseline
    assert added == {"tailtune-client", "pymemcache"} | set(seen["httpx"]), sorted(added)
    assert {"httpx", "httpcore", "anyio", "idna", "certifi", "h11"} <= added
    assert not added & FORBIDDEN
    assert seen["client"] == "Client" and seen["typed"]
