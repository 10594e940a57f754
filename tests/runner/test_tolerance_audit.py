"""benchmarks/tolerance_audit.py on the CPU smoke workloads: honest implementations stay inside the tolerance and
a broken kernel is reported with its traceback, not raised."""

from __future__ import annotations

from pathlib import Path

import pytest

import benchmarks.tolerance_audit as audit_mod
from benchmarks.tolerance_audit import audit_task

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("task_id", ["softmax", "moe_permute", "gemm_fp8_blockwise"])
def test_honest_implementations_use_less_than_the_tolerance(task_id):
    rows = audit_task(task_id, ROOT / "references" / task_id / "triton.py", seed=3, device="cpu")
    assert rows and all("error" not in r for r in rows)
    for r in rows:
        for res in r["results"]:
            if res["impl"] == "baseline" and r["dist"] != "normal":
                continue  # torch.topk breaks ties its own way (moe_permute "quantized_ties"): timing only
            assert res["ok"], (r["dist"], res)
            assert all(o["tol_ratio"] is not None and o["tol_ratio"] <= 1.0 for o in res["outputs"])


def test_a_crashing_kernel_is_a_finding(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text("def kernel(x):\n    raise RuntimeError('boom in the kernel')\n")
    rows = audit_task("softmax", bad, seed=0, device="cpu")
    expert = [res for r in rows for res in r["results"] if res["impl"] == "expert"]
    assert expert and all(not e["ok"] and "boom in the kernel" in e["error"] for e in expert)
    assert all(res["ok"] for r in rows for res in r["results"] if res["impl"] == "baseline")
    assert "expert ERROR" in audit_mod._summary(expert[0])


# ------------------------------------------------------------------------------ many draws (--seeds)

import contextlib  # noqa: E402
import json  # noqa: E402
import math  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
from types import SimpleNamespace  # noqa: E402

import numpy as np  # noqa: E402
import torch  # noqa: E402

from benchmarks.tolerance_audit import element_stats, parse_seeds, rotation_draws  # noqa: E402
from benchmarks.tolerance_summary import gumbel_quantile, quantile, summarize  # noqa: E402
from runner.compare import compare_tensor  # noqa: E402
from runner.direct import load_reference  # noqa: E402
from runner.evaluate import load_task  # noqa: E402
from runner.inputs import WorkloadSpec  # noqa: E402

GEMM_DISTS = ("normal", "int_valued", "row_col_scaled", "cancelling")


@pytest.fixture(scope="module")
def gemm_draws(tmp_path_factory):
    """The CLI as device_round.sh runs it (through the per-task subprocess), on the fp16 smoke GEMM: 3 evaluator
    seeds x 4 rotation sets under the Triton interpreter."""
    out = tmp_path_factory.mktemp("audit") / "draws.json"
    proc = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "tolerance_audit.py"), "--device", "cpu",
                           "--tasks", "gemm_bf16", "--workloads", "smoke", "--seeds", "5:8", "--out", str(out)],
                          capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    return json.loads(out.read_text())


def test_draws_name_their_evaluator_seed_set_and_distribution(gemm_draws):
    rows = gemm_draws["rows"]
    assert gemm_draws["complete"] and gemm_draws["draws"] == {"seeds": [5, 8], "sets": 4, "dists": None,
                                                              "salt": "timing", "tag": "0"}
    assert [(r["draw"]["eval_seed"], r["draw"]["set"]) for r in rows] == [(s, j) for s in (5, 6, 7) for j in range(4)]
    assert all(r["dist"] == r["draw"]["dist"] == GEMM_DISTS[r["draw"]["set"]] for r in rows)
    assert len({r["seed"] for r in rows}) == 12 and all("error" not in r for r in rows)


def test_each_draw_records_the_worst_element_and_the_tail(gemm_draws):
    for r in gemm_draws["rows"]:
        assert [res["impl"] for res in r["results"]] == ["baseline", "expert"]
        for res in r["results"]:
            assert res["ok"], res
            (o,) = res["outputs"]
            assert o["tol"] == [0.005, 0.005]  # the smoke workload is fp16
            w = o["worst"]
            assert math.isclose(w["tol_ratio"], o["tol_ratio"], rel_tol=1e-12, abs_tol=0.0)  # the evaluator's share
            assert o["n_above"]["1.0"] == o["n_bad"] == 0
            assert o["n_above"]["0.5"] >= o["n_above"]["0.8"] >= o["n_above"]["1.0"]
            if r["dist"] == "int_valued":  # exact in fp32: nothing differs, so there is no worst element
                assert w["index"] is None and w["tol_ratio"] == 0.0 and o["atol_needed"] == 0.0
                continue
            i, j = w["index"]
            assert 0 <= i < 67 and 0 <= j < 93 and w["index_mod"]["64"] == [i % 64, j % 64]
            assert w["abs_err"] == abs(w["got"] - w["ref"]) and w["abs_ref"] == abs(w["ref"])
            assert math.isclose(w["tol_ratio"], w["abs_err"] / (0.005 + 0.005 * w["abs_ref"]), rel_tol=1e-12)
            ctx = w["context"]
            assert ctx["abs_dot"] > 0 and 0 <= ctx["err_over_bound"] < 1  # honest: inside Higham's bound


def test_the_summary_groups_the_draws(gemm_draws):
    summary = {s["dist"]: s for s in gemm_draws["summary"]}
    assert set(summary) == {*GEMM_DISTS, "all"}
    assert summary["all"]["n_draws"] == 12 and all(summary[d]["n_draws"] == 3 for d in GEMM_DISTS)
    for dist, s in summary.items():
        rows = [r for r in gemm_draws["rows"] if dist in ("all", r["dist"])]
        for impl in ("baseline", "expert"):
            got = s["impls"][impl]["C"]
            ratios = [res["outputs"][0]["worst"]["tol_ratio"] for r in rows for res in r["results"]
                      if res["impl"] == impl]
            assert got["n_draws"] == len(ratios) and got["n_fail"] == 0
            assert got["tol_ratio"]["q90"] == pytest.approx(float(np.quantile(ratios, 0.9)), rel=1e-12, abs=1e-15)
            assert got["tol_ratio"]["max"] == max(ratios)
            assert got["tol_ratio"]["1_in_100"]["empirical"] is None  # 3 or 12 draws say nothing about 1 in 100
        assert s["paired"]["expert"]["n"] == len(rows)


def test_the_draws_are_the_evaluators_rotation(monkeypatch):
    """The audit's sets are the ones the evaluator's own ``Timer.rotation`` draws (through ``Evaluator._make``)
    for the first timed batch, huge inputs shared from set 0 included (here B, with the threshold lowered)."""
    import benchmarks.tolerance_audit as audit
    from runner.eval_timing import Timer
    from runner.evaluator import Evaluator
    from runner.huge_inputs import huge_mask
    from runner.inputs import distributions

    task, ref = load_task(ROOT, "gemm_bf16"), load_reference(ROOT / "tasks" / "gemm_bf16")
    spec = WorkloadSpec.resolve(task, task.smoke)
    threshold = 25_000  # A is 67 x 160 x 2 = 21440 bytes, B 93 x 160 x 2 = 29760
    monkeypatch.setattr(audit, "HUGE_INPUT_BYTES", threshold)
    for eval_seed in (0, 12345):
        ev = SimpleNamespace(ref=ref, seed=eval_seed, device=torch.device("cpu"), dists=distributions(ref),
                             huge=lambda s: huge_mask(task, s, threshold))
        ev._make = lambda s, *parts, dist, ev=ev: Evaluator._make(ev, s, *parts, dist=dist)
        timer = SimpleNamespace(ev=ev, n_sets=lambda s: 4, _spent=lambda step: contextlib.nullcontext())
        want = Timer.rotation(timer, task.smoke, spec, "timing", "0").contents
        got = list(rotation_draws(task, ref, spec, range(eval_seed, eval_seed + 1), 4, "cpu"))
        assert [d["set"] for d, _ in got] == [0, 1, 2, 3]
        for (_, inputs), expected in zip(got, want, strict=True):
            assert all(torch.equal(a, b) for a, b in zip(inputs, expected, strict=True))
        assert all(inputs[1] is got[0][1][1] for _, inputs in got)  # B: set 0's tensor in every set
        only = list(rotation_draws(task, ref, spec, range(eval_seed, eval_seed + 1), 4, "cpu", ["row_col_scaled"]))
        assert [d["set"] for d, _ in only] == [2] and torch.equal(only[0][1][0], want[2][0])


def test_parse_seeds():
    assert parse_seeds("3", base=7) == range(7, 10) and parse_seeds("100:164") == range(100, 164)
    with pytest.raises(ValueError):
        parse_seeds("5:5")


def test_element_stats_on_a_hand_made_output():
    tol = (0.25, 0.5)  # binary fractions: every share below is exact
    ref = torch.tensor([[1.0, 0.0, 2.0, math.inf, -4.0]])
    got = torch.tensor([[1.5, 0.125, 2.0, math.inf, -6.0]])
    s = element_stats(got, ref, tol)
    # shares |err| / (0.25 + 0.5 |ref|): 0.5/0.75, 0.125/0.25, 0, 0 (inf matched), 2/2.25
    assert s["worst"]["index"] == [0, 4] and s["worst"]["tol_ratio"] == pytest.approx(2 / 2.25, rel=1e-15)
    assert s["worst"]["index_mod"]["128"] == [0, 4] and s["worst"]["abs_err"] == 2.0 and s["worst"]["abs_ref"] == 4.0
    assert s["n_above"] == {"0.5": 2, "0.8": 1, "1.0": 0}
    assert s["atol_needed"] == 0.125  # max |err| - 0.5 |ref|: element 1
    assert s["rtol_needed"] == 0.4375  # max (|err| - 0.25) / |ref|: element 4
    assert compare_tensor("x", got, ref, tol).tol_ratio == s["worst"]["tol_ratio"]
    # the smallest atol (rtol) that passes, by the evaluator's own comparison
    assert compare_tensor("x", got, ref, (s["atol_needed"], 0.5)).ok
    assert not compare_tensor("x", got, ref, (s["atol_needed"] * 0.99, 0.5)).ok
    assert compare_tensor("x", got, ref, (0.25, s["rtol_needed"])).ok
    assert not compare_tensor("x", got, ref, (0.25, s["rtol_needed"] * 0.99)).ok
    nan = element_stats(torch.tensor([1.0, math.nan]), torch.tensor([1.0, 3.0]), tol)
    assert nan["worst"]["index"] == [1] and nan["worst"]["tol_ratio"] is None  # an infinite share
    assert nan["n_above"]["1.0"] == 1 and nan["atol_needed"] is None and nan["rtol_needed"] is None
    zero = element_stats(torch.tensor([0.5, 0.0]), torch.tensor([0.0, 0.0]), tol)
    assert zero["rtol_needed"] is None and zero["atol_needed"] == 0.5  # |ref| = 0: no rtol passes


def test_quantile_and_gumbel_by_hand_and_against_numpy_scipy():
    xs = [0.4, 0.1, 1.5, 0.3, 0.2]
    assert quantile(xs, 0.5) == 0.3
    assert quantile(xs, 0.9) == pytest.approx(1.06)  # h = 4 * 0.9 = 3.6: 0.4 + 0.6 * (1.5 - 0.4)
    assert quantile([1.0, math.inf], 1.0) == math.inf and quantile([2.0], 0.3) == 2.0
    for q in (0.0, 0.25, 0.5, 0.9, 0.99, 1.0):
        assert quantile(xs, q) == pytest.approx(float(np.quantile(xs, q)), rel=1e-12)
    # moments: mean 0.5, sd sqrt(1.3 / 4) = 0.5700877; scale sd sqrt(6)/pi = 0.4444956, location
    # 0.5 - 0.5772157 scale = 0.2434304; -ln(-ln 0.99) = 4.6001492
    assert gumbel_quantile(xs, 0.99) == pytest.approx(0.2434304 + 0.4444956 * 4.6001492, abs=1e-6)
    scipy_stats = pytest.importorskip("scipy.stats")
    b = math.sqrt(0.325) * math.sqrt(6) / math.pi
    fit = scipy_stats.gumbel_r(loc=0.5 - np.euler_gamma * b, scale=b)
    assert fit.mean() == pytest.approx(0.5) and fit.std() == pytest.approx(math.sqrt(0.325))  # moments matched
    assert gumbel_quantile(xs, 0.999) == pytest.approx(float(fit.ppf(0.999)), rel=1e-12)
    assert gumbel_quantile([1.0], 0.99) is None and gumbel_quantile([1.0, math.inf], 0.99) is None


def _row(dist: str, ratios: dict[str, float], at: list[int] | None = None) -> dict:
    """One draw's row as the audit writes it, for the fields the summary reads."""
    def out(x: float) -> dict:
        mod = None if at is None else {str(m): [a % m for a in at] for m in (64, 128, 256)}
        return {"name": "C", "ok": x <= 1.0, "tol_ratio": x, "n_bad": int(x > 1.0), "n_total": 10,
                "tol": [0.01, 0.02], "worst": {"tol_ratio": x, "index_mod": mod},
                "n_above": {"0.5": int(x > 0.5), "0.8": int(x > 0.8), "1.0": int(x > 1.0)},
                "atol_needed": max(0.0, x - 1.0) * 0.01, "rtol_needed": max(0.0, x - 1.0) * 0.02}
    return {"task": "t", "workload": "w", "dist": dist, "draw": {}, "results": [
        {"impl": impl, "ok": x <= 1.0, "outputs": [out(x)]} for impl, x in ratios.items()]}


def test_summary_on_hand_made_rows():
    base = [0.4, 0.1, 1.5, 0.3, 0.2]
    expert = [0.4, 0.2, 0.1, 0.3, 1.6]
    ats = [[0, 130], [128, 2], [0, 2], [5, 7], None]  # mod 128: [0, 2] three times; the last draw has none
    rows = [_row("a", {"baseline": b, "expert": e}, at) for b, e, at in zip(base, expert, ats, strict=True)]
    rows.append({"task": "t", "workload": "w", "dist": "a", "error": "inputs failed"})  # no draw: left out
    (s,) = [g for g in summarize(rows) if g["dist"] == "a"]
    b = s["impls"]["baseline"]["C"]
    assert s["n_draws"] == 5 and b["n_draws"] == 5 and b["n_fail"] == 1 and b["tol"] == [0.01, 0.02]
    assert b["tol_ratio"]["q50"] == 0.3 and b["tol_ratio"]["q90"] == pytest.approx(1.06) and b["tol_ratio"]["max"] == 1.5
    f = b["tol_ratio"]["1_in_100"]["gumbel"]
    assert f == pytest.approx(2.288176, abs=1e-6) and b["tol_ratio"]["1_in_100"]["value"] == f
    assert b["tolerance_fail_1_in_100"]["scaled"] == pytest.approx([0.01 * f, 0.02 * f])
    assert b["atol_needed"]["max"] == pytest.approx(0.005) and b["n_above_mean"] == {"0.5": 0.2, "0.8": 0.2,
                                                                                      "1.0": 0.2}
    assert b["worst_index_mod"]["128"] == {"mode": [0, 2], "count": 3, "of": 4}
    assert b["worst_index_mod"]["256"]["count"] == 1
    assert s["paired"] == {"expert": {"against": "baseline", "n": 5, "higher": 2, "equal": 2, "lower": 1,
                                      "above_its_max": 1}}
    many = [_row("b", {"baseline": i / 200}) for i in range(200)]
    (m,) = [g for g in summarize(many) if g["dist"] == "b"]
    tail = m["impls"]["baseline"]["C"]["tol_ratio"]["1_in_100"]
    assert tail["empirical"] == pytest.approx(197.01 / 200) and tail["value"] == tail["empirical"]  # h = 199 * 0.99
    assert m["impls"]["baseline"]["C"]["tol_ratio"]["1_in_1000"]["empirical"] is None
