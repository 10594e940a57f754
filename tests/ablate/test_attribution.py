"""Per task and arm, what carried the speed and what the missing properties cost: hand-made records, then the
records of a real (fake-GPU) run directory."""

from __future__ import annotations

from pathlib import Path

import pytest

from d2kgrade.ablate.attribution import attribute
from d2kgrade.ablate.driver import AblateConfig, ablate_run
from d2kgrade.ablate.results import AblationRecord
from tests.ablate.fakes import FakeGPU
from tests.ablate.test_driver import SUITE, _run_dir


def rec(episode: str, prop: str, status: str, slowdown: float | None = None, *, arm: str = "guided",
        estimated: bool = False) -> AblationRecord:
    timed = slowdown is not None
    return AblationRecord(task="softmax", episode=episode, arm=arm, property=f"softmax.{prop}", level=prop[:2],
                          present=status != "not_present", status=status, slowdown=slowdown,
                          ci_low=slowdown - 0.02 if timed else None, ci_high=slowdown + 0.02 if timed else None,
                          noise_pct=0.5 if timed else None, estimated_from_reference=estimated)


def test_hand_made_groups() -> None:
    recs = [rec("e1", "L3.exp2-fold", "load_bearing", 1.20), rec("e2", "L3.exp2-fold", "load_bearing", 1.10),
            rec("e3", "L3.exp2-fold", "not_load_bearing", 1.00),
            rec("e1", "L2.tiled-two-sweep", "not_load_bearing", 1.01),
            rec("e2", "L2.split-row-combine", "not_present", 1.50, estimated=True),
            rec("e3", "L2.split-row-combine", "not_present", 1.50, estimated=True),
            rec("e1", "L3.reciprocal-scale", "not_present", 1.02, estimated=True),
            rec("e1", "L3.vector-io", "broke_correctness"), rec("e2", "L1.online-normalizer", "not_present"),
            rec("u1", "L3.exp2-fold", "not_present", 1.3, arm="unguided", estimated=True)]
    guided, unguided = attribute(recs)
    assert (guided.task, guided.arm, guided.episodes) == ("softmax", "guided", 3)
    exp2, sweep = guided.carried
    assert exp2.property == "softmax.L3.exp2-fold" and (exp2.episodes, exp2.load_bearing) == (3, 2)
    assert exp2.slowdown == pytest.approx(1.10) and exp2.ci_low == pytest.approx(1.08)
    assert sweep.property == "softmax.L2.tiled-two-sweep" and sweep.load_bearing == 0
    split, recip = guided.missing  # 0.5 x 2/3 of the episodes before 0.02 x 1/3
    assert (split.property, split.episodes, split.slowdown, split.load_bearing) == (
        "softmax.L2.split-row-combine", 2, 1.5, 1)
    assert recip.property == "softmax.L3.reciprocal-scale" and recip.load_bearing == 0  # ci_low 1.00 < 1.005
    assert unguided.arm == "unguided" and unguided.carried == [] and unguided.missing[0].slowdown == 1.3


def test_a_run_directory(tmp_path: Path) -> None:
    """e1's kernel lacks exp2 (the reference's figure prices it), e2 is the reference: exp2 carried its speed."""
    run = _run_dir(tmp_path / "run")
    recs = ablate_run(run, SUITE, AblateConfig(rounds=3, seed=2), evaluate=FakeGPU(),
                      properties=["L3.exp2-fold", "L3.reciprocal-scale"])
    by = {g.arm: g for g in attribute(recs)}
    assert set(by) == {"guided", "reference", "unguided"}
    assert [e.property for e in by["unguided"].carried if e.load_bearing] == ["softmax.L3.exp2-fold"]
    (lost,) = by["guided"].missing
    assert lost.property == "softmax.L3.exp2-fold" and lost.slowdown == pytest.approx(1.2, abs=0.02)
    assert lost.load_bearing == 1 and [e.property for e in by["guided"].carried] == ["softmax.L3.reciprocal-scale"]
