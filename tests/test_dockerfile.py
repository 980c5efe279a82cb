"""The image's Python steps (no Docker engine here): tailtune requires tailtune-client, which is not on PyPI, so the
Dockerfile and scripts/setup.sh install ./clients/python before the project; the Dockerfile's own pip steps, run
in order into a fresh venv, give a tailtune that simulates a sharded memcached pool.

What the slow test proves: the build stage's `pip install` commands of the project's own packages (`./clients/python`,
then `. "psycopg[binary]>=3.1"`), with the Dockerfile's arguments, on a copy of the checkout, build both packages
from their pyproject.toml (isolated builds, as in the image), resolve tailtune's declared requirements, install
the `tailtune` script, ship no test scaffolding, and `tailtune simulate --pool sharded` runs. What it does not:
the third-party requirements are not downloaded (the venv sees this environment's installed ones, tailtune and
tailtune-client left out, so pip resolves those two from what the steps install), the build backend comes from
PyPI; apt, rustup, the maturin build of kvsim (this environment's kvsim is used), the base image and the runtime
stage are not run.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sysconfig
import tomllib
import venv
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parents[1]
CLIENT = ROOT / "clients" / "python"
#: Not copied with the checkout: build outputs, environments, VCS data.
COPY_IGNORE = shutil.ignore_patterns(".git", ".venv", "target", "build", "*.egg-info", "__pycache__", ".tailtune",
                                     "figures")
#: Left out of the environment the fresh venv sees: the project's own packages (pip must resolve them from the
#: Dockerfile's steps) and the build tooling (the isolated builds bring their own).
HIDDEN = re.compile(r"^(__editable__|tailtune|pip-|setuptools|pkg_resources|_distutils_hack|distutils-precedence)",
                    re.I)


def _build_stage_pip_installs() -> list[list[str]]:
    """The argv of every `pip install` of the Dockerfile's build stage, in order."""
    text = (ROOT / "Dockerfile").read_text()
    lines = re.sub(r"\\\n", " ", text).splitlines()
    stages = [i for i, line in enumerate(lines) if line.startswith("FROM ")]
    assert len(stages) == 2, "the Dockerfile has a build stage and a runtime stage"
    out = []
    for line in lines[stages[0] : stages[1]]:
        if not line.startswith("RUN "):
            continue
        for part in line.removeprefix("RUN ").split("&&"):
            argv = shlex.split(part)
            if len(argv) > 1 and argv[0].endswith("/pip") and argv[1] == "install":
                out.append(argv)
    return out


def _targets(argv: list[str]) -> list[str]:
    return [a for a in argv[2:] if not a.startswith("-")]


def test_dockerfile_and_setup_install_the_client_before_tailtune() -> None:
    installs = [_targets(argv) for argv in _build_stage_pip_installs()]
    client = [i for i, t in enumerate(installs) if "./clients/python" in t]
    project = [i for i, t in enumerate(installs) if "." in t]
    assert len(client) == len(project) == 1 and client[0] < project[0], installs
    setup = (ROOT / "scripts" / "setup.sh").read_text()
    assert setup.index('pip install -q --no-compile -e "clients/python[cassandra]"') < setup.index(
        'pip install -q --no-compile -e ".[dev]"'
    )


def test_tailtune_declares_the_client_at_its_version() -> None:
    deps = [Requirement(d) for d in tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]]
    client = tomllib.loads((CLIENT / "pyproject.toml").read_text())["project"]
    declared = [r for r in deps if r.name == client["name"]]
    assert len(declared) == 1 and str(declared[0].specifier) == f"=={client['version']}"


def _venv_seeing_this_environment(tmp_path: Path) -> Path:
    """A fresh venv (no pip, no setuptools of its own) whose site sees this environment's installed distributions
    through a folder of links, tailtune and tailtune-client left out."""
    farm = tmp_path / "site"
    farm.mkdir()
    here = Path(sysconfig.get_paths()["purelib"])
    for entry in here.iterdir():
        if not HIDDEN.match(entry.name):
            (farm / entry.name).symlink_to(entry)
    assert (farm / "pip").exists() and not (farm / "tailtune_client").exists()
    env_dir = tmp_path / "venv"
    venv.EnvBuilder(with_pip=False).create(env_dir)
    site = Path(subprocess.run([str(env_dir / "bin" / "python"), "-c", "import sysconfig; "
                                "print(sysconfig.get_paths()['purelib'])"],
                               capture_output=True, text=True, check=True).stdout.strip())
    # site.addsitedir: the folder's own .pth files (kvsim's) are read too
    (site / "zz_this_environment.pth").write_text(f"import site; site.addsitedir({str(farm)!r})\n")
    return env_dir


def _sharded_trace(path: Path) -> Path:
    rid, ts, keys = [], [], []
    for i in range(60):
        n = 1 + (i % 3) * 40
        rid += [i] * n
        ts += [i * 1e-3] * n
        keys += [f"k{i}-{j}" for j in range(n)]
    pq.write_table(pa.table({"request_id": pa.array(rid, pa.int64()), "ts": pa.array(ts, pa.float64()),
                             "key": pa.array(keys, pa.string()),
                             "value_size": pa.array([100] * len(keys), pa.int64())}), path)
    return path


@pytest.mark.slow
def test_dockerfile_pip_steps_give_a_tailtune_that_simulates_a_sharded_pool(tmp_path: Path) -> None:
    src = tmp_path / "src"  # the image's WORKDIR /src after `COPY . .`
    shutil.copytree(ROOT, src, ignore=COPY_IGNORE, symlinks=True)
    env_dir = _venv_seeing_this_environment(tmp_path)
    python = env_dir / "bin" / "python"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "VIRTUAL_ENV", "TAILTUNE_"))}
    env |= {"PIP_DISABLE_PIP_VERSION_CHECK": "1", "TAILTUNE_HOME": str(tmp_path / "home")}
    steps = [argv for argv in _build_stage_pip_installs() if {".", "./clients/python"} & set(_targets(argv))]
    for argv in steps:
        assert argv[0] == "/opt/venv/bin/pip", argv
        done = subprocess.run([str(python), "-m", "pip", *argv[1:]], cwd=src, env=env, capture_output=True,
                              text=True, timeout=600)
        assert done.returncode == 0, (argv, done.stdout[-2000:], done.stderr[-3000:])

    trace = _sharded_trace(tmp_path / "t.parquet")
    run = subprocess.run([str(env_dir / "bin" / "tailtune"), "simulate", "--trace", str(trace), "--policy",
                          "batching", "--pool", "sharded", "--json"], cwd=tmp_path, env=env, capture_output=True,
                         text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    out = json.loads(run.stdout)
    assert out["requests"] == 60 and out["ops"] > 60  # the 41- and 81-key requests touch both servers

    inspect = (
        "import json; from importlib import metadata as m; d = m.distribution('tailtune'); "
        "print(json.dumps({'at': str(d.locate_file('')), 'requires': m.requires('tailtune'), "
        "'files': [str(f) for f in d.files or []]}))"
    )
    seen = json.loads(subprocess.run([str(python), "-c", inspect], cwd=tmp_path, env=env, capture_output=True,
                                     text=True, check=True).stdout)
    assert Path(seen["at"]).resolve().is_relative_to(env_dir.resolve())  # built and installed, not editable
    assert any(Requirement(r).name == "tailtune-client" for r in seen["requires"]), seen["requires"]
    tops = {f.split("/")[0] for f in seen["files"] if f.endswith(".py")}
    layers = {"tailtune", "jobs", "service", "kinds", "control", "tuner", "analysis", "simulation", "ingest", "base"}
    assert tops == layers, tops
    assert not [f for f in seen["files"] if "/testing/" in f or f.startswith("tests/")]
