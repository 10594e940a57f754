"""Synthetic runs for the score, report and annotate tests: plain tables that follow the run-store contract."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pandas as pd

from d2kgrade.grades import PropertyGrade, file_grade
from d2kgrade.schema import Rubric


def rubric_for(task: str, slugs_per_level: dict[str, int] | None = None) -> Rubric:
    """A small rubric with ``slugs_per_level`` properties per level (default 2, 2, 1)."""
    per = slugs_per_level or {"L1": 2, "L2": 2, "L3": 1}
    props = [{"id": f"{task}.{lv}.p{i}", "level": lv, "judge": {"question": f"Is {lv} p{i} there?", "met": "yes",
                                                                    "not_met": "no"}}
             for lv, n in per.items() for i in range(n)]
    return Rubric.model_validate({"task": task, "properties": props})


def grade_line(rubric: Rubric, episode_id: str, kind: str, rater: str, present: set[str]) -> str:
    grades = [PropertyGrade(property_id=p.id, level=p.level, verdict="present" if p.id in present else "absent",
                            rater=rater) for p in rubric.properties]
    fg = file_grade(rubric, f"{episode_id}.{'py' if kind == 'code' else 'md'}", rater, grades, kind=kind,
                    item=episode_id)
    return fg.model_dump_json()


def make_run(root: Path, *, models=("m1", "m2"), tasks=("ta", "tb", "tc", "td"), seeds=(0,),
             arms=("unguided", "guided"), seed: int = 0, with_reference: bool = True, with_grades: bool = True,
             with_files: bool = False, p_correct=(0.6, 0.9)) -> Path:
    """Write episodes.csv, workloads.csv and grades.jsonl into ``root`` (a fake run directory)."""
    rng = np.random.default_rng(seed)
    root.mkdir(parents=True, exist_ok=True)
    eps, wls, lines = [], [], []
    rubrics = {t: rubric_for(t) for t in tasks}
    wl_names = ("w1", "w2", "w3")

    def add_episode(eid, model, agent, arm, guidance, task, s, correct, speeds):
        eps.append({"run_id": "r0", "episode_id": eid, "model": model, "agent": agent, "arm": arm,
                    "guidance": guidance, "task": task, "seed": s, "status": "finished", "turns": 10,
                    "tokens_in": 1000, "tokens_out": 200, "cost_usd": 0.01, "wall_s": 60.0,
                    "final_status": "passed" if correct else "incorrect", "correct": correct,
                    "design_note_path": f"notes/{eid}.md" if with_files else "",
                    "kernel_path": f"kernels/{eid}.py" if with_files else "", "suite_version": "test"})
        for w, sp in zip(wl_names, speeds):
            wls.append({"episode_id": eid, "workload": w, "status": "passed" if correct else "incorrect",
                        "time_ms": 1.0 / sp if correct else math.nan, "eager_ms": 1.0, "compiled_ms": 0.8,
                        "speedup_eager": sp if correct else math.nan,
                        "speedup_compiled": sp * 0.8 if correct else math.nan,
                        "roofline_fraction": min(1.0, 0.3 * sp) if correct else math.nan})
        wls.append({"episode_id": eid, "workload": "hidden", "status": "passed" if correct else "incorrect",
                    "time_ms": math.nan, "eager_ms": math.nan, "compiled_ms": math.nan, "speedup_eager": 100.0,
                    "speedup_compiled": math.nan, "roofline_fraction": math.nan})
        if with_files:
            (root / "kernels").mkdir(exist_ok=True)
            (root / "notes").mkdir(exist_ok=True)
            (root / "kernels" / f"{eid}.py").write_text(f"# kernel of {task}\ndef kernel(x):\n    return x\n")
            (root / "notes" / f"{eid}.md").write_text(f"Design for {task}: tile and fuse.\n")

    for task in tasks:
        if with_reference:
            add_episode(f"ref-{task}", "reference", "reference", "guided", "all", task, 0, True,
                        [2.0, 2.5, 3.0])
    for mi, model in enumerate(models):
        for task in tasks:
            for arm in arms:
                guidance = "all" if arm == "guided" else "none"
                for s in seeds:
                    eid = f"{model}-{task}-{arm}-{s}"
                    p = p_correct[1] if arm == "guided" else p_correct[0]
                    correct = bool(rng.random() < p)
                    base = 1.6 if arm == "guided" else 1.0
                    speeds = [float(base * math.exp(rng.normal(0, 0.4))) for _ in wl_names]
                    if arm == "propose":
                        correct, speeds = False, []
                    add_episode(eid, model, "llm", arm, guidance, task, s, correct, speeds)
                    if with_grades:
                        rub = rubrics[task]
                        q = 0.75 if arm == "guided" else 0.4
                        proposed = {p.id for p in rub.properties if rng.random() < q}
                        implemented = {p for p in proposed if rng.random() < 0.8} | {
                            p.id for p in rub.properties if rng.random() < 0.1}
                        lines.append(grade_line(rub, eid, "proposal", "llm", proposed))
                        if arm != "propose":
                            lines.append(grade_line(rub, eid, "code", "combined", implemented))
                            lines.append(grade_line(rub, eid, "code", "static", implemented))
    pd.DataFrame(eps).to_csv(root / "episodes.csv", index=False)
    pd.DataFrame(wls).to_csv(root / "workloads.csv", index=False)
    if with_grades:
        (root / "grades.jsonl").write_text("\n".join(lines) + "\n")
    return root


def write_tables(root: Path, episodes: list[dict], workloads: list[dict], grades: list[str] | None = None) -> Path:
    """Write hand-made tables into a run directory."""
    root.mkdir(parents=True, exist_ok=True)
    pd.DataFrame(episodes).to_csv(root / "episodes.csv", index=False)
    pd.DataFrame(workloads).to_csv(root / "workloads.csv", index=False)
    if grades is not None:
        (root / "grades.jsonl").write_text("\n".join(grades) + "\n")
    return root


def episode(eid: str, task: str, arm: str, correct: bool, *, model: str = "m", agent: str = "llm",
            seed: int = 0) -> dict:
    return {"episode_id": eid, "model": model, "agent": agent, "arm": arm,
            "guidance": "all" if arm == "guided" else "none", "task": task, "seed": seed, "correct": correct}


def workloads(eid: str, speeds: list[float], *, compiled: list[float] | None = None,
              roofline: list[float] | None = None, status: str = "passed") -> list[dict]:
    out = []
    for i, s in enumerate(speeds):
        out.append({"episode_id": eid, "workload": f"w{i + 1}", "status": status, "speedup_eager": s,
                    "speedup_compiled": (compiled or speeds)[i], "roofline_fraction": (roofline or [0.5] * 9)[i]})
    out.append({"episode_id": eid, "workload": "hidden", "status": status, "speedup_eager": 1000.0,
                "speedup_compiled": 1000.0, "roofline_fraction": 1.0})
    return out


def dump_json(path: Path, data) -> Path:
    path.write_text(json.dumps(data))
    return path
