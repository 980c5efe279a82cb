"""`tailtune serve`: run the REST API (uvicorn); `--create-token SCOPE` makes an API token instead."""

from __future__ import annotations

from typing import Annotated

import typer

__all__ = ["register"]


def serve(
    host: Annotated[
        str | None, typer.Option("--host", help="Bind address (default: TAILTUNE_API_HOST).")
    ] = None,
    port: Annotated[int | None, typer.Option("--port", help="Port (default: TAILTUNE_API_PORT).")] = None,
    create_token: Annotated[
        str | None,
        typer.Option(
            "--create-token",
            help="Create an API token of scope read|write|report|admin, print it, exit (admin: also the "
            "deployments' admin-only attributes, docs/operations.md § Security).",
        ),
    ] = None,
    deployment: Annotated[
        str | None,
        typer.Option("--deployment", help="With --create-token report: the deployments NAME[,NAME] it reports for."),
    ] = None,
    token_name: Annotated[str, typer.Option("--token-name", help="Label of the created token.")] = "cli",
    as_json: Annotated[bool, typer.Option("--json", help="With --create-token: print JSON.")] = False,
    access_log: Annotated[
        bool, typer.Option("--access-log", help="Log every request (costs CPU per request).")
    ] = False,
) -> None:
    """Run the API (migrating the metadata DB first). Tokens are stored hashed; the token is shown once."""
    from base.console import out_console, print_json
    from base.errors import BadInputError
    from base.settings import get_settings

    settings = get_settings()
    if create_token is not None:
        from control.db import database_for
        from control.tokens import SCOPES
        from control.tokens import create_token as make

        if create_token not in SCOPES:
            raise BadInputError.single("command line", f"must be one of {', '.join(SCOPES)}", field="create-token")
        if create_token == "report" and deployment is None:
            raise BadInputError.single(
                "command line", "a report token is bound to the deployments it reports for: --deployment NAME[,NAME]",
                field="deployment")
        names = None if deployment is None else [n.strip() for n in deployment.split(",")]
        token = make(database_for(settings.resolved_database_url), token_name, create_token, names)
        if as_json:
            shown: dict[str, object] = {"token": token, "scope": create_token, "name": token_name}
            if names is not None:
                shown["deployments"] = sorted(set(names))
            print_json(shown)
        else:
            out_console.print(token, highlight=False)
        return
    import uvicorn

    from control.db import database_for
    from control.redact import install_log_redaction
    from control.scratch import claim_scratch, sweep_orphan_uploads
    from service.server import server_config, start_metrics_port

    db = database_for(settings.resolved_database_url)
    claim_scratch(settings, "api")  # this process's scratch; sweeps what killed processes left behind
    sweep_orphan_uploads(settings, db)
    # the API's HTTP protocol (limits and JSON errors on what uvicorn answers itself); this configures logging:
    # the formatters are wrapped next, so no credentials reach the log
    config = server_config(settings, host=host, port=port, access_log=access_log)
    install_log_redaction("uvicorn", "uvicorn.error", "uvicorn.access")
    start_metrics_port(settings)  # with TAILTUNE_METRICS_PORT: /metrics there (a daemon thread), not on the API
    uvicorn.Server(config).run()


def register(app: typer.Typer) -> None:
    app.command("serve")(serve)
