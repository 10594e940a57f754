"""``d2kgrade annotate export | import``: blind packs for human graders, and their answers back as ratings."""

from __future__ import annotations

from pathlib import Path

import typer

from d2kgrade.cli._common import SuiteOption, err_console, open_suite

annotate_app = typer.Typer(help="Blind annotation packs for people, and their ratings back.", no_args_is_help=True)


@annotate_app.command("export")
def export(
    run_dirs: list[Path] = typer.Argument(..., help="Run directories whose kernels (and notes) are to be rated."),
    raters: int = typer.Option(..., "--raters", help="Number of annotators."),
    overlap: float = typer.Option(0.25, "--overlap", help="Share of items every annotator rates (for agreement)."),
    seed: int = typer.Option(None, "--seed", help="Seed of ids, assignment and order (default: random; recorded "
                                                  "in the key)."),
    kind: str = typer.Option("code", "--kind", help="What to rate: code | proposal | both."),
    out: Path = typer.Option(..., "--out", help="New folder for the pack."),
    suite: Path = SuiteOption,
) -> None:
    """Write a blind pack: per annotator a folder of renamed files, a CSV template and Label Studio projects;
    the key (blind id -> episode) goes to OUT/key.json, apart from the annotators' folders."""
    from d2kgrade.annotate.pack import export_pack
    from d2kgrade.errors import UserError

    kinds = {"code": ("code",), "proposal": ("proposal",), "both": ("code", "proposal")}.get(kind)
    if kinds is None:
        raise UserError(f"--kind must be code, proposal or both, got {kind!r}")
    s = open_suite(suite)
    key = export_pack(list(run_dirs), out, None, raters=raters, overlap=overlap, seed=seed, kinds=kinds,
                      rubric_loader=s.load_rubric)
    err_console.print(f"wrote the pack to {out}; the key is {key} (keep it, never send it)")


@annotate_app.command("import")
def import_(
    files: list[Path] = typer.Argument(..., help="Filled ratings_template.csv files and Label Studio JSON / "
                                                 "JSON-MIN exports."),
    key: Path = typer.Option(None, "--key", help="The pack's key.json: maps blind ids back to episode ids."),
    out: Path = typer.Option(..., "--out", help="Long ratings table to write (CSV)."),
) -> None:
    """Read people's answers into the long table (item_id, property_id, rater_id, rater_kind, value, evidence)."""
    from d2kgrade.agreement.ratings import write_ratings
    from d2kgrade.annotate.importer import import_ratings

    df = import_ratings(list(files), key)
    write_ratings(df, out)
    raters = sorted(set(df["rater_id"]))
    err_console.print(f"wrote {len(df)} ratings by {len(raters)} rater(s) ({', '.join(raters)}) to {out}"
                      + ("" if key else "; item ids are blind ids (pass --key to join them with the judges')"))


def register(app: typer.Typer) -> None:
    app.add_typer(annotate_app, name="annotate")
