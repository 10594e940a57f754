"""Small HTML pieces of the viewer's pages: escaping, tables, numbers, code with line anchors, diffs.

Pages are rendered here, in Python, once; the browser only sorts and filters the episodes table and toggles
highlights, so a page of a large episode costs the browser no more than its HTML.
"""

from __future__ import annotations

import difflib
import html
import math
from collections.abc import Iterable, Sequence
from typing import Any

FOLD_CHARS = 2000
FOLD_LINES = 30
"""Tool outputs longer than this are shown folded: their first lines, then the rest behind a toggle."""


def esc(x: Any) -> str:
    return html.escape("" if x is None else str(x), quote=True)


_NUM_FORMATS = {
    "ms": lambda v: f"{v:.4f} ms" if v < 0.1 else f"{v:.3f} ms", "int": lambda v: f"{int(v):,}",
    "usd": lambda v: f"${v:.4f}" if v < 1 else f"${v:.2f}", "s": lambda v: f"{v:.1f} s",
    "sci": lambda v: f"{v:.3g}",
}


def num(x: Any, fmt: str = "num", empty: str = "–") -> str:
    """One number for a cell: ``x`` speedup, ``pct`` share, ``score`` 0-100 and ``num`` as in the report
    (:func:`d2kgrade.report.fmt.value`), or ``ms``, ``int``, ``usd``, ``s``, ``sci``."""
    from d2kgrade.report import fmt as report_fmt

    if x is None or isinstance(x, bool) and fmt != "num":
        return empty
    try:
        v = float(x)
    except (TypeError, ValueError):
        return esc(x)
    if not math.isfinite(v):
        return "inf" if v > 0 and fmt == "num" else empty
    if fmt in _NUM_FORMATS:
        return _NUM_FORMATS[fmt](v)
    return report_fmt.value(v, fmt)


def table(columns: Sequence[str], rows: Iterable[Sequence[str]], *, cls: str = "", caption: str = "",
          row_attrs: Sequence[str] | None = None) -> str:
    """A table whose cells are already HTML (escape text with :func:`esc` first)."""
    head = "".join(f"<th>{esc(c)}</th>" for c in columns)
    body = []
    for i, r in enumerate(rows):
        attrs = f" {row_attrs[i]}" if row_attrs and row_attrs[i] else ""
        body.append(f"<tr{attrs}>" + "".join(f"<td>{c}</td>" for c in r) + "</tr>")
    cap = f"<caption>{esc(caption)}</caption>" if caption else ""
    return (f'<div class="tbl"><table class="{esc(cls)}">{cap}<thead><tr>{head}</tr></thead>'
            f"<tbody>{''.join(body)}</tbody></table></div>")


def badge(text: str, kind: str = "") -> str:
    return f'<span class="badge {esc(kind)}">{esc(text)}</span>'


STATUS_KIND = {"passed": "ok", "finished": "ok", "ok": "ok", "present": "ok", "agree": "ok",
               "incorrect": "bad", "rejected": "bad", "compile_error": "bad", "runtime_error": "bad",
               "timeout": "bad", "crashed": "bad", "failed": "bad", "absent": "bad", "disagree": "warn",
               "unsupported_on_cpu": "warn", "budget_exhausted": "warn", "no_submission": "warn",
               "unknown": "warn", "unavailable": "muted", "not_timed": "muted", "load_bearing": "ok",
               "not_load_bearing": "muted", "broke_correctness": "bad"}


def status_badge(status: str | None) -> str:
    s = status or "unknown"
    kind = STATUS_KIND.get(s, "warn" if "api" in s or "error" in s else "")
    return badge(s, kind)


def bar(fraction: float | None, label: str = "") -> str:
    """A 0-1 bar (roofline fraction) with its value printed beside it."""
    if fraction is None or not math.isfinite(fraction):
        return "–"
    w = max(0.0, min(1.0, fraction)) * 100
    return (f'<span class="bar" title="{esc(label or num(fraction, "pct"))}"><span style="width:{w:.1f}%">'
            f'</span></span> {num(fraction, "pct")}')


def fold(text: str, *, lines: int = FOLD_LINES, chars: int = FOLD_CHARS) -> str:
    """Preformatted text; when long, its head shown and the whole behind a ``<details>`` toggle."""
    n_lines = text.count("\n") + 1
    if len(text) <= chars and n_lines <= lines:
        return f"<pre>{esc(text)}</pre>"
    head = "\n".join(text.splitlines()[:min(lines, 12)])[:chars]
    return (f'<pre class="head">{esc(head)}</pre><details class="fold"><summary>show all {n_lines:,} lines '
            f"({len(text):,} characters)</summary><pre>{esc(text)}</pre></details>")


def _highlighted_lines(code: str, language: str) -> list[str]:
    """One balanced HTML string per source line (pygments, or plain escaping when it has no lexer)."""
    try:
        from pygments import highlight
        from pygments.formatters import HtmlFormatter
        from pygments.lexers import get_lexer_by_name
    except ImportError:
        return [esc(x) for x in code.split("\n")]
    # stripnl=False: a leading blank line must not shift every line number (evidence cites line numbers)
    lexer = get_lexer_by_name(language, stripnl=False, ensurenl=False)
    out = highlight(code, lexer, HtmlFormatter(nowrap=True)).split("\n")
    n = code.count("\n") + 1
    return (out + [""] * n)[:n]


def code_block(code: str, anchor: str, *, language: str = "python",
               marks: dict[int, list[str]] | None = None) -> str:
    """Source with numbered, linkable lines (``#<anchor>-L12``); lines in ``marks`` are highlighted and carry
    the ids that cite them (``data-props``)."""
    marks = marks or {}
    if code.endswith("\n"):
        code = code[:-1]
    lines = _highlighted_lines(code, language) if language else [esc(x) for x in code.split("\n")]
    out = []
    for i, body in enumerate(lines, start=1):
        cited = marks.get(i)
        cls = "ln ev" if cited else "ln"
        extra = f' data-props="{esc(" ".join(cited))}" title="{esc(", ".join(cited))}"' if cited else ""
        out.append(f'<span class="{cls}" id="{anchor}-L{i}"{extra}><a class="no" href="#{anchor}-L{i}">{i}</a>'
                   f"{body}</span>")
    return f'<pre class="code hl">{"".join(out)}</pre>'


def diff_block(old: str, new: str, old_name: str, new_name: str) -> str:
    """Unified diff of two versions, added and removed lines coloured; a sentence when they are equal."""
    lines = list(difflib.unified_diff(old.splitlines(), new.splitlines(), old_name, new_name, lineterm="", n=3))
    if not lines:
        return "<p>No change from the previous version.</p>"
    out = []
    for ln in lines:
        cls = ("d-file" if ln.startswith(("---", "+++")) else "d-hunk" if ln.startswith("@@")
               else "d-add" if ln.startswith("+") else "d-del" if ln.startswith("-") else "d-ctx")
        out.append(f'<span class="{cls}">{esc(ln)}</span>')
    added = sum(1 for ln in lines[2:] if ln.startswith("+"))
    removed = sum(1 for ln in lines[2:] if ln.startswith("-"))
    return f'<p class="muted">+{added} / -{removed} lines</p><pre class="code diff">{"".join(out)}</pre>'
