"""The viewer and the report in a real browser (Debian's Chromium through Playwright), from file://: the
episodes table, an episode's transcript, kernel evidence, per-workload table and paired link, the report's
tables at 1400 px and its links into the viewer. Screenshots go to the test's artifacts folder."""

from __future__ import annotations

import json

from tests.view.conftest import PairedRun


def _rows(paired: PairedRun) -> list[dict]:
    return json.loads((paired.site / "data" / "episodes.js").read_text().split("window.D2K_EPISODES = ", 1)[1]
                      .rstrip().rstrip(";"))


def _episode_id(paired: PairedRun, task: str, arm: str) -> str:
    return next(r["id"] for r in _rows(paired) if r["task"] == task and r["arm"] == arm)


def test_index_filters_sorts_and_opens_an_episode(paired: PairedRun, page, artifacts):
    page.goto(paired.site.joinpath("index.html").as_uri())
    page.wait_for_selector("#episodes tbody tr")
    assert page.locator("#episodes tbody tr").count() == 4
    assert page.locator("#count").inner_text() == "4 of 4 episodes"
    page.screenshot(path=str(artifacts / "index.png"), full_page=True)
    page.select_option("#f-arm", "guided")
    assert page.locator("#episodes tbody tr").count() == 2
    page.fill("#q", "layernorm")
    assert page.locator("#episodes tbody tr").count() == 1
    assert "arm=guided" in page.evaluate("location.hash")  # the filter is in the URL: the report links to it
    page.fill("#q", "")
    page.select_option("#f-arm", "")
    page.locator("#episodes th[data-col=impl_score]").click()
    page.locator("#episodes th[data-col=impl_score]").click()  # descending: the best-graded episode first
    shown = page.eval_on_selector_all("#episodes tbody tr", "rs => rs.map(r => r.dataset.id)")
    impl = {r["id"]: r["impl_score"] for r in _rows(paired)}
    assert [impl[i] for i in shown] == sorted(impl.values(), reverse=True)
    first = page.locator("#episodes tbody tr").first
    first.locator("a").click()
    page.wait_for_selector("#transcript")
    assert page.url.endswith(f"{shown[0]}.html")
    assert page.errors == []


def test_episode_page_shows_transcript_evidence_workloads_and_pair(paired: PairedRun, page, artifacts):
    eid = _episode_id(paired, "softmax", "guided")
    page.goto(paired.site.joinpath("e").glob(f"*/{eid}.html").__next__().as_uri())
    # the transcript: one entry per line of transcript.jsonl, tool calls and results among them
    lines = (paired.run / "episodes" / eid / "transcript.jsonl").read_text().splitlines()
    assert page.locator("#transcript .entry").count() == len(lines)
    roles = [json.loads(x).get("role", "event") for x in lines]
    assert page.locator("#transcript .entry[data-role=tool]").count() == roles.count("tool") == 5
    assert page.locator("#transcript .call code", has_text="write_file").count() == 2
    # the kernel: every line the grades cite as evidence of a present property is highlighted
    grades = [json.loads(x) for x in (paired.run / "grades.jsonl").read_text().splitlines()]
    cited = {ln for g in grades if g["item"] == eid and g["kind"] == "code" for p in g["properties"]
             if p["verdict"] == "present" for e in p["evidence"] for ln in range(e["start_line"], e["end_line"] + 1)}
    assert cited
    shown = {int(x.split("-L")[1]) for x in page.eval_on_selector_all("#kernels pre:first-of-type .ln.ev",
                                                                      "els => els.map(e => e.id)")}
    assert shown == cited
    # clicking a property lights up its lines
    pid, lines = next((p["property_id"], {ln for e in p["evidence"] for ln in range(e["start_line"], e["end_line"] + 1)})
                      for g in grades if g["item"] == eid and g["kind"] == "code" and g["rater"] == "combined"
                      for p in g["properties"] if p["verdict"] == "present" and p["evidence"])
    page.locator("#grades a.pid", has_text=pid).click()
    lit = page.eval_on_selector_all("#kernels pre:first-of-type .ln.focus", "els => els.map(e => e.id)")
    assert {int(x.split("-L")[1]) for x in lit} >= lines
    assert page.locator(f"details[id='p-{pid}']").get_attribute("open") is not None
    # the per-workload table: the task's four workloads and the hidden one, beside the H200 expert figures
    rows = page.locator("table.workloads tbody tr")
    assert rows.count() == 5
    assert "ms" in rows.nth(0).locator("td").nth(10).inner_text()  # expert reference column
    assert page.locator("table.baselines", has_text="out of tolerance").count() == 1
    page.screenshot(path=str(artifacts / "episode.png"), full_page=True)
    # the paired episode of the other arm
    page.locator("#summary .pairs a").click()
    page.wait_for_selector("#summary")
    assert page.url.endswith(f"{_episode_id(paired, 'softmax', 'unguided')}.html")
    assert page.locator("h1").inner_text() == _episode_id(paired, "softmax", "unguided")
    page.screenshot(path=str(artifacts / "paired.png"), full_page=True)
    assert page.errors == []


def test_report_fits_1400px_has_no_empty_cells_and_links_into_the_viewer(paired: PairedRun, page, artifacts):
    page.goto(paired.report.as_uri())
    state = page.evaluate("""() => ({
        images: [...document.images].map(i => i.complete && i.naturalWidth > 0),
        tables: [...document.querySelectorAll('.tbl')].map(t => [t.scrollWidth, t.clientWidth]),
        body: document.documentElement.scrollWidth,
        text: document.body.innerText})""")
    assert state["images"] and all(state["images"])
    assert all(sw <= cw for sw, cw in state["tables"]), state["tables"]  # no table scrolls at 1400 px
    assert state["body"] <= 1400
    assert "– → –" not in state["text"] and "(– )" not in state["text"]
    for heading in ("What the runs hold", "Headline: guided vs unguided", "Performance Score per arm",
                    "Design properties proposed and implemented, per level", "Ablations"):
        assert heading in state["text"]
    page.screenshot(path=str(artifacts / "report.png"), full_page=True)
    page.locator("table a", has_text="layernorm").first.click()  # a per-task row: its episodes in the viewer
    page.wait_for_selector("#episodes tbody tr")
    assert page.locator("#episodes tbody tr").count() == 2
    assert set(page.eval_on_selector_all("#episodes tbody tr", "rs => rs.map(r => r.dataset.id)")) == {
        _episode_id(paired, "layernorm", "guided"), _episode_id(paired, "layernorm", "unguided")}
    assert page.errors == []
