"""Report sections read from the episodes themselves (not from the score): what the runs hold, statuses and
failure reasons per arm, the Performance Score distribution, the ablations, and the report of a run with
nothing to score."""

from __future__ import annotations

import math
from collections import Counter
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from d2kgrade.report import plots
from d2kgrade.report.render import Bullets, Cell, Document, Figure, Heading, Link, Para, Table

if TYPE_CHECKING:
    import pandas as pd

    from d2kgrade.view.data import Run

TOP_REASONS = 8


def viewer_link(viewer: str | None, text: str, *, page: str | None = None, **filters: Any) -> Cell:
    """A cell linking into the viewer site (an episode's page, or the index filtered), or plain text."""
    if viewer is None:
        return text
    if page is not None:
        return Link(text, viewer + page)
    frag = "&".join(f"{k}={quote(str(v), safe='')}" for k, v in filters.items() if v not in (None, ""))
    return Link(text, viewer + "index.html" + (f"#{frag}" if frag else ""))


def _agents(table: pd.DataFrame) -> pd.DataFrame:
    return table[table["agent"] != "reference"]


def runs_section(doc: Document, table: pd.DataFrame, viewer: str | None) -> None:
    """Episodes, statuses and final statuses per arm, and the most frequent failure reasons."""
    from d2kgrade.metrics.score import arm_order

    doc.add(Heading(2, "What the runs hold"))
    agents = _agents(table)
    refs = int((table["agent"] == "reference").sum())
    if agents.empty:
        doc.add(Para("No agent episode ended in these runs" + (f" ({refs} reference episode(s) only)" if refs
                                                                else "") + ": there is nothing to compare."))
        return
    arms = sorted(agents["arm"].unique(), key=arm_order)
    statuses = sorted(agents["status"].unique())
    finals = sorted(agents["final_status"].unique())
    rows: list[list[Cell]] = []
    for arm in arms:
        a = agents[agents["arm"] == arm]
        st, fi = Counter(a["status"]), Counter(a["final_status"])
        rows.append([viewer_link(viewer, arm, arm=arm), str(len(a)), str(int(a["correct"].sum())),
                     *(viewer_link(viewer, str(st.get(s, 0)), arm=arm, status=s) if st.get(s) else "0"
                       for s in statuses),
                     *(viewer_link(viewer, str(fi.get(f, 0)), arm=arm, final_status=f) if fi.get(f) else "0"
                       for f in finals)])
    text = (f"{len(agents)} agent episode(s)" + (f" and {refs} reference episode(s)" if refs else "") +
            ". Episode status: how the episode ended; final: the evaluation of its last submission.")
    doc.add(Para(text + (" Counts link to those episodes in the viewer." if viewer else "")),
            Table(["arm", "episodes", "correct", *(f"status: {s}" for s in statuses),
                   *(f"final: {f}" for f in finals)], rows, caption="Episodes per arm (n), by status."))
    if (agents["final_status"] == "no_submission").all():
        doc.add(Para(f"No agent episode submitted a kernel (statuses: {', '.join(statuses)}): every number below "
                     "describes failures, not kernels."))
    failing = agents[~agents["correct"]]
    if failing.empty:
        doc.add(Para("Every agent episode ended with a correct submission."))
        return
    rows = []
    for arm in arms:
        msgs = Counter(_reason(r) for r in failing[failing["arm"] == arm].to_dict("records"))
        for why, n in msgs.most_common(TOP_REASONS):
            rows.append([arm, str(n), why])
    doc.add(Table(["arm", "episodes", "why not correct (status: message)"], rows,
                  caption=f"Failure reasons per arm, the {TOP_REASONS} most frequent of each."))


def _reason(r: dict[str, Any]) -> str:
    msg = " ".join(str(r.get("message") or "").split())
    return f"{r['status']} / {r['final_status']}: {msg[:160] or 'no message'}"


def perf_counts(table: pd.DataFrame) -> dict[str, dict[str, int]]:
    """Per arm: episodes at each Performance Score (``'0'``..``'3'``), and ``'untimed'`` (correct, not timed)."""
    from d2kgrade.metrics.score import arm_order

    agents = _agents(table)
    agents = agents[agents["arm"] != "propose"]
    out: dict[str, dict[str, int]] = {}
    for arm in sorted(agents["arm"].unique(), key=arm_order):
        c: Counter[str] = Counter()
        for r in agents[agents["arm"] == arm].to_dict("records"):
            p = r["perf_score"]
            c["untimed" if p is None or (isinstance(p, float) and math.isnan(p)) else str(int(p))] += 1
        out[arm] = dict(c)
    return out


def perf_section(doc: Document, table: pd.DataFrame) -> None:
    counts = perf_counts(table)
    png = plots.perf_distribution(counts)
    doc.add(Heading(2, "Performance Score per arm"))
    if png is None:
        doc.add(Para("No agent episode with a kernel arm: no Performance Score distribution."))
        return
    rows = [[arm, str(sum(c.values())), *(str(c.get(str(k), 0)) for k in range(4)), str(c.get("untimed", 0))]
            for arm, c in counts.items()]
    doc.add(Figure("perf_distribution", png, "Share of each arm's episodes at each Performance Score (0: not "
                                             "correct ... 3: at least the configured fraction of the expert's "
                                             "speed); n under each arm."),
            Table(["arm", "n", "score 0", "score 1", "score 2", "score 3", "correct, untimed"], rows))
    if not any(c.get(str(k), 0) for c in counts.values() for k in (1, 2, 3)) and any(
            c.get("untimed", 0) for c in counts.values()):
        doc.add(Para("Every correct episode is untimed (a CPU run): scores 1-3 need GPU timings."))


def ablation_section(doc: Document, runs: list[Run]) -> None:
    """Per level and arm: how many graded-present properties were load-bearing when removed (``d2kgrade
    ablate``), with the median slowdown; or one sentence saying why there is nothing to show."""
    doc.add(Heading(2, "Ablations: which implemented properties carry the speed"))
    rows_in = [(r, a) for r in runs for a in r.ablations.rows]
    if not rows_in:
        notes = "; ".join(dict.fromkeys(r.ablations.note for r in runs if r.ablations.note))
        doc.add(Para(f"No ablation records ({notes})." if notes else "No ablation records."))
        return
    groups: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for _, a in rows_in:
        groups.setdefault((str(a.get("arm")), str(a.get("level"))), []).append(a)
    statuses = sorted({str(a.get("status")) for _, a in rows_in})
    rows: list[list[Cell]] = []
    for (arm, level), recs in sorted(groups.items()):
        c = Counter(str(a.get("status")) for a in recs)
        slow = sorted(float(a["slowdown"]) for a in recs if a.get("status") == "load_bearing"
                      and a.get("slowdown") is not None)
        med = f"{slow[len(slow) // 2]:.2f}x (n={len(slow)})" if slow else "–"
        est = sum(1 for a in recs if a.get("estimated_from_reference"))
        rows.append([arm, level, str(len(recs)), *(str(c.get(s, 0)) for s in statuses), med, str(est)])
    doc.add(Para("Each record removes one property from a kernel (a source transform) and times it again; "
                 "load-bearing: the slowdown's interval lies above the noise."),
            Table(["arm", "level", "n", *statuses, "median slowdown (load-bearing)", "estimated from reference"],
                  rows, caption="Ablation records per arm and level."))
    attribution_table(doc, [a for _, a in rows_in])


def reference_ablation_section(doc: Document, records: list[Any], source: str) -> None:
    """The expert references' ablation (``benchmarks/ablate_references.py``): per reference, each timed
    property's slowdown when removed, its interval and the noise, and the workload it slowed most; the records
    without a figure are counted by status."""
    doc.add(Heading(2, "Expert references: which design properties carry the speed"))
    timed = [r for r in records if r.slowdown is not None and not r.estimated_from_reference]
    rest = Counter(r.status for r in records if r.slowdown is None or r.estimated_from_reference)
    if not timed:
        doc.add(Para(f"No timed reference ablation in {source}."))
        return
    rows: list[list[Cell]] = []
    for r in sorted(timed, key=lambda r: (r.task, r.status != "load_bearing", -(r.slowdown or 0))):
        worst = max(r.workloads, key=lambda w: w.slowdown, default=None)
        rows.append([r.task, r.property.removeprefix(r.task + "."), r.status.replace("_", "-"),
                     f"{r.slowdown:.3f}x [{r.ci_low:.3f}, {r.ci_high:.3f}]",
                     "–" if r.noise_pct is None else f"{r.noise_pct:.2f}%",
                     f"{worst.name} {worst.slowdown:.2f}x" if worst else "–", r.transform or "–"])
    tasks = sorted({r.task for r in timed})
    doc.add(Para(f"From {source}: {len(timed)} properties of {len(tasks)} references timed with the property "
                 "removed (geomean over the catalog workloads of the ratio of medians, 95% bootstrap interval over "
                 "rounds); load-bearing: the interval clears the original-against-itself noise. Without a figure: "
                 + (", ".join(f"{n} {s.replace('_', '-')}" for s, n in sorted(rest.items())) or "none") + "."),
            Table(["task", "property", "status", "slowdown [95% CI]", "noise", "most slowed workload", "transform"],
                  rows, caption="The expert references with one property removed at a time."))


def attribution_table(doc: Document, rows: list[dict[str, Any]], top: int = 3) -> None:
    """Per task and arm (:func:`d2kgrade.ablate.attribution.attribute`): the implemented properties that carried
    the speed (median slowdown when removed, episodes load-bearing of those timed) and the missing ones that cost
    the most by the reference's figure (its slowdown, episodes lacking it); ``top`` of each."""
    from d2kgrade.ablate.attribution import attribute
    from d2kgrade.ablate.results import AblationRecord

    groups = attribute(AblationRecord.model_validate(a) for a in rows)
    if not groups:
        return

    def carried(g: Any) -> str:
        return "; ".join(f"{e.property} {e.slowdown:.2f}x ({e.load_bearing}/{e.episodes} load-bearing)"
                         for e in g.carried[:top]) or "–"

    def missing(g: Any) -> str:
        return "; ".join(f"{e.property} {e.slowdown:.2f}x (lacking in {e.episodes})" for e in g.missing[:top]) \
            or "–"

    doc.add(Table(["task", "arm", "episodes", f"carried the speed (top {top})", f"missing, by cost (top {top})"],
                  [[g.task, g.arm, str(g.episodes), carried(g), missing(g)] for g in groups],
                  caption="Per task and arm: the implemented properties whose removal slowed the kernel most, and "
                          "the missing properties the expert reference's ablation prices highest."))


def missing_document(doc: Document, runs: list[Run], table: pd.DataFrame, reason: str) -> None:
    """The body of a report whose runs cannot be scored: what each run holds and what is missing."""
    doc.add(Heading(2, "Nothing to score yet"), Para(reason))
    items = []
    for r in runs:
        eps = r.tables.episodes
        sessions = r.store["sessions"] if r.store is not None else None
        planned = int(sessions["episodes_planned"].fillna(0).max()) if sessions is not None and len(sessions) else 0
        st = Counter(eps["status"]) if len(eps) and "status" in eps else Counter()
        status_text = ", ".join(f"{n} {s or 'no status'}" for s, n in st.most_common()) or "none"
        items.append(f"{r.label} ({r.root}): {len(eps)} ended episode(s) ({status_text})"
                     + (f" of {planned} planned" if planned else "") + f"; {len(r.tables.workloads)} workload "
                     f"row(s); {len(r.tables.grades)} grade(s)")
    doc.add(Bullets(items))
    missing = []
    if table.empty or _agents(table).empty:
        missing.append("ended agent episodes: run `d2kgrade run --model M --out RUN_DIR` (rerun it to resume); "
                       "episodes that failed on the API are run again on resume")
    elif (_agents(table)["final_status"] == "no_submission").all():
        st = ", ".join(sorted(set(_agents(table)["status"])))
        missing.append(f"a submitted kernel: every agent episode ended without one (statuses: {st}); rerun "
                       "`d2kgrade run` on the same RUN_DIR to resume (episodes that failed on the API run again)")
    if not any(r.tables.grades for r in runs):
        missing.append("grades: `d2kgrade judge --run RUN_DIR`")
    if missing:
        doc.add(Heading(3, "Missing"), Bullets(missing))
    if not table.empty:
        runs_section(doc, table, None)
