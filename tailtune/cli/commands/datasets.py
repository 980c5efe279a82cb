"""`tailtune datasets [list] | show ID | delete ID`: the stored datasets."""

from __future__ import annotations

from typing import Annotated

import typer

__all__ = ["register"]

_app = typer.Typer(help="List, show and delete stored datasets.", no_args_is_help=False)

_JSON = typer.Option("--json", help="Print JSON.")


@_app.callback(invoke_without_command=True)
def _default(ctx: typer.Context) -> None:
    if ctx.invoked_subcommand is None:
        list_datasets(as_json=False)


@_app.command("list")
def list_datasets(as_json: Annotated[bool, _JSON] = False) -> None:
    """All datasets, oldest first."""
    from rich.table import Table

    from base.console import out_console, print_json
    from base.settings import get_settings
    from ingest.store import DatasetStore

    infos = DatasetStore(get_settings()).list()
    if as_json:
        print_json(
            [
                {
                    "id": i.id,
                    "name": i.name,
                    "format": i.manifest["source"]["format"],
                    "rows": i.manifest["rows"],
                    "requests": i.manifest["requests"],
                    "created_at": i.manifest["created_at"],
                }
                for i in infos
            ]
        )
        return
    if not infos:
        out_console.print("no datasets yet: add one with `tailtune ingest FILE`")
        return
    table = Table("id", "name", "format", "rows", "requests", "created")
    for i in infos:
        m = i.manifest
        table.add_row(i.id, i.name, m["source"]["format"], f"{m['rows']:,}", f"{m['requests']:,}", m["created_at"])
    out_console.print(table)


@_app.command("show")
def show(
    dataset: Annotated[str, typer.Argument(help="Dataset id, unique id prefix, or name.")],
    as_json: Annotated[bool, _JSON] = False,
) -> None:
    """One dataset's summary (--json: its whole manifest)."""
    from base.console import print_json
    from base.settings import get_settings
    from ingest.store import DatasetStore
    from tailtune.cli.commands.ingest import dataset_summary, print_summary

    info = DatasetStore(get_settings()).get(dataset)
    if as_json:
        print_json(info.manifest)
        return
    print_summary(dataset_summary(info), title=f"dataset {info.path}")


@_app.command("delete")
def delete(
    dataset: Annotated[str, typer.Argument(help="Dataset id, unique id prefix, or name.")],
    as_json: Annotated[bool, _JSON] = False,
) -> None:
    """Delete a dataset (its directory under TAILTUNE_HOME/datasets)."""
    from base.console import out_console, print_json
    from base.settings import get_settings
    from ingest.store import DatasetStore

    info = DatasetStore(get_settings()).delete(dataset)
    if as_json:
        print_json({"deleted": info.id, "name": info.name})
        return
    out_console.print(f"deleted dataset {info.id} ({info.name})")


def register(app: typer.Typer) -> None:
    app.add_typer(_app, name="datasets")
