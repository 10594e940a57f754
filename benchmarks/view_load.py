"""How fast the viewer loads on a large run: 26 tasks x 2 arms x 3 seeds = 156 episodes, in headless Chromium.

The run is made through the real pipeline, as a user makes one: ``d2kgrade run`` (paired, 3 seeds) against the
test suite's local OpenAI-compatible server with a scripted agent (each episode writes a buggy kernel, tests it,
writes the expert reference kernel or, in the unguided arm, a copy of it, benchmarks and submits), a fake GPU
evaluator (tests/view/pipeline.py: schema-v2 results with timings and baseline candidates, made-up numbers), then
``d2kgrade judge --run --judge combined`` (real static analysis, a fake LLM judge on the same server), an
ablations file, then ``d2kgrade view`` and ``d2kgrade report``. Page loads are measured in Debian's Chromium
through Playwright from file:// (navigation start to the load event, and for the index to the table rendered),
plus one filter, one search and one sort on the index. CPU only; no GPU is involved.

    .venv/bin/python benchmarks/view_load.py --out benchmarks/data/view_load.json
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from importlib import metadata
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.view.conftest import CHROMIUM, LAUNCH_ARGS  # noqa: E402
from tests.view.pipeline import cli, make_paired_run  # noqa: E402

NAV = ("() => { const n = performance.getEntriesByType('navigation')[0];"
       " return {load_ms: n.loadEventEnd - n.startTime, dom_ms: n.domContentLoadedEventEnd - n.startTime,"
       " bytes: n.decodedBodySize}; }")


def _timed(fn) -> float:
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


def measure(site: Path, report: Path, repeats: int) -> dict:
    from playwright.sync_api import sync_playwright

    out: dict = {"index": [], "episode": [], "report": [], "interactions_ms": {}}
    pages = sorted((site / "e").rglob("*.html"))
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=LAUNCH_ARGS)
        ctx = browser.new_context(viewport={"width": 1400, "height": 1000})
        page = ctx.new_page()
        for _ in range(repeats):
            page.goto(site.joinpath("index.html").as_uri())
            page.wait_for_selector("#episodes tbody tr")
            nav = page.evaluate(NAV)
            nav["table_ms"] = page.evaluate("() => performance.now()")
            nav["rows_shown"] = page.locator("#episodes tbody tr").count()
            out["index"].append(nav)
        ms = out["interactions_ms"]
        ms["filter_arm"] = 1000 * _timed(lambda: page.select_option("#f-arm", "guided"))
        ms["search"] = 1000 * _timed(lambda: page.fill("#q", "softmax"))
        page.fill("#q", "")
        page.select_option("#f-arm", "")
        ms["sort_impl"] = 1000 * _timed(lambda: page.locator("#episodes th[data-col=impl_score]").click())
        for pth in pages:
            page.goto(pth.as_uri())
            nav = page.evaluate(NAV)
            nav["page"] = pth.name
            out["episode"].append(nav)
        for _ in range(repeats):
            page.goto(report.as_uri())
            out["report"].append(page.evaluate(NAV))
        browser.close()
    return out


def summary(rows: list[dict], key: str) -> dict:
    v = sorted(r[key] for r in rows)
    return {"median": round(statistics.median(v), 1), "p90": round(v[int(0.9 * (len(v) - 1))], 1),
            "max": round(v[-1], 1), "n": len(v)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "data" / "view_load.json")
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--repeats", type=int, default=5, help="loads of the index and of the report")
    ap.add_argument("--work", type=Path, default=None, help="keep the run and site here (default: a temp dir)")
    args = ap.parse_args()
    if CHROMIUM is None:
        sys.exit("no chromium (apt-get install chromium)")
    from d2kgrade.suite import Suite

    work = args.work or Path(tempfile.mkdtemp(prefix="d2k-view-load-"))
    tasks = tuple(Suite(ROOT).task_ids)
    t0 = time.perf_counter()
    run = make_paired_run(work, tasks=tasks, seeds=args.seeds, concurrency=2)
    t_run = time.perf_counter() - t0
    site = work / "site"
    t_view = _timed(lambda: cli("view", str(run), "--out", str(site), "--suite", str(ROOT), "--reference-figures",
                                str(ROOT / "benchmarks" / "data" / "references_h200.json")))
    report = work / "report" / "report.html"
    t_report = _timed(lambda: cli("report", str(run), "--out", str(report), "--viewer", str(site)))
    m = measure(site, report, args.repeats)
    files = [p for p in site.rglob("*") if p.is_file()]
    result = {
        "command": "python benchmarks/view_load.py " + " ".join(sys.argv[1:]),
        "date": time.strftime("%Y-%m-%d"), "machine": f"{platform.machine()}, {platform.processor() or 'cpu'}",
        "cpus": os.cpu_count(), "load_avg_1min_at_end": round(os.getloadavg()[0], 2),
        "python": platform.python_version(), "chromium": CHROMIUM, "playwright": metadata.version("playwright"),
        "tasks": len(tasks), "arms": 2, "seeds": args.seeds, "episodes": len(m["episode"]),
        "build_s": {"run_and_judge": round(t_run, 1), "view": round(t_view, 2), "report": round(t_report, 2)},
        "site": {"files": len(files), "bytes": sum(p.stat().st_size for p in files),
                 "index_data_bytes": (site / "data" / "episodes.js").stat().st_size,
                 "largest_page_bytes": max(p.stat().st_size for p in (site / "e").rglob("*.html"))},
        "index_load_ms": summary(m["index"], "load_ms"), "index_table_rendered_ms": summary(m["index"], "table_ms"),
        "index_rows_shown": m["index"][0]["rows_shown"],
        "episode_page_load_ms": summary(m["episode"], "load_ms"),
        "slowest_episode_page": max(m["episode"], key=lambda r: r["load_ms"])["page"],
        "report_load_ms": summary(m["report"], "load_ms"), "interactions_ms": {
            k: round(v, 1) for k, v in m["interactions_ms"].items()},
        "note": "file:// in headless Chromium; times include Playwright's round trips for the interactions; the "
                "machine's cores are shared with other jobs (load average above), so the maxima are noisy",
    }
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
