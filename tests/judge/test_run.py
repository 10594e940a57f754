"""Whole runs against the fake server through the real openai client: verdicts, evidence, votes, re-asks,
failures, the cache, proposals, batching, combined mode, interruption, cost."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import pytest

from d2kgrade.errors import UserError
from d2kgrade.grades import PropertyGrade, file_grade, implementation_score
from d2kgrade.judge.cache import JudgeCache
from d2kgrade.judge.fusion import FUSION_RULE_VERSION
from d2kgrade.judge.run import JudgeItem, judge_files
from d2kgrade.judge.usage import PriceTable
from tests.fakes.openai_server import FakeOpenAI
from tests.judge.conftest import KERNEL, Responder, answer, make_config

P = "softmax."
INVENTED = {"content": answer("met", [{"quote": "acc += tl.dot(a, b)", "start_line": 14, "end_line": 14}])}
PLAN = {
    **{(P + "L1.one-read-one-write", k): ["met"] for k in range(3)},
    **{(P + "L3.exp2-fold", k): ["met"] for k in range(3)},
    **{(P + "L3.vector-io", k): [INVENTED] for k in range(3)},
    # split vote: 2 met, 1 not_met
    (P + "L2.row-in-registers", 0): ["met"], (P + "L2.row-in-registers", 1): ["not_met"],
    (P + "L2.row-in-registers", 2): ["met"],
    # invalid JSON, then a schema violation, then a valid answer: two re-asks
    **{(P + "L2.rows-per-program", k): [{"content": "It is met, I think."},
                                        {"content": json.dumps({"verdict": "met"})}, "met"] for k in range(3)},
    # never valid: unknown, never not_met
    **{(P + "L2.tiled-two-sweep", k): [{"content": "{\"verdict\": \"met\""}] for k in range(3)},
    **{(P + "L2.split-row-combine", k): ["not_applicable"] for k in range(3)},
    # 500, 429, then an answer
    **{(P + "L3.reciprocal-scale", k): [{"status": 500}, {"status": 429}, "met"] for k in range(3)},
}


def verdicts(fg) -> dict[str, str]:
    return {g.property_id.removeprefix(P): g.verdict for g in fg.properties}


def test_full_run_verdicts_evidence_votes_and_reasks(rubric, kernel_file, tmp_path):
    with FakeOpenAI(responder=Responder(PLAN)) as srv:
        run = judge_files(rubric, [JudgeItem(kernel_file)], make_config(srv.base_url, samples=3),
                          cache=JudgeCache(tmp_path / "c.sqlite"), use_static_backend=False)
    llm = run.results[0].llm
    assert verdicts(llm) == {
        "L1.one-read-one-write": "present", "L1.online-normalizer": "absent", "L2.row-in-registers": "present",
        "L2.rows-per-program": "present", "L2.tiled-two-sweep": "unknown", "L2.split-row-combine": "absent",
        "L3.exp2-fold": "present", "L3.vector-io": "unknown", "L3.reciprocal-scale": "present"}
    by = {g.property_id.removeprefix(P): g for g in llm.properties}
    assert by["L3.exp2-fold"].evidence[0].start_line == 15 and "tl.exp2" in by["L3.exp2-fold"].evidence[0].code
    assert by["L3.vector-io"].details["flags"] == ["unverified_evidence"] and not by["L3.vector-io"].evidence
    assert "does not occur" in by["L3.vector-io"].details["samples"][0]["quote_problems"][0]
    assert by["L2.row-in-registers"].details["unstable"] is True
    assert by["L2.row-in-registers"].confidence == pytest.approx(0.6667, abs=1e-4)
    assert by["L2.tiled-two-sweep"].details["flags"] == ["unparseable"]
    assert by["L2.split-row-combine"].details["flags"] == ["not_applicable"]
    assert by["L1.one-read-one-write"].details["unstable"] is False and by["L1.one-read-one-write"].confidence == 1
    # the score is grades.implementation_score of these verdicts: L1 1/2, L2 2/4, L3 2/3 of 40/35/25
    assert llm.score == pytest.approx(20 + 17.5 + 25 * 2 / 3)
    assert llm.score == pytest.approx(implementation_score(rubric, llm.properties)[0])
    assert llm.n_unknown == 2 and llm.rater_info["model"] == "fake-judge" and llm.rater_info["samples"] == 3
    # requests: 9 props x 3 samples, + 2 re-asks x 3 (rows-per-program) + 2 x 3 (tiled) + 2 retries x 3
    u = run.usage
    assert (u.calls, u.reasks, u.retries, u.cache_hits, u.failures) == (27 + 6 + 6 + 6, 12, 6, 0, 0)
    assert u.tokens_in == 10 * u.calls - 10 * 6  # the fake reports 10/5 tokens per answered request
    # a re-ask continues the conversation: the bad reply, then a message that names the problem
    reask = next(r for r in srv.requests if len(r["messages"]) == 4)
    assert reask["messages"][2]["role"] == "assistant" and "could not be used" in reask["messages"][3]["content"]
    assert all(r["temperature"] == 0 for r in srv.requests)
    assert {r["seed"] for r in srv.requests} == {0, 1, 2}


def test_second_pass_makes_no_calls_and_changes_invalidate(rubric, kernel_file, tmp_path):
    cache = JudgeCache(tmp_path / "c.sqlite")
    with FakeOpenAI(responder=Responder(PLAN)) as srv:
        cfg = make_config(srv.base_url, samples=2)
        first = judge_files(rubric, [JudgeItem(kernel_file)], cfg, cache=cache, use_static_backend=False)
        n = len(srv.requests)
        second = judge_files(rubric, [JudgeItem(kernel_file)], cfg, cache=cache, use_static_backend=False)
        assert len(srv.requests) == n and second.usage.calls == 0 and second.usage.cache_hits == 18
        assert verdicts(second.results[0].llm) == verdicts(first.results[0].llm)
        assert all(s["cached"] for g in second.results[0].llm.properties for s in g.details["samples"])
        # trailing whitespace does not change the key; a code change does, and so does the model
        kernel_file.write_text(KERNEL.replace("\n", "   \n"))
        judge_files(rubric, [JudgeItem(kernel_file)], cfg, cache=cache, use_static_backend=False)
        assert len(srv.requests) == n
        kernel_file.write_text(KERNEL + "\n# changed\n")
        third = judge_files(rubric, [JudgeItem(kernel_file)], cfg, cache=cache, use_static_backend=False)
        assert third.usage.cache_hits == 0 and third.usage.calls > 0
        other = make_config(srv.base_url, samples=2, model="other-judge")
        assert judge_files(rubric, [JudgeItem(kernel_file)], other, cache=cache,
                           use_static_backend=False).usage.cache_hits == 0


def test_failed_requests_are_unknown_and_retried_next_run(rubric, kernel_file, tmp_path):
    cache = JudgeCache(tmp_path / "c.sqlite")
    down = {(P + "L1.online-normalizer", 0): [{"status": 503}] * 3 + ["met"]}
    with FakeOpenAI(responder=Responder(down, default="not_met")) as srv:
        cfg = make_config(srv.base_url, max_retries=2)
        run = judge_files(rubric, [JudgeItem(kernel_file)], cfg, cache=cache, use_static_backend=False)
        g = next(g for g in run.results[0].llm.properties if g.property_id == P + "L1.online-normalizer")
        assert g.verdict == "unknown" and g.details["flags"] == ["request_failed"] and run.usage.failures == 1
        again = judge_files(rubric, [JudgeItem(kernel_file)], cfg, cache=cache, use_static_backend=False)
    assert again.usage.cache_hits == 8 and again.usage.calls == 1
    assert verdicts(again.results[0].llm)["L1.online-normalizer"] == "present"


def test_proposal_grading(rubric, note_file, tmp_path):
    plan = {(P + "L2.row-in-registers", 0): [{"content": answer("met", [
        {"quote": "One program per row, the whole row in registers", "start_line": 3, "end_line": 3}])}],
        (P + "L3.exp2-fold", 0): [{"content": answer("met", [
            {"quote": "compute exp with exp2 and fold log2(e) into the scale", "start_line": 4, "end_line": 4}])}],
        (P + "L3.vector-io", 0): [{"content": answer("not_met", [
            {"quote": "We might look at vectorized loads later", "start_line": 5, "end_line": 5}])}]}
    with FakeOpenAI(responder=Responder(plan)) as srv:
        run = judge_files(rubric, [JudgeItem(note_file, kind="proposal", item="ep-1")],
                          make_config(srv.base_url), use_static_backend=False)
    fg = run.results[0].llm
    assert fg.kind == "proposal" and fg.item == "ep-1"
    assert {k for k, v in verdicts(fg).items() if v == "present"} == {"L2.row-in-registers", "L3.exp2-fold"}
    ev = next(g for g in fg.properties if g.property_id == P + "L3.exp2-fold").evidence[0]
    assert ev.file == str(note_file) and ev.start_line == 4
    user = srv.requests[0]["messages"][1]["content"]
    assert "design note" in user and "commit" in user and "Static facts" not in user
    assert "BEGIN UNTRUSTED DESIGN NOTE" in user


def test_batch_per_level(rubric, kernel_file):
    plan = {(P + "L3.exp2-fold", 0): ["met"], (P + "L1.one-read-one-write", 0): ["met"]}
    with FakeOpenAI(responder=Responder(plan)) as srv:
        run = judge_files(rubric, [JudgeItem(kernel_file)], make_config(srv.base_url, batch="level"),
                          use_static_backend=False)
    assert len(srv.requests) == 3  # one per level
    assert srv.requests[0]["response_format"]["json_schema"]["name"] == "property_verdicts"
    v = verdicts(run.results[0].llm)
    assert {k for k, x in v.items() if x == "present"} == {"L3.exp2-fold", "L1.one-read-one-write"}
    assert all(x in ("present", "absent") for x in v.values())


def fake_static(verdict_of: dict[str, str]):
    def grade(rubric, path, task=None, gating=False):
        grades = [PropertyGrade(property_id=p.id, level=p.level, verdict=verdict_of.get(p.id, "unknown"),
                                confidence=0.9, rater="static") for p in rubric.properties]
        return file_grade(rubric, str(path), "static", grades, task=task, gating=gating)
    return grade


def test_combined_mode_keeps_both_raw_sets_and_appends_jsonl(rubric, task, kernel_file, note_file, tmp_path):
    static = fake_static({P + "L3.exp2-fold": "present", P + "L1.online-normalizer": "present",
                          P + "L3.vector-io": "absent"})
    plan = {(P + "L3.exp2-fold", 0): ["met"], (P + "L3.vector-io", 0): [INVENTED]}
    out = tmp_path / "grades.jsonl"
    items = [JudgeItem(kernel_file, item="ep-1"), JudgeItem(note_file, kind="proposal", item="ep-1")]
    with FakeOpenAI(responder=Responder(plan)) as srv:
        run = judge_files(rubric, items, make_config(srv.base_url), mode="combined", task=task,
                          static_grader=static, use_static_backend=False, out=out)
    code = run.results[0]
    comb = {g.property_id.removeprefix(P): g for g in code.combined.properties}
    assert comb["L3.exp2-fold"].verdict == "present" and comb["L3.exp2-fold"].details["agreement"] == "agree"
    # static present 0.9 vs judge absent 1.0: the judge wins, recorded as a disagreement
    assert comb["L1.online-normalizer"].verdict == "absent"
    assert comb["L1.online-normalizer"].details["agreement"] == "disagree"
    assert comb["L3.vector-io"].details["agreement"] == "static_only"  # the judge's met was unverified
    assert code.combined.fusion_rule_version == FUSION_RULE_VERSION and code.static.item == "ep-1"
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert sorted((r["kind"], r["rater"]) for r in rows) == [
        ("code", "combined"), ("code", "llm"), ("code", "static"), ("proposal", "combined"), ("proposal", "llm")]
    assert all(r["item"] == "ep-1" for r in rows)
    j = run.to_json()
    prop = next(p for p in j["results"][0]["properties"] if p["id"] == P + "L1.online-normalizer")
    assert (prop["static"]["verdict"], prop["judge"]["verdict"], prop["combined"]["verdict"]) == (
        "present", "absent", "absent")
    assert j["fusion_rule_version"] == FUSION_RULE_VERSION and "api_key" not in j["judge"]
    # a design note has no static side: combined is the judge's verdict
    assert run.results[1].static is None
    assert [g.verdict for g in run.results[1].combined.properties] == [
        g.verdict for g in run.results[1].llm.properties]


def test_combined_without_static_analysis_is_a_user_error(rubric, kernel_file):
    with pytest.raises(UserError, match="--judge combined needs static analysis"):
        judge_files(rubric, [JudgeItem(kernel_file)], make_config("http://127.0.0.1:9/v1"), mode="combined",
                    use_static_backend=False)


def test_interrupted_run_keeps_what_it_judged(rubric, kernel_file, tmp_path):
    other = tmp_path / "k2.py"
    other.write_text(KERNEL.replace("BLOCK_N", "BLOCK"))
    cache, out = JudgeCache(tmp_path / "c.sqlite"), tmp_path / "g.jsonl"
    items = [JudgeItem(kernel_file), JudgeItem(other)]

    def stop(done: int, total: int) -> None:
        if done == 12:
            raise KeyboardInterrupt

    out.write_text('{"a cut-off line from an earlier kill')
    with FakeOpenAI(responder=Responder()) as srv:
        cfg = make_config(srv.base_url, concurrency=1)
        with pytest.raises(KeyboardInterrupt):
            judge_files(rubric, items, cfg, cache=cache, out=out, progress=stop, use_static_backend=False)
        time.sleep(0.2)  # the request in flight lands in the cache
        lines = out.read_text().splitlines()
        assert len(lines) == 2 and json.loads(lines[1])["rater"] == "llm"  # the first file, on its own line
        assert len(cache) >= 12
        again = judge_files(rubric, items, cfg, cache=cache, out=out, use_static_backend=False)
    assert again.usage.cache_hits >= 12 and again.usage.calls <= 6
    assert len(out.read_text().splitlines()) == 4


def test_requests_run_concurrently(rubric, kernel_file):
    state = {"now": 0, "max": 0}
    lock = threading.Lock()
    inner = Responder()

    def slow(body):
        with lock:
            state["now"] += 1
            state["max"] = max(state["max"], state["now"])
        time.sleep(0.1)
        with lock:
            state["now"] -= 1
        return inner(body)

    with FakeOpenAI(responder=slow) as srv:
        t = time.monotonic()
        judge_files(rubric, [JudgeItem(kernel_file)], make_config(srv.base_url, concurrency=4),
                    use_static_backend=False)
        elapsed = time.monotonic() - t
    assert state["max"] == 4 and elapsed < 9 * 0.1


def test_unreadable_files_are_unknown_without_calls_and_cost_is_priced(rubric, tmp_path, kernel_file):
    binary = tmp_path / "bin.py"
    binary.write_bytes(b"\x00\x01\x02")
    prices = PriceTable.model_validate({"fake-judge": {"input": 2.0, "output": 8.0}})
    with FakeOpenAI(responder=Responder()) as srv:
        run = judge_files(rubric, [JudgeItem(binary), JudgeItem(kernel_file)], make_config(srv.base_url),
                          prices=prices, use_static_backend=False)
    bad = run.results[0].llm
    assert bad.error.startswith("binary") and all(g.verdict == "unknown" for g in bad.properties)
    assert run.usage.calls == 9 and run.usage.cost_usd == pytest.approx((90 * 2.0 + 45 * 8.0) / 1e6)
    with pytest.raises(UserError, match="no such file"):
        judge_files(rubric, [JudgeItem(tmp_path / "missing.py")], make_config(srv.base_url),
                    use_static_backend=False)


def test_static_facts_are_labelled_context(rubric, kernel_file):
    with FakeOpenAI(responder=Responder()) as srv:
        judge_files(rubric, [JudgeItem(kernel_file)], make_config(srv.base_url),
                    facts_extractor=lambda p: {"launched": ["_softmax_kernel"], "path": Path(p).name},
                    use_static_backend=False)
        user = srv.requests[0]["messages"][1]["content"]
        assert '"launched":["_softmax_kernel"]' in user and "not a verdict" in user

        def broken(p):
            raise RuntimeError("boom")

        judge_files(rubric, [JudgeItem(kernel_file)], make_config(srv.base_url), facts_extractor=broken,
                    use_static_backend=False)
        assert "static facts unavailable: RuntimeError" in srv.requests[-1]["messages"][1]["content"]


def test_real_static_analysis_in_combined_mode(rubric, kernel_file):
    """With d2kgrade.static present: its facts are summarized into the prompt, its grades are fused."""
    static = pytest.importorskip("d2kgrade.static")
    if not hasattr(static, "grade_file"):
        pytest.skip("static analysis not in this build")
    with FakeOpenAI(responder=Responder({(P + "L3.exp2-fold", 0): ["met"]})) as srv:
        run = judge_files(rubric, [JudgeItem(kernel_file)], make_config(srv.base_url), mode="combined")
        user = srv.requests[0]["messages"][1]["content"]
    assert '"kernel":"_softmax_kernel"' in user and '"tl.exp2":[15]' in user  # the launch and the call's line
    assert len(user) < len(KERNEL) * 6  # a summary, not the analyser's whole IR
    r = run.results[0]
    assert r.static is not None and r.static.rater == "static" and r.combined is not None
    comb = {g.property_id: g for g in r.combined.properties}
    s_exp2 = next(g for g in r.static.properties if g.property_id == P + "L3.exp2-fold")
    expect = "agree" if s_exp2.verdict == "present" else ("llm_only" if s_exp2.verdict == "unknown" else "disagree")
    assert comb[P + "L3.exp2-fold"].details["agreement"] == expect
