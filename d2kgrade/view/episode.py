"""One episode's page: summary and paired episodes, the final evaluation per workload beside the expert's figures,
the grade per property with its evidence, the kernel versions with diffs, the design note, the transcript and the
ablations."""

from __future__ import annotations

import posixpath
from dataclasses import dataclass
from typing import Any

from d2kgrade.grades import FileGrade
from d2kgrade.records import EvalResult
from d2kgrade.view.data import ReferenceFigures, Run
from d2kgrade.view.html import (badge, bar, code_block, diff_block, esc, fold, num, status_badge, table)
from d2kgrade.view.transcript import transcript_section

MAX_FILE_BYTES = 2 * 1024 * 1024
"""A kernel or note larger than this is not inlined (a page stays loadable)."""


@dataclass
class EpisodeContext:
    """Everything one page needs."""

    row: dict[str, Any]
    """The episode's row of :func:`d2kgrade.view.data.episode_table`."""
    run: Run
    result: EvalResult | None
    grades: list[FileGrade]
    pairs: list[dict[str, Any]]
    """Rows of the paired episodes (same model, task and seed; other arms)."""
    references: ReferenceFigures
    ablations: list[dict[str, Any]]
    ablation_note: str
    properties: dict[str, str]
    """Property id -> its guidance text, where the suite has the task."""


def _read(run: Run, rel: str | None) -> str | None:
    if not rel:
        return None
    p = run.root / rel
    try:
        if not p.is_file() or p.stat().st_size > MAX_FILE_BYTES:
            return None
        return p.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None


def _link(from_page: str, to_page: str, text: str) -> str:
    href = posixpath.relpath(to_page, posixpath.dirname(from_page))
    return f'<a href="{esc(href)}">{esc(text)}</a>'


def summary_section(ctx: EpisodeContext) -> str:
    r = ctx.row
    why = r["message"] or ""
    facts = [("task", esc(r["task"])), ("model", esc(r["model"])), ("arm", f'{esc(r["arm"])} (guidance '
             f'{esc(r["guidance"])})'), ("seed", esc(r["seed"])), ("run", esc(r["run"])),
             ("episode", f"{status_badge(r['status'])} {esc(why)}"),
             ("final evaluation", f"{status_badge(r['final_status'])} "
                                  f"{badge('correct', 'ok') if r['correct'] else badge('not correct', 'bad')}"),
             ("turns", num(r["turns"], "int")), ("tokens in / out", f'{num(r["tokens_in"], "int")} / '
                                                                   f'{num(r["tokens_out"], "int")}'),
             ("cost", num(r["cost_usd"], "usd")), ("wall", num(r["wall_s"], "s")),
             ("speedup vs best baseline", num(r["speedup_best"], "x")),
             ("speedup vs eager / compile", f'{num(r["speedup_eager"], "x")} / {num(r["speedup_compiled"], "x")}'),
             ("fraction of roofline", num(r["roofline"], "pct")), ("Performance Score", num(r["perf_score"], "int")),
             ("implementation score", num(r["impl_score"], "score"))]
    rows = "".join(f"<tr><th>{esc(k)}</th><td>{v}</td></tr>" for k, v in facts)
    out = [f'<section id="summary"><h2>Summary</h2><div class="tbl"><table class="facts">{rows}</table></div>']
    if ctx.pairs:
        prow = [[_link(r["page"], p["page"], p["episode_id"]), esc(p["arm"]), status_badge(p["status"]),
                 "yes" if p["correct"] else "no", num(p["speedup_best"], "x"), num(p["speedup_eager"], "x"),
                 num(p["impl_score"], "score")] for p in ctx.pairs]
        out.append('<h3>Paired episodes</h3><div class="pairs">' +
                   table(["episode", "arm", "status", "correct", "vs best", "vs eager", "impl"], prow, cls="pair")
                   + "</div>")
    elif r["agent"] != "reference":
        out.append(f'<p class="pairs">No paired episode: no other arm of {esc(r["model"])} ran {esc(r["task"])} with '
                   f'seed {esc(r["seed"])} in these runs.</p>')
    out.append("</section>")
    return "".join(out)


def _err(w) -> str:
    if not w.errors:
        return "–"
    worst = max(w.errors, key=lambda e: e.tol_ratio)
    bad = f", {worst.n_bad:,}/{worst.n_total:,} bad" if worst.n_bad else ""
    return (f"abs {num(worst.max_abs_err, 'sci')}, rel {num(worst.max_rel_err, 'sci')}, tol used "
            f"{num(worst.tol_ratio, 'pct')}{bad}")


def _ref_cell(ref: dict[str, Any]) -> str:
    if not ref:
        return "–"
    if ref.get("median_ms") is None:
        return status_badge(ref.get("status")) + " <span class='muted'>not timed</span>"
    return (f"{num(ref['median_ms'], 'ms')}, {num(ref.get('speedup_eager'), 'x')} vs eager, "
            f"{num(ref.get('roofline_fraction'), 'pct')} of roofline")


def evaluation_section(ctx: EpisodeContext) -> str:
    res = ctx.result
    head = '<section id="evaluation"><h2>Final evaluation</h2>'
    if res is None:
        why = ("this episode never submitted a kernel" if ctx.row["final_status"] == "no_submission"
               else "the run has no final evaluation record for it (plain tables, or an older run store)")
        return head + f"<p>No per-workload results: {why}.</p></section>"
    env = res.environment
    where = ", ".join(x for x in (env.device, env.gpu, f"torch {env.torch}" if env.torch else "",
                                  "Triton interpreter" if env.interpreter else "") if x)
    out = [head, f"<p>{status_badge(res.status)} {esc(res.message)} <span class='muted'>({esc(where)}; "
                 f"{num(res.wall_s, 's')})</span></p>"]
    refs = ctx.references
    rows = []
    for w in res.workloads:
        t = w.time
        best = next((b for b in w.baselines if b.name == w.best_baseline), None)
        ref = refs.rows.get((res.task, w.name), {})
        rows.append([
            esc(w.name) + (" " + badge("hidden", "muted") if w.hidden else ""), status_badge(w.status),
            num(w.trials, "int"), _err(w),
            f"{num(t.median_ms, 'ms')} <span class='muted'>IQR {num(t.iqr_ms, 'ms')}, {t.reps} reps</span>" if t
            else "not timed",
            f"{esc(w.best_baseline)} {num(best.time.median_ms, 'ms') if best and best.time else ''}"
            if w.best_baseline else "–",
            num(w.speedup_best, "x"), num(w.speedup_eager, "x"), num(w.speedup_compiled, "x"),
            bar(w.roofline_fraction, f"floor {num(w.roofline_floor_ms, 'ms')}"),
            _ref_cell(ref),
            esc(w.message[:300])])
    out.append(table(["workload", "status", "trials", "error (worst output)", "median", "best baseline",
                      "vs best", "vs eager", "vs compile", "roofline", "expert reference", "message"], rows,
                     cls="workloads"))
    if not refs.rows:
        out.append("<p class='muted'>No expert figures: give `--reference RUN_DIR` (a reference run) or "
                   "`--reference-figures benchmarks/data/references_h200.json`.</p>")
    else:
        out.append(f"<p class='muted'>Expert reference figures from {esc(refs.source)}.</p>")
    brow = []
    for w in res.workloads:
        for b in w.baselines:
            counted = "best" if b.name == w.best_baseline else ("counted" if b.status == "ok" else "excluded")
            brow.append([esc(w.name), esc(b.name), esc(b.kind), status_badge(b.status),
                         num(b.time.median_ms, "ms") if b.time else "–", num(b.time.iqr_ms, "ms") if b.time else "–",
                         badge(counted, "ok" if counted == "best" else "muted" if counted == "counted" else "bad"),
                         esc(b.reason) or "–"])
    if brow:
        out.append("<h3>Baselines per workload</h3>" + table(
            ["workload", "candidate", "kind", "status", "median", "IQR", "best?", "why excluded"], brow,
            cls="baselines"))
    else:
        out.append("<p>No baseline candidates were recorded (CPU run, or a schema v1 result): speedups are "
                   "against eager and torch.compile only.</p>")
    if res.flags:
        out.append("<h3>Flags</h3><ul>" + "".join(
            f"<li>{badge(f.severity, 'bad' if f.severity == 'reject' else 'warn')} <code>{esc(f.code)}</code> "
            f"{esc(f.message)}{f' (line {f.line})' if f.line else ''}</li>" for f in res.flags) + "</ul>")
    else:
        out.append("<p>No flags.</p>")
    out.append("</section>")
    return "".join(out)


def _by(grades: list[FileGrade], kind: str) -> dict[str, FileGrade]:
    return {g.rater: g for g in grades if g.kind == kind}


def _verdict(g: FileGrade | None, pid: str) -> str:
    if g is None:
        return "–"
    p = next((x for x in g.properties if x.property_id == pid), None)
    if p is None:
        return "–"
    return f"{status_badge(p.verdict)} <span class='muted'>{p.confidence:.2f}</span>"


def evidence_marks(grades: list[FileGrade], kind: str) -> dict[int, list[str]]:
    """Line -> property ids whose evidence cites it, over every rater's grades of that kind."""
    marks: dict[int, list[str]] = {}
    for g in grades:
        if g.kind != kind:
            continue
        for p in g.properties:
            if p.verdict != "present":
                continue
            for e in p.evidence:
                for line in range(e.start_line, e.end_line + 1):
                    ids = marks.setdefault(line, [])
                    if p.property_id not in ids:
                        ids.append(p.property_id)
    return marks


def grades_section(ctx: EpisodeContext) -> str:
    out = ['<section id="grades"><h2>Grades per property</h2>']
    if not ctx.grades:
        out.append("<p>No grades for this episode: run `d2kgrade judge --run RUN_DIR` (static, llm or combined)."
                   "</p></section>")
        return "".join(out)
    code, prop = _by(ctx.grades, "code"), _by(ctx.grades, "proposal")
    scores = [f"{esc(g.rater)} {g.score:.1f}" + (f" ({g.n_unknown} unknown)" if g.n_unknown else "") +
              (f" <span class='muted'>{esc(g.error)}</span>" if g.error else "")
              for g in code.values()]
    out.append(f"<p>Implementation score (0-100): {'; '.join(scores) or '–'}.</p>")
    note_rater = prop.get("combined") or prop.get("llm") or next(iter(prop.values()), None)
    ids = list(dict.fromkeys(p.property_id for g in ctx.grades for p in g.properties))
    level = {p.property_id: p.level for g in ctx.grades for p in g.properties}
    rows, attrs, detail = [], [], []
    for pid in ids:
        fused = code.get("combined")
        fp = next((p for p in fused.properties if p.property_id == pid), None) if fused else None
        agreement = str(fp.details.get("agreement", "")) if fp else ""
        lines = sorted({ln for g in code.values() for p in g.properties if p.property_id == pid
                        and p.verdict == "present" for e in p.evidence for ln in (e.start_line, e.end_line)})
        links = ", ".join(f'<a class="evl" href="#kf-L{ln}">{ln}</a>' for ln in lines) or "–"
        rows.append([f'<a href="#p-{esc(pid)}" class="pid" data-pid="{esc(pid)}">{esc(pid)}</a>', esc(level[pid]),
                     _verdict(note_rater, pid), _verdict(code.get("static"), pid), _verdict(code.get("llm"), pid),
                     _verdict(fused, pid), status_badge(agreement) if agreement else "–", links])
        attrs.append(f'data-pid="{esc(pid)}"')
        detail.append(_property_detail(pid, ctx.properties.get(pid, ""), code, prop))
    out.append(table(["property", "level", f"proposed ({esc(note_rater.rater) if note_rater else '–'})",
                      "static", "judge", "fused", "agreement", "evidence lines"], rows, cls="grades",
                     row_attrs=attrs))
    out.append('<div class="prop-details">' + "".join(detail) + "</div></section>")
    return "".join(out)


def _property_detail(pid: str, text: str, code: dict[str, FileGrade], prop: dict[str, FileGrade]) -> str:
    parts = [f'<details class="prop" id="p-{esc(pid)}"><summary><code>{esc(pid)}</code></summary>']
    if text:
        parts.append(f"<p class='muted'>{esc(text)}</p>")
    for kind, graded in (("kernel", code), ("design note", prop)):
        for rater, g in graded.items():
            p = next((x for x in g.properties if x.property_id == pid), None)
            if p is None:
                continue
            parts.append(f"<h4>{esc(rater)} on the {kind}: {status_badge(p.verdict)} "
                         f"<span class='muted'>confidence {p.confidence:.2f}</span></h4>")
            if p.reason:
                parts.append(f"<p>{esc(p.reason)}</p>")
            for e in p.evidence:
                parts.append(f"<blockquote><span class='muted'>lines {e.start_line}-{e.end_line}"
                             f"{' · ' + esc(e.note) if e.note else ''}</span><pre>{esc(e.code)}</pre></blockquote>")
            for i, s in enumerate(p.details.get("samples", []) or []):
                if not isinstance(s, dict):
                    continue
                flags = ", ".join(s.get("flags") or [])
                probs = "; ".join(s.get("quote_problems") or [])
                parts.append(f"<p class='sample'>sample {i}: <b>{esc(s.get('raw_verdict'))}</b>"
                             f"{' [' + esc(flags) + ']' if flags else ''} {esc(s.get('reasoning'))}"
                             f"{' <i>quote problems: ' + esc(probs) + '</i>' if probs else ''}</p>")
            if p.details.get("agreement"):
                parts.append(f"<p class='muted'>fusion: {esc(p.details.get('agreement'))}, winner "
                             f"{esc(p.details.get('winner'))}</p>")
    parts.append("</details>")
    return "".join(parts)


def kernels_section(ctx: EpisodeContext) -> str:
    r, run = ctx.row, ctx.run
    out = ['<section id="kernels"><h2>Kernel</h2>']
    final_rel = next((e.get("kernel_path") for e in [_episode_record(run, r["episode_id"])] if e), None)
    final = _read(run, final_rel)
    if final is None:
        out.append("<p>No final kernel: the episode never submitted one, or its file is missing.</p>")
    else:
        marks = evidence_marks(ctx.grades, "code")
        out.append(f"<p>Final submission <code>{esc(final_rel)}</code>; {len(marks)} line(s) cited as evidence "
                   "(highlighted; hover for the properties).</p>")
        out.append(code_block(final, "kf", marks=marks))
    versions = _versions(run, r["episode_id"])
    if versions:
        out.append(f"<h3>Every version ({len(versions)})</h3>")
        prev: dict[str, str] = {}
        for v in versions:
            text = _read(run, v["file_path"]) or ""
            old = prev.get(v["path"])
            body = (diff_block(old, text, f"v{v['version'] - 1:03d}", f"v{v['version']:03d}") if old is not None
                    else "<p>First version of this file.</p>" + code_block(text, f"v{v['version']}", language=""))
            evals = ", ".join(f"{esc(k)}: {status_badge(s)}" for k, s in v["evals"]) or "not evaluated"
            out.append(f'<details class="version" id="v{v["version"]}"><summary>v{v["version"]:03d} '
                       f"<code>{esc(v['path'])}</code> · turn {v['turn']} · {num(v['n_bytes'], 'int')} bytes · "
                       f"{evals}</summary>{body}</details>")
            prev[v["path"]] = text
    elif run.store is not None:
        out.append("<p>No kernel versions recorded.</p>")
    out.append("</section>")
    return "".join(out)


def _episode_record(run: Run, episode_id: str) -> dict[str, Any] | None:
    eps = run.tables.episodes
    hit = eps[eps["episode_id"] == episode_id]
    return hit.iloc[0].to_dict() if len(hit) else None


def _versions(run: Run, episode_id: str) -> list[dict[str, Any]]:
    if run.store is None:
        return []
    kv = run.store["kernel_versions"]
    ev = run.store["evaluations"]
    ev = ev[ev["episode_id"] == episode_id]
    out = []
    for v in kv[kv["episode_id"] == episode_id].sort_values("version").to_dict("records"):
        e = ev[ev["kernel_version"] == v["version"]].sort_values("eval_id")
        out.append({**v, "evals": list(zip(e["kind"], e["status"], strict=True))})
    return out


def design_section(ctx: EpisodeContext) -> str:
    rec = _episode_record(ctx.run, ctx.row["episode_id"]) or {}
    note = _read(ctx.run, rec.get("design_note_path"))
    out = ['<section id="design"><h2>Design note</h2>']
    if note is None:
        out.append("<p>No design note was recorded for this episode.</p>")
    else:
        marks = evidence_marks(ctx.grades, "proposal")
        out.append(code_block(note, "dn", language="", marks=marks))
    out.append("</section>")
    return "".join(out)


def ablations_section(ctx: EpisodeContext) -> str:
    out = ['<section id="ablations"><h2>Ablations</h2>']
    if not ctx.ablations:
        out.append(f"<p>{esc(ctx.ablation_note or 'No ablation record names this episode.')}</p></section>")
        return "".join(out)
    rows = [[esc(a.get("property")), esc(a.get("level")), esc(a.get("transform")),
             "yes" if a.get("present") else "no", status_badge(a.get("status")), num(a.get("slowdown"), "x"),
             f"[{num(a.get('ci_low'), 'x')}, {num(a.get('ci_high'), 'x')}]" if a.get("ci_low") is not None else "–",
             num(a.get("noise_pct"), "num") + ("%" if a.get("noise_pct") is not None else ""),
             "reference" if a.get("estimated_from_reference") else "this kernel", esc(a.get("message"))]
            for a in ctx.ablations]
    out.append(table(["property", "level", "transform", "present", "status", "slowdown", "interval", "noise",
                      "estimated on", "message"], rows, cls="ablations",
                     caption="Slowdown: median time of the kernel with the property removed / the original."))
    out.append("</section>")
    return "".join(out)


def render_episode(ctx: EpisodeContext, page_shell) -> str:
    """The whole page (``page_shell(title, body, depth)`` adds the head, style and script)."""
    r = ctx.row
    nav = " · ".join(f'<a href="#{i}">{t}</a>' for i, t in (
        ("summary", "summary"), ("evaluation", "evaluation"), ("grades", "grades"), ("kernels", "kernel"),
        ("design", "design note"), ("transcript", "transcript"), ("ablations", "ablations")))
    index = posixpath.relpath("index.html", posixpath.dirname(r["page"]))
    body = (f'<p class="crumbs"><a href="{esc(index)}">all episodes</a> › <a href="{esc(index)}#task='
            f'{esc(r["task"])}">{esc(r["task"])}</a> › {esc(r["episode_id"])}</p>'
            f'<h1>{esc(r["episode_id"])}</h1><nav class="toc">{nav}</nav>' + summary_section(ctx) +
            evaluation_section(ctx) + grades_section(ctx) + kernels_section(ctx) + design_section(ctx) +
            transcript_section(ctx.run.root, (_episode_record(ctx.run, r["episode_id"]) or {}).get(
                "transcript_path"), ctx.run.store is not None) + ablations_section(ctx))
    return page_shell(f"{r['episode_id']} · d2kgrade view", body, r["page"].count("/"))

