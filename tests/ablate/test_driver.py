"""The ablation flow with a fake evaluator that plays a GPU: the softmax reference's real variants, timed by a
clock that knows which file it runs (one ablation costs 20%, one nothing, one breaks the kernel), with noise.
Then a run directory: every episode's kernel and the reference, records appended, estimates from the reference,
and a resume that evaluates nothing twice."""

from __future__ import annotations

from pathlib import Path

import pytest

from d2kgrade.ablate.driver import AblateConfig, Subject, ablate_kernel, ablate_run, select_properties
from d2kgrade.ablate.results import load_run_ablations
from d2kgrade.errors import UserError
from d2kgrade.runstore import EPISODE_COLUMNS, RunStore
from d2kgrade.suite import Suite
from tests.ablate.fakes import FakeGPU

ROOT = Path(__file__).resolve().parents[2]
SUITE = Suite(ROOT)
REF = SUITE.reference_kernels("softmax")["triton"]
def test_one_kernel_on_a_fake_gpu() -> None:
    fake = FakeGPU()
    wanted = ["L3.exp2-fold", "L2.tiled-two-sweep", "L2.split-row-combine", "L1.online-normalizer"]
    recs = {r.property.split(".", 1)[1]: r for r in ablate_kernel(
        Subject("softmax", REF, "reference:softmax", arm="reference"), SUITE, AblateConfig(rounds=6, seed=1),
        properties=wanted, evaluate=fake)}
    exp2, sweep, split, online = (recs[k] for k in ("L3.exp2-fold", "L2.tiled-two-sweep", "L2.split-row-combine",
                                                    "L1.online-normalizer"))
    assert exp2.status == "load_bearing" and exp2.ci_low < 1.2 < exp2.ci_high and exp2.transform == "exp2_to_exp"
    assert exp2.noise_pct is not None and exp2.noise_pct < 2 and exp2.rounds == 6 and exp2.gpu == "FakeGPU"
    assert [w.name for w in exp2.workloads] == ["rows_4k", "vocab_rows"]
    assert exp2.workloads[0].original_ms == pytest.approx(1.0, abs=0.02)
    assert sweep.status == "not_load_bearing" and sweep.ci_low <= 1.0 + sweep.noise_pct / 100
    assert split.status == "broke_correctness" and "out of tolerance" in split.message and split.slowdown is None
    assert online.status == "no_transform" and "algorithm" in online.message
    # correctness first (hidden workload on), then 6 rounds of orig, the two live variants, orig again
    checks = [c for c in fake.calls if not c[2]]
    assert len(checks) == 4 and all(h for _, h, _ in checks)
    timed = [c[0] for c in fake.calls if c[2]]
    assert len(timed) == 6 * 4 and timed[:4] == ["triton", "softmax_L3_exp2_fold", "softmax_L2_tiled_two_sweep",
                                                 "triton"]
    assert not any(h for _, h, t in fake.calls if t)


def test_cpu_is_correctness_only_and_a_failing_original_times_nothing(tmp_path: Path) -> None:
    recs = ablate_kernel(Subject("softmax", REF, "x"), SUITE, AblateConfig(), properties=["L3.exp2-fold"],
                         evaluate=FakeGPU(device="cpu"))
    assert [r.status for r in recs] == ["untimed"] and "timing needs cuda" in recs[0].message
    broken = tmp_path / "softmax_L2_split_row_combine.py"  # the fake fails this name
    broken.write_text(REF.read_text())
    recs = ablate_kernel(Subject("softmax", broken, "y"), SUITE, AblateConfig(), properties=["L3.exp2-fold"],
                         evaluate=FakeGPU())
    assert recs[0].status == "untimed" and "the original itself fails" in recs[0].message


def test_property_selection() -> None:
    rubric = SUITE.load_rubric("softmax")
    assert [p.id for p in select_properties(rubric, ["exp2-fold", "softmax.L2.rows-per-program"])] == [
        "softmax.L3.exp2-fold", "softmax.L2.rows-per-program"]
    with pytest.raises(UserError, match="not a property"):
        select_properties(rubric, ["L9.nope"])


def _run_dir(root: Path) -> Path:
    """Two episodes: e1's kernel is the reference without exp2 (the real transform's output), e2's the reference."""
    from d2kgrade.ablate.registry import load_all
    from d2kgrade.ablate.transforms._base import run_transform

    no_exp2 = run_transform(load_all()["exp2_to_exp"], REF.read_text(), {}).source
    store = RunStore(root)
    for eid, arm, kernel in (("e1", "guided", no_exp2), ("e2", "unguided", REF.read_text())):
        rel = f"episodes/{eid}/kernels/v001_kernel.py"
        (root / rel).parent.mkdir(parents=True)
        (root / rel).write_text(kernel)
        row = {c: None for c in EPISODE_COLUMNS}
        row.update(run_id="r1", episode_id=eid, model="m", agent="llm", arm=arm, guidance="all", task="softmax",
                   seed=3, status="finished", turns=1, tokens_in=1, tokens_out=1, wall_s=1.0, final_status="passed",
                   correct=1, kernel_path=rel, submissions=1, tool_calls=1, suite_version="s", task_version="t",
                   config_json="{}", env_json="{}", attempt=1, started_at="2026-01-01T00:00:00Z",
                   ended_at="2026-01-01T00:01:00Z")
        store.finish_episode(row, workloads=[])
    row.update(episode_id="e3", kernel_path=None)  # an episode without a kernel is skipped
    store.finish_episode(row, workloads=[])
    store.close()
    return root


def test_run_directory_with_estimates_and_resume(tmp_path: Path) -> None:
    run = _run_dir(tmp_path / "run")
    fake = FakeGPU()
    wanted = ["L3.exp2-fold", "L3.reciprocal-scale"]
    recs = ablate_run(run, SUITE, AblateConfig(rounds=3, seed=2), evaluate=fake, properties=wanted)
    assert recs == load_run_ablations(run)
    by = {(r.episode, r.property.rsplit(".", 1)[1]): r for r in recs}
    assert set(by) == {(e, p) for e in ("reference:softmax", "e1", "e2") for p in ("exp2-fold", "reciprocal-scale")}
    ref = by[("reference:softmax", "exp2-fold")]
    assert ref.status == "load_bearing" and ref.arm == "reference" and ref.model is None
    assert by[("e2", "exp2-fold")].status == "load_bearing" and by[("e2", "exp2-fold")].arm == "unguided"
    lost = by[("e1", "exp2-fold")]
    assert lost.status == "not_present" and not lost.present and lost.estimated_from_reference
    assert (lost.slowdown, lost.ci_low) == (ref.slowdown, ref.ci_low) and "estimated from reference:softmax" in \
        lost.message
    kept = by[("e1", "reciprocal-scale")]
    assert kept.status == "not_load_bearing" and not kept.estimated_from_reference
    assert kept.seed == 3 and kept.model == "m" and kept.arm == "guided"
    n_calls = len(fake.calls)
    again = ablate_run(run, SUITE, AblateConfig(rounds=3, seed=2), evaluate=fake, properties=wanted)
    assert len(fake.calls) == n_calls and again == recs  # resumed: nothing evaluated twice
    assert (run / "ablations" / "e1" / "softmax_L3_reciprocal_scale.py").is_file()
    with pytest.raises(UserError, match="no run store"):
        ablate_run(tmp_path, SUITE, AblateConfig(), evaluate=fake)


def test_a_transform_fault_or_an_unparsable_file_is_that_propertys_no_transform(monkeypatch) -> None:
    """One property's transform raising (its own bug on an unusual kernel) or libcst refusing the file is recorded
    with the reason; the other properties are still checked and timed."""
    from d2kgrade.ablate import driver

    real = driver.ablate_source

    def faulty(source: str, prop):
        if prop.id.endswith("exp2-fold"):
            raise IndexError("list index out of range")
        if prop.id.endswith("reciprocal-scale"):
            raise UserError("triton.py: libcst cannot parse it (line 3)")
        return real(source, prop)

    monkeypatch.setattr(driver, "ablate_source", faulty)
    fake = FakeGPU()
    recs = {r.property.rsplit(".", 1)[1]: r for r in ablate_kernel(
        Subject("softmax", REF, "reference:softmax"), SUITE, AblateConfig(rounds=3, seed=1),
        properties=["L3.exp2-fold", "L3.reciprocal-scale", "L2.tiled-two-sweep"], evaluate=fake)}
    fault, parse, sweep = recs["exp2-fold"], recs["reciprocal-scale"], recs["tiled-two-sweep"]
    assert fault.status == "no_transform" and fault.present and fault.slowdown is None
    assert fault.message == "the transform failed on this file: IndexError: list index out of range"
    assert parse.status == "no_transform" and "libcst cannot parse" in parse.message
    assert sweep.status == "not_load_bearing" and sweep.rounds == 3
    assert {c[0] for c in fake.calls} == {"triton", "softmax_L2_tiled_two_sweep"}


class Cut(Exception):
    """The machine going away mid-run."""


class CutGPU(FakeGPU):
    """A FakeGPU that records every evaluated path and dies at the first evaluation under ``cut_at``."""

    def __init__(self, cut_at: str | None = None) -> None:
        super().__init__()
        self.cut_at, self.paths = cut_at, []

    def __call__(self, task_id, path, **kw):
        if self.cut_at and self.cut_at in Path(path).parts:
            raise Cut(str(path))
        self.paths.append(Path(path))
        return super().__call__(task_id, path, **kw)


def test_a_run_cut_mid_way_resumes_with_only_the_unfinished_kernel(tmp_path: Path) -> None:
    """The run dies while e2 is being ablated (after the reference and e1 were written) and its last line was
    cut short; the rerun evaluates only e2, and the result equals an uncut run's."""
    from d2kgrade.ablate.results import ABLATIONS_FILE

    wanted = ["L3.exp2-fold", "L3.reciprocal-scale"]
    whole = ablate_run(_run_dir(tmp_path / "whole"), SUITE, AblateConfig(rounds=3, seed=2), evaluate=FakeGPU(),
                       properties=wanted)
    run = _run_dir(tmp_path / "run")
    with pytest.raises(Cut):
        ablate_run(run, SUITE, AblateConfig(rounds=3, seed=2), evaluate=CutGPU(cut_at="e2"), properties=wanted)
    written = load_run_ablations(run)
    assert {r.episode for r in written} == {"reference:softmax", "e1"}
    with (run / ABLATIONS_FILE).open("a") as fh:
        fh.write('{"task": "softmax", "episode": "e2", "prop')  # a crash while writing
    fake = CutGPU()
    again = ablate_run(run, SUITE, AblateConfig(rounds=3, seed=2), evaluate=fake, properties=wanted)
    assert fake.paths and all("e2" in p.parts for p in fake.paths)
    def outcome(recs):  # the fake's noise depends on the order of its calls, so the figures differ a little
        return sorted((r.episode, r.property, r.status, r.transform, r.present, r.estimated_from_reference,
                       r.slowdown is None) for r in recs)

    assert outcome(again) == outcome(whole) and len(again) == 6
    e2 = {r.property.rsplit(".", 1)[1]: r for r in again if r.episode == "e2"}
    assert e2["exp2-fold"].slowdown == pytest.approx(1.2, abs=0.02)


class FlakyGPU(FakeGPU):
    """tiled_two_sweep passes the correctness check but fails once timed; exp2_fold is beyond the interpreter."""

    def __call__(self, task_id, path, **kw):
        res = super().__call__(task_id, path, **kw)
        name = Path(path).stem
        if name == "softmax_L2_tiled_two_sweep" and kw["timing"]:
            return res.model_copy(update={"status": "incorrect", "correct": False, "message": "y[0, 1] is NaN"})
        if name == "softmax_L3_exp2_fold":
            return res.model_copy(update={"status": "unsupported_on_cpu", "correct": False,
                                          "message": "tl.inline_asm_elementwise"})
        return res


def test_a_variant_failing_in_a_timed_round_and_one_the_interpreter_cannot_run() -> None:
    fake = FlakyGPU()
    recs = {r.property.rsplit(".", 1)[1]: r for r in ablate_kernel(
        Subject("softmax", REF, "reference:softmax"), SUITE, AblateConfig(rounds=3, seed=1),
        properties=["L3.exp2-fold", "L2.tiled-two-sweep", "L3.reciprocal-scale"], evaluate=fake)}
    late, interp, kept = recs["tiled-two-sweep"], recs["exp2-fold"], recs["reciprocal-scale"]
    assert late.status == "broke_correctness" and late.message.startswith("failed in timing round 1: incorrect")
    assert late.slowdown is None
    assert interp.status == "untimed" and "the interpreter cannot run the variant" in interp.message
    assert kept.status == "not_load_bearing" and kept.rounds == 3 and len(kept.workloads) == 2
    timed = [c[0] for c in fake.calls if c[2]]  # the failing variant leaves the rounds after its first failure
    assert timed.count("softmax_L2_tiled_two_sweep") == 1 and timed.count("softmax_L3_reciprocal_scale") == 3


@pytest.mark.slow  # 8 sandboxed evaluations, 50-90 s on the 2-core machine
def test_the_timed_path_through_the_real_evaluator_on_the_host_clock() -> None:
    """The cuda branch of the driver against the real sandboxed evaluator (its timing plumbing run on the CPU
    with the host clock, EvalOptions.host_timing): the rounds read real EvalResults into a slowdown with an
    interval and a noise. Only the environment's device is relabelled cuda; the figures mean nothing."""
    from d2kgrade.ablate.driver import default_evaluator
    from tests.runner.test_evaluate import CEILINGS

    real = default_evaluator(ROOT, timing_options={"host_timing": True, "ceilings": CEILINGS, "target_s": 0.05,
                                                   "min_reps": 3, "max_reps": 4, "trials": 1})
    timed: list[bool] = []

    def as_cuda(task_id, path, *, device, timing, **kw):
        res = real(task_id, path, device="cpu", timing=timing, **kw)
        timed.append(timing)
        return res.model_copy(update={"environment": res.environment.model_copy(update={"device": "cuda"})})

    (rec,) = ablate_kernel(Subject("softmax", REF, "reference:softmax"), SUITE,
                           AblateConfig(rounds=2, seed=5, timeout_s=300), properties=["L3.exp2-fold"],
                           evaluate=as_cuda)
    assert rec.status in ("load_bearing", "not_load_bearing"), rec.message
    assert rec.rounds == 2 and rec.ci_low <= rec.slowdown <= rec.ci_high and rec.noise_pct is not None
    (w,) = rec.workloads
    assert w.name == "smoke" and w.original_ms > 0 and w.ablated_ms > 0
    assert timed == [False, False, *[True] * 6]
