"""An episode's transcript (``transcript.jsonl``: every message, tool call, tool result and event, in full) as
collapsible entries; long tool outputs and file contents are folded."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from d2kgrade.view.html import badge, code_block, esc, fold

MAX_TRANSCRIPT_BYTES = 64 * 1024 * 1024
OPEN_CHARS = 600
"""Messages shorter than this start open; the long task prompt and system prompt start closed."""


def read_transcript(path: Path) -> list[dict[str, Any]]:
    """The entries of a transcript file (lines that are not JSON objects are skipped)."""
    out = []
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        try:
            obj = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(obj, dict):
            out.append(obj)
    return out


def _summary_text(text: str, n: int = 110) -> str:
    one = " ".join(text.split())
    return one if len(one) <= n else one[: n - 1] + "…"


def _tool_call(call: dict[str, Any], idx: str) -> str:
    fn = call.get("function") or {}
    name = fn.get("name") or call.get("name") or "?"
    raw = fn.get("arguments") if fn else call.get("arguments")
    try:
        args = json.loads(raw) if isinstance(raw, str) else (raw or {})
    except json.JSONDecodeError:
        args = None
    cid = call.get("id") or ""
    head = f'<div class="call" id="call-{esc(cid)}">{badge("call", "muted")} <code>{esc(name)}</code>'
    if not isinstance(args, dict):
        return head + fold(str(raw)) + "</div>"
    content = args.get("content") if isinstance(args.get("content"), str) else None
    rest = {k: v for k, v in args.items() if k != "content"}
    parts = [head, f" <code class='args'>{esc(json.dumps(rest))}</code>" if rest else ""]
    if content is not None:
        path = str(args.get("path", ""))
        # plain text here: the kernels section shows every version highlighted or as a diff, and highlighting
        # each write again costs most of a page's build time (pygments, ~0.1 s per 300-line file)
        parts.append(f'<details class="fold"><summary>{esc(path or "content")}: {content.count(chr(10)) + 1} '
                     f"lines</summary>{code_block(content, f'c{idx}', language='')}</details>")
    return "".join(parts) + "</div>"


def render_entry(e: dict[str, Any], idx: int) -> str:
    """One transcript entry: a message (system, user, assistant, tool) or an event."""
    turn = e.get("turn")
    t = f"turn {turn}" if turn is not None else ""
    if "event" in e:
        info = {k: v for k, v in e.items() if k not in ("event", "t", "turn")}
        return (f'<div class="entry event" data-role="event">{badge(str(e["event"]), "warn")} {esc(t)} '
                f"<code>{esc(json.dumps(info, default=str)[:2000])}</code></div>")
    role = str(e.get("role", "?"))
    content = e.get("content")
    text = content if isinstance(content, str) else ("" if content is None else json.dumps(content, default=str))
    calls = e.get("tool_calls") or []
    extra = ""
    if role == "tool":
        ok = e.get("ok", True)
        extra = (f' <a href="#call-{esc(e.get("tool_call_id", ""))}" class="muted">result of '
                 f'{esc(e.get("tool_call_id", ""))}</a>') + ("" if ok else " " + badge("error", "bad"))
    summary = _summary_text(text) if text else (", ".join(
        str((c.get("function") or {}).get("name") or c.get("name")) for c in calls) + " (tool calls)")
    opened = " open" if role in ("assistant", "tool") or len(text) < OPEN_CHARS else ""
    body = (fold(text) if role == "tool" else f'<div class="text">{esc(text)}</div>') if text else ""
    body += "".join(_tool_call(c, f"{idx}-{j}") for j, c in enumerate(calls))
    fin = e.get("finish_reason")
    meta = f" · {esc(fin)}" if fin and fin not in ("stop", "tool_calls") else ""
    return (f'<details class="entry {esc(role)}" data-role="{esc(role)}"{opened}><summary>{badge(role)} '
            f'<span class="muted">{esc(t)}{meta}</span>{extra} {esc(summary)}</summary>{body}</details>')


def transcript_section(run_dir: Path, rel: str | None, has_store: bool) -> str:
    out = ['<section id="transcript"><h2>Transcript</h2>']
    path = run_dir / rel if rel else None
    if path is None or not path.is_file():
        why = ("its file is missing" if rel else "the run has no transcript for it") if has_store else (
            "plain episode tables carry no transcript")
        return "".join(out) + f"<p>No transcript: {why}.</p></section>"
    if path.stat().st_size > MAX_TRANSCRIPT_BYTES:
        return "".join(out) + (f"<p>The transcript is {path.stat().st_size:,} bytes, over the "
                               f"{MAX_TRANSCRIPT_BYTES:,} the viewer inlines: read <code>{esc(rel)}</code>.</p>"
                               "</section>")
    entries = read_transcript(path)
    n_calls = sum(len(e.get("tool_calls") or []) for e in entries)
    out.append(f'<p>{len(entries)} entries, {n_calls} tool calls. <button type="button" class="expand-all">'
               f'expand all</button> <button type="button" class="collapse-all">collapse all</button></p>'
               '<div class="transcript">')
    out += [render_entry(e, i) for i, e in enumerate(entries)]
    out.append("</div></section>")
    return "".join(out)
