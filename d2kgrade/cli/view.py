"""``d2kgrade view RUN_DIR... [--out DIR] [--open] [--serve]``: a static site to browse runs episode by episode."""

from __future__ import annotations

from pathlib import Path

import typer

from d2kgrade.cli._common import SuiteOption, err_console


def view(
    run_dirs: list[Path] = typer.Argument(..., help="Run directories (results.sqlite, episodes/, grades.jsonl)."),
    out: Path = typer.Option(None, "--out", help="Site folder (default: RUN_DIR/view for one run; required for "
                                                 "several)."),
    reference: list[Path] = typer.Option([], "--reference", help="Run directory with expert reference episodes, "
                                                                 "whose figures are shown beside the agent's."),
    reference_figures: Path = typer.Option(None, "--reference-figures", help="bench_references.py JSON "
                                                                             "(benchmarks/data/references_h200.json)."),
    rater: str = typer.Option("combined", "--rater", help="Rater of the implementation score column."),
    open_browser: bool = typer.Option(False, "--open", help="Open the site in the default browser."),
    serve: bool = typer.Option(False, "--serve", help="Also serve it on http://127.0.0.1:PORT until Ctrl-C "
                                                      "(not needed: the site works from file://)."),
    port: int = typer.Option(8765, "--port", help="Port of --serve."),
    suite: Path = SuiteOption,
) -> None:
    """Write a self-contained static site (no server, no network): the episodes table, and one page per
    episode with its transcript, kernel versions and diffs, final evaluation, grades and evidence."""
    from d2kgrade.config import load_settings
    from d2kgrade.errors import UserError
    from d2kgrade.metrics.perf import ScoreConfig
    from d2kgrade.view.site import build_site

    if out is None:
        if len(run_dirs) != 1:
            raise UserError("--out DIR is needed with several run directories")
        out = run_dirs[0] / "view"
    try:
        cfg = ScoreConfig(resamples=0, rater=rater)
    except ValueError:
        raise UserError(f"--rater: expected static, llm, combined or human, got {rater!r}") from None
    rep = build_site(list(run_dirs), out, cfg=cfg, reference_dirs=list(reference),
                     reference_figures_file=reference_figures, suite_root=load_settings(suite=suite).suite)
    err_console.print(f"wrote {rep.n_pages} episode page(s) and {rep.index} ({rep.bytes_written / 1e6:.1f} MB)")
    for w in rep.warnings:
        err_console.print(f"[yellow]note:[/yellow] {w}", highlight=False, soft_wrap=True)
    if open_browser:
        import webbrowser

        webbrowser.open(rep.index.resolve().as_uri())
    if serve:
        import functools
        import http.server

        handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(out))
        with http.server.ThreadingHTTPServer(("127.0.0.1", port), handler) as srv:
            err_console.print(f"serving {out} on http://127.0.0.1:{srv.server_address[1]}/ (Ctrl-C stops)")
            try:
                srv.serve_forever()
            except KeyboardInterrupt:
                pass


def register(app: typer.Typer) -> None:
    app.command("view")(view)
