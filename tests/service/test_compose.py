"""docker-compose.yml structure (no Docker engine here): services, healthchecks, commands and settings are
real.
"""

from __future__ import annotations

import re
import zipfile
from pathlib import Path
from typing import Any

import yaml
from typer.testing import CliRunner

from tailtune.base.settings import Settings

ROOT = Path(__file__).resolve().parents[2]
VENV_BIN = ROOT / ".venv" / "bin"
SERVICES = {"api", "worker", "spark-master", "spark-worker", "mlflow", "postgres", "cassandra", "memcached"}


def _compose() -> dict[str, Any]:
    doc = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    assert isinstance(doc, dict)
    return doc


def test_services_healthchecks_and_dependencies() -> None:
    services = _compose()["services"]
    assert set(services) == SERVICES
    for name, svc in services.items():
        assert "test" in svc["healthcheck"], name
        for dep, cond in (svc.get("depends_on") or {}).items():
            assert dep in SERVICES and cond == {"condition": "service_healthy"}, (name, dep)
    assert set(services["worker"]["depends_on"]) >= {
        "postgres",
        "cassandra",
        "memcached",
        "mlflow",
        "spark-master",
    }
    assert set(services["api"]["depends_on"]) >= {"postgres"}


def test_every_setting_is_documented_in_operations() -> None:
    """docs/operations.md names every setting's variable: a field added to `Settings` alone fails here."""
    doc = (ROOT / "docs" / "operations.md").read_text()
    missing = [name for name in Settings.model_fields if f"TAILTUNE_{name.upper()}" not in doc]
    assert not missing, f"settings not in docs/operations.md: {missing}"


def test_every_tailtune_env_var_is_a_setting() -> None:
    fields = set(Settings.model_fields)
    seen = set()
    for svc in _compose()["services"].values():
        for key in svc.get("environment") or {}:
            if key.startswith("TAILTUNE_"):
                seen.add(key)
                assert key.removeprefix("TAILTUNE_").lower() in fields, key
    assert {
        "TAILTUNE_DATABASE_URL",
        "TAILTUNE_MLFLOW_TRACKING_URI",
        "TAILTUNE_OPTUNA_STORAGE",
        "TAILTUNE_SPARK_MASTER",
        "TAILTUNE_HOME",
    } <= seen


def test_every_command_exists_in_the_project() -> None:
    from tailtune.cli import app

    services = _compose()["services"]
    built = {n for n, s in services.items() if "build" in s}
    assert built == {"api", "worker", "spark-master", "spark-worker", "mlflow"}
    assert (ROOT / services["api"]["build"] / "Dockerfile").is_file()
    runner = CliRunner()
    for name in built:
        cmd = services[name]["command"]
        assert (VENV_BIN / cmd[0]).is_file(), (name, cmd[0])  # installed by `pip install .` in the image
        if cmd[0] == "tailtune":
            result = runner.invoke(app, [cmd[1], "--help"])
            assert result.exit_code == 0, (name, result.output)
            for opt in (a for a in cmd[2:] if a.startswith("--")):
                assert opt in result.output, (name, opt)
        if cmd[0] == "spark-class":
            import pyspark

            klass = cmd[1].replace(".", "/") + ".class"
            jars = list((Path(pyspark.__file__).parent / "jars").glob("spark-core_*.jar"))
            assert jars and any(klass in zipfile.ZipFile(j).namelist() for j in jars), klass
    mounted = [v.split(":")[0] for s in services.values() for v in s.get("volumes", []) if v.startswith("./")]
    assert mounted and all((ROOT / m).is_file() for m in mounted)


def test_healthcheck_urls_are_real_routes() -> None:
    from service.main import create_app

    paths = set(create_app().openapi()["paths"])
    text = (ROOT / "docker-compose.yml").read_text()
    for path in re.findall(r"127\.0\.0\.1:8000(/[a-z0-9/]+)", text):
        assert path in paths, path
