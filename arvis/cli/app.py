"""The ``arvis`` command."""

from __future__ import annotations

import logging
import sys
from typing import Annotated

import typer

from arvis import __version__
from arvis.cli import evidence, operators, runlist, runs, serve, serveturn, turn
from arvis.cli.keys import keys_app
from arvis.cli.policy import policy_app
from arvis.cli.recover import recover

app = typer.Typer(
    name="arvis",
    help="ARVIS: durable effect governance for AI agents.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
serve.register(app)
app.command("serve-turn")(serveturn.serve_turn)
keys_app.add_typer(evidence.signing_app, name="signing")
app.add_typer(keys_app, name="keys")
app.command("export")(evidence.export)
app.add_typer(policy_app, name="policy")
runs.register(app)
app.command("runs")(runlist.runs)
operators.register(app)
app.command("recover")(recover)
app.command("turn")(turn.turn)


def _version_callback(value: bool) -> None:
    if value:
        typer.echo(f"arvis {__version__}")
        raise typer.Exit()


@app.callback()
def main_options(
    version: Annotated[
        bool,
        typer.Option(
            "--version", callback=_version_callback, is_eager=True, help="Print the version."
        ),
    ] = False,
) -> None:
    """ARVIS: durable effect governance for AI agents."""


def main() -> None:
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    app()
