"""The report as a list of blocks, rendered twice: one self-contained HTML file (images inline as base64 PNG, CSS
inline, no script, nothing fetched) and a Markdown twin whose images sit in a folder beside it."""

from __future__ import annotations

import base64
import html
import re
from dataclasses import dataclass, field
from pathlib import Path


@dataclass
class Heading:
    level: int
    text: str


@dataclass
class Para:
    text: str


@dataclass
class Bullets:
    items: list[str]


@dataclass(frozen=True)
class Link:
    """A table cell that links (into the viewer site): text in LaTeX, ``[text](href)`` in Markdown."""

    text: str
    href: str

    def __str__(self) -> str:
        return self.text


Cell = str | Link


@dataclass
class Table:
    columns: list[str]
    rows: list[list[Cell]]
    caption: str = ""
    latex: str = ""
    """When set, the table is also exported as ``<report stem>_<latex>.tex`` (a booktabs tabular)."""


@dataclass
class Figure:
    name: str
    """File stem of the image in the Markdown twin."""
    png: bytes
    caption: str
    alt: str = ""


Block = Heading | Para | Bullets | Table | Figure


@dataclass
class Document:
    title: str
    blocks: list[Block] = field(default_factory=list)

    def add(self, *blocks: Block) -> None:
        self.blocks.extend(blocks)


CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:2rem auto;max-width:1400px;
     padding:0 1rem;color:#222;line-height:1.45;box-sizing:border-box}
h1{font-size:1.6rem}h2{font-size:1.25rem;margin-top:2rem;border-bottom:1px solid #ddd}h3{font-size:1.05rem}
table{border-collapse:collapse;margin:.6rem 0 1.2rem;font-size:.85rem}
th,td{border:1px solid #ddd;padding:.25rem .5rem;text-align:right;vertical-align:top}
th{background:#f4f4f4}td:first-child,th:first-child,td.l{text-align:left}
caption{caption-side:top;text-align:left;font-size:.85rem;color:#555;padding-bottom:.3rem}
figure{margin:1rem 0}figure img{max-width:100%;height:auto;border:1px solid #eee}
figcaption{font-size:.85rem;color:#555}.tbl{overflow-x:auto;max-width:100%}
td{overflow-wrap:break-word}td.l{text-align:left}a{color:#0b5cad}p.missing{color:#7c2d12}
"""


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")


def to_html(doc: Document) -> str:
    """One HTML file that needs nothing else."""
    out = ["<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
           '<meta name="viewport" content="width=device-width, initial-scale=1">',
           f"<title>{html.escape(doc.title)}</title><style>{CSS}</style></head><body>",
           f"<h1>{html.escape(doc.title)}</h1>"]
    for b in doc.blocks:
        if isinstance(b, Heading):
            lvl = min(max(b.level, 2), 4)
            out.append(f'<h{lvl} id="{_slug(b.text)}">{html.escape(b.text)}</h{lvl}>')
        elif isinstance(b, Para):
            out.append(f"<p>{html.escape(b.text)}</p>")
        elif isinstance(b, Bullets):
            out.append("<ul>" + "".join(f"<li>{html.escape(i)}</li>" for i in b.items) + "</ul>")
        elif isinstance(b, Table):
            cap = f"<caption>{html.escape(b.caption)}</caption>" if b.caption else ""
            head = "".join(f"<th>{html.escape(c)}</th>" for c in b.columns)
            body = "".join("<tr>" + "".join(f"<td{_align(c)}>{_html_cell(c)}</td>" for c in r) + "</tr>"
                           for r in b.rows)
            out.append(f'<div class="tbl"><table>{cap}<thead><tr>{head}</tr></thead>'
                       f"<tbody>{body}</tbody></table></div>")
        elif isinstance(b, Figure):
            data = base64.b64encode(b.png).decode("ascii")
            out.append(f'<figure><img src="data:image/png;base64,{data}" alt="{html.escape(b.alt or b.caption)}">'
                       f"<figcaption>{html.escape(b.caption)}</figcaption></figure>")
    out.append("</body></html>")
    return "\n".join(out)


_NUMERIC = re.compile(r"^[-+–]?(\d|\[|–$|inf|nan)")


def _align(c: Cell) -> str:
    """Numbers right-aligned (the stylesheet's default), words left-aligned."""
    return "" if not isinstance(c, Link) and _NUMERIC.match(str(c)) else ' class="l"'


def _html_cell(c: Cell) -> str:
    if isinstance(c, Link):
        return f'<a href="{html.escape(c.href, quote=True)}">{html.escape(c.text)}</a>'
    return html.escape(str(c))


def _md_cell(c: Cell) -> str:
    text = f"[{c.text}]({c.href})" if isinstance(c, Link) else str(c)
    return text.replace("|", "\\|").replace("\n", " ")


def to_markdown(doc: Document, figures_dir: Path, link_prefix: str) -> str:
    """Markdown; figures are written into ``figures_dir`` and linked as ``link_prefix/<name>.png``."""
    out = [f"# {doc.title}", ""]
    for b in doc.blocks:
        if isinstance(b, Heading):
            out += ["#" * min(max(b.level, 2), 4) + " " + b.text, ""]
        elif isinstance(b, Para):
            out += [b.text, ""]
        elif isinstance(b, Bullets):
            out += [f"- {i}" for i in b.items] + [""]
        elif isinstance(b, Table):
            if b.caption:
                out += [f"*{b.caption}*", ""]
            out.append("| " + " | ".join(_md_cell(c) for c in b.columns) + " |")
            out.append("|" + "|".join("---" for _ in b.columns) + "|")
            out += ["| " + " | ".join(_md_cell(c) for c in r) + " |" for r in b.rows]
            out.append("")
        elif isinstance(b, Figure):
            figures_dir.mkdir(parents=True, exist_ok=True)
            (figures_dir / f"{b.name}.png").write_bytes(b.png)
            out += [f"![{b.alt or b.caption}]({link_prefix}/{b.name}.png)", "", f"*{b.caption}*", ""]
    return "\n".join(out)


_LATEX_SPECIAL = {"\\": r"\textbackslash{}", "&": r"\&", "%": r"\%", "$": r"\$", "#": r"\#", "_": r"\_",
                  "{": r"\{", "}": r"\}", "~": r"\textasciitilde{}", "^": r"\textasciicircum{}",
                  "→": r"$\rightarrow$", "–": "--", "−": "-", "Δ": r"$\Delta$",
                  "≥": r"$\ge$", "≤": r"$\le$", "±": r"$\pm$"}


def latex_escape(text: str) -> str:
    """Text for a LaTeX cell: special characters escaped, arrows and dashes spelled out."""
    return "".join(_LATEX_SPECIAL.get(ch, ch) for ch in str(text))


def to_latex(table: Table) -> str:
    """A booktabs ``tabular`` (first column left, the rest right-aligned) with the caption as a comment."""
    spec = "l" * min(2, len(table.columns)) + "r" * max(0, len(table.columns) - 2)
    out = [f"% {table.caption}" if table.caption else "% d2kgrade report table", "% needs \\usepackage{booktabs}",
           f"\\begin{{tabular}}{{{spec}}}", "\\toprule",
           " & ".join(latex_escape(c) for c in table.columns) + r" \\", "\\midrule"]
    out += [" & ".join(latex_escape(str(c)) for c in r) + r" \\" for r in table.rows]
    out += ["\\bottomrule", "\\end{tabular}", ""]
    return "\n".join(out)
