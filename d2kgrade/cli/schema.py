"""``d2kgrade schema export``: the JSON Schemas of the formats."""

from __future__ import annotations

import json
from pathlib import Path

import typer

from d2kgrade.cli._common import err_console

schema_app = typer.Typer(help="Export the formats as JSON Schema.", no_args_is_help=True)


@schema_app.command("export")
def export(out: Path = typer.Option(Path("schemas"), "--out", help="Folder to write <name>.schema.json into.")) -> None:
    """Write one JSON Schema per format (task, rubric, and the records of later modules)."""
    from d2kgrade.io import atomic_write_text
    from d2kgrade.schema import exported_models

    from d2kgrade.errors import UserError

    for name, model in exported_models().items():
        path = out / f"{name}.schema.json"
        try:
            atomic_write_text(path, json.dumps(model.model_json_schema(), indent=2) + "\n")
        except OSError as exc:
            raise UserError(f"{out}: cannot write the schemas there ({exc.strerror})") from None
        err_console.print(f"wrote {path}")


def register(app: typer.Typer) -> None:
    app.add_typer(schema_app, name="schema")
