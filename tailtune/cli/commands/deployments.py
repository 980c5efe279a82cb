"""`tailtune deployments [list] | show NAME | create FILE | set NAME ...`: the deployments in the metadata DB
(`TAILTUNE_DATABASE_URL`), with the same checks as `/api/v1/deployments`."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

__all__ = ["register"]

_app = typer.Typer(
    help="List, show, register and change deployments (server, driver, tables) in the metadata DB.",
    no_args_is_help=False,
)

_JSON = typer.Option("--json", help="Print JSON.")


def _db() -> Any:
    from base.settings import get_settings
    from control.db import database_for

    return database_for(get_settings().resolved_database_url)


def _fail(exc: Exception, where: str) -> Exception:
    """A control-plane or validation error as the CLI's one-line error about the input `where` (2: bad input,
    3: not found)."""
    from pydantic import ValidationError

    from base.errors import BadInputError, InputProblem
    from control.errors import ServiceError

    if isinstance(exc, ValidationError):
        problems = [
            InputProblem(where, None, ".".join(map(str, e["loc"])) or None, e["msg"].removeprefix("Value error, "))
            for e in exc.errors()
        ]
        return BadInputError(problems)
    if isinstance(exc, ServiceError):
        return exc.at(where)
    if isinstance(exc, ValueError):  # not JSON
        return BadInputError([InputProblem(where, None, None, str(exc))])
    return exc


def _out(row: Any) -> dict[str, Any]:
    from control.deployment_spec import DeploymentOut

    return DeploymentOut.of(row).model_dump(mode="json")


def _print(doc: dict[str, Any], as_json: bool) -> None:
    from base.console import out_console, print_json

    if as_json:
        print_json(doc)
        return
    for key in ("id", "name", "kind", "server", "driver", "tables", "connection", "publish_status", "publish_error"):
        value = doc.get(key)
        if key == "tables":
            value = ", ".join(value or []) or "(none)"
        out_console.print(f"{key:15} {value}", highlight=False, markup=False)


@_app.callback(invoke_without_command=True)
def _default(ctx: typer.Context) -> None:
    if ctx.invoked_subcommand is None:
        list_deployments(as_json=False)


@_app.command("list")
def list_deployments(as_json: Annotated[bool, _JSON] = False) -> None:
    """All deployments, by id."""
    from rich.table import Table

    from base.console import out_console, print_json
    from control import deployments

    with _db().session() as s:
        docs = [_out(r) for r in deployments.list_all(s, limit=10_000)]
    if as_json:
        print_json(docs)
        return
    table = Table("id", "name", "kind", "server", "driver", "tables", "publish")
    for d in docs:
        table.add_row(
            str(d["id"]), d["name"], d["kind"], d["server"], d["driver"], ", ".join(d["tables"]), d["publish_status"]
        )
    out_console.print(table)


@_app.command("show")
def show(name: str, as_json: Annotated[bool, _JSON] = False) -> None:
    """One deployment by name, and its model: each input's value, source and how it was found."""
    from base.console import out_console
    from control import deployments
    from control.model_text import value_line
    from control.tune_request import deployment_model, deployment_record

    try:
        with _db().session() as s:
            row = deployments.get_by_name(s, name)
            doc = _out(row)
            model = deployment_model(deployment_record(row), timestamps=True)
    except Exception as exc:
        raise _fail(exc, "deployment") from None
    _print(doc, as_json)
    if as_json:
        return
    out_console.print("model (what a tune simulates: input, value, source, how)", highlight=False, markup=False)
    for key, source in model.sources.items():
        entry = model.inputs.get(key) or {}
        how = f": {entry['how']}" if entry.get("how") else ""
        out_console.print(f"  {key:15} {value_line(entry.get('value'))} ({source}{how})", highlight=False,
                          markup=False, soft_wrap=True)
    for note in model.notes:
        out_console.print(f"  note: {note}", highlight=False, markup=False, soft_wrap=True)


@_app.command("create")
def create(
    file: Annotated[Path, typer.Argument(help="A JSON body as for POST /api/v1/deployments.", exists=True)],
    as_json: Annotated[bool, _JSON] = False,
) -> None:
    """Register a deployment from a JSON file (name, kind, topology, connection, server, driver, tables, ...)."""
    import json

    from base.settings import get_settings
    from control import deployments
    from control.deployment_spec import DeploymentCreate
    from control.tokens import CLI

    try:
        body = DeploymentCreate.model_validate(json.loads(file.read_text()))
        with _db().session() as s:
            doc = _out(deployments.create(s, get_settings(), body, CLI))
    except Exception as exc:  # JSON, validation and control-plane errors
        raise _fail(exc, str(file)) from None
    _print(doc, as_json)


@_app.command("set")
def set_fields(
    name: str,
    server: Annotated[str | None, typer.Option("--server", help="stock | rein-patched")] = None,
    driver: Annotated[str | None, typer.Option("--driver", help="java4 | python")] = None,
    table: Annotated[
        list[str] | None, typer.Option("--table", help="keyspace.table (repeat; replaces the list)")
    ] = None,
    no_tables: Annotated[bool, typer.Option("--no-tables", help="Clear the tables.")] = False,
    as_json: Annotated[bool, _JSON] = False,
) -> None:
    """Change a Cassandra deployment's server, driver or tables."""
    from base.settings import get_settings
    from control import deployments
    from control.deployment_spec import DeploymentPatch
    from control.tokens import CLI

    fields: dict[str, Any] = {}
    if server is not None:
        fields["server"] = server
    if driver is not None:
        fields["driver"] = driver
    if table:
        fields["tables"] = list(table)
    elif no_tables:
        fields["tables"] = []
    try:
        body = DeploymentPatch.model_validate(fields)
        with _db().session() as s:
            dep = deployments.get_by_name(s, name)
            doc = _out(deployments.patch(s, get_settings(), dep.id, body, CLI))
    except Exception as exc:
        raise _fail(exc, "deployment") from None
    _print(doc, as_json)


@_app.command("discover")
def discover(
    name: str,
    profile_servers: Annotated[
        bool,
        typer.Option(
            "--profile-servers",
            help="memcached: also profile the first server on scratch keys (written, then deleted) for the "
            "client_overhead input.",
        ),
    ] = False,
    as_json: Annotated[bool, _JSON] = False,
) -> None:
    """Read the deployment's live system (nodes, tokens, replication, concurrent_reads, tables' speculative_retry,
    read latencies; memcached's threads) with its own connection, and store it as the deployment's model."""
    from rich.table import Table

    from base.console import out_console, print_json
    from base.settings import get_settings
    from control import deployments
    from control.discovery import discover_deployment
    from control.errors import ServiceError

    settings = get_settings()
    db = _db()
    log = (lambda _: None) if as_json else (lambda line: out_console.print(line, highlight=False, markup=False))
    try:
        with db.session() as s:
            dep_id = deployments.get_by_name(s, name).id
        result = discover_deployment(db, settings, dep_id, profile_servers=profile_servers, log=log)
    except ServiceError as exc:  # not found (or deleted meanwhile)
        raise _fail(exc, "deployment") from None
    if as_json:
        print_json(result)
        return
    table = Table("input", "value", "how")
    for key, entry in result["inputs"].items():
        value = entry["value"]
        if key == "ring":
            value = f"{len(value['nodes'])} node(s), {value['strategy']['class']}"
        table.add_row(key, str(value), str(entry["how"]))
    out_console.print(table)
    if result["current_config"] is not None:
        out_console.print(f"current_config set to {result['current_config']}", highlight=False, markup=False)


@_app.command("calibrate")
def calibrate(name: str, as_json: Annotated[bool, _JSON] = False) -> None:
    """Measure the deployment's service time and network (Cassandra: client-timed requests at low load) or client
    overhead (memcached: the profiler on scratch keys) and store them as its calibrated model inputs."""
    from rich.table import Table

    from base.console import out_console, print_json
    from base.settings import get_settings
    from control import deployments
    from control.calibration import calibrate_deployment
    from control.errors import ServiceError
    from control.model_text import value_line

    db = _db()
    log = (lambda _: None) if as_json else (lambda line: out_console.print(line, highlight=False, markup=False))
    try:
        with db.session() as s:
            dep_id = deployments.get_by_name(s, name).id
        result = calibrate_deployment(db, get_settings(), dep_id, log=log)
    except ServiceError as exc:
        raise _fail(exc, "deployment") from None
    if as_json:
        print_json(result)
        return
    table = Table("input", "value", "95 % interval", "how")
    for key, entry in result["inputs"].items():
        interval = entry.get("uncertainty")
        table.add_row(key, value_line(entry["value"]), "" if interval is None else value_line(interval),
                      str(entry["how"]))
    out_console.print(table)


def register(app: typer.Typer) -> None:
    app.add_typer(_app, name="deployments")
