"""Judging a whole run: every episode's final kernel (``kind='code'``) and design note (``kind='proposal'``).

Reads the run store (:func:`d2kgrade.runstore.load_run`), judges each task's episodes against that task's rubric,
and appends one FileGrade per line to ``RUN_DIR/grades.jsonl`` with ``item`` = the episode id, as each file is
done. Running it again skips the (episode, kind, rater) grades already in the file for the same model, rubric
version and prompt templates, so an interrupted run resumes and a finished one costs nothing. An episode without
a kernel (or a design note) gets all properties ``absent``, with the reason in ``error``: nothing was
implemented (or proposed).
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from d2kgrade.errors import UserError
from d2kgrade.grades import FileGrade, PropertyGrade, file_grade
from d2kgrade.judge.cache import JudgeCache
from d2kgrade.judge.client import ChatClient
from d2kgrade.judge.fusion import fuse_file
from d2kgrade.judge.prompts import template_hash
from d2kgrade.judge.run import JudgeItem, Mode, judge_files, open_jsonl_for_append
from d2kgrade.judge.settings import JudgeConfig
from d2kgrade.judge.usage import PriceTable, Usage, UsageReport
from d2kgrade.suite import Suite

log = logging.getLogger(__name__)
GRADES_FILE = "grades.jsonl"


@dataclass
class RunJudgeReport:
    """What :func:`judge_run_dir` did."""

    out: Path
    """The grades file."""
    judged: int = 0
    """Files judged now (kernels and notes)."""
    skipped: int = 0
    """Files whose grades were already in the file."""
    missing: int = 0
    """Episodes without a kernel or note (graded absent)."""
    scores: list[dict[str, Any]] = field(default_factory=list)
    """Per file: episode, task, kind, rater, score."""
    usage: UsageReport = field(default_factory=UsageReport)
    """Requests, cache hits, tokens, cost."""


def _done_keys(out: Path, model: str) -> set[tuple[str, str, str, int]]:
    """(item, kind, rater, rubric_version) already in ``out`` for this model and templates."""
    done: set[tuple[str, str, str, int]] = set()
    if not out.is_file():
        return done
    for n, line in enumerate(out.read_text(encoding="utf-8").splitlines(), 1):
        try:
            row = json.loads(line)
        except json.JSONDecodeError:
            log.warning("%s:%d: unreadable line ignored (a run killed mid-write?)", out, n)
            continue
        info = row.get("rater_info") or {}
        llm_info = info.get("llm", info) if row.get("rater") == "combined" else info
        if row.get("rater") in ("llm", "combined") and (llm_info.get("model") != model
                                                       or llm_info.get("template_hash") != template_hash()):
            continue
        done.add((row.get("item", ""), row.get("kind", "code"), row.get("rater", ""),
                  int(row.get("rubric_version", 0))))
    return done


def _absent(rubric: Any, path: str, kind: Any, item: str, why: str, task: Any, gating: bool,
            config: JudgeConfig, rater: Any = "llm") -> FileGrade:
    grades = [PropertyGrade(property_id=p.id, level=p.level, verdict="absent", confidence=1.0, rater=rater,
                            reason=why) for p in rubric.properties if not p.deprecated]
    fg = file_grade(rubric, path, rater, grades, kind=kind, task=task, gating=gating, error=why, item=item)
    if rater != "llm":
        return fg
    # the model never saw it, but the grade belongs to this judge's set (one line per item, kind and model)
    return fg.model_copy(update={"rater_info": {"model": config.model, "template_hash": template_hash(),
                                                "no_document": True}})


def judge_run_dir(run_dir: Path, suite: Suite, config: JudgeConfig, *, mode: Mode = "llm", gating: bool = False,
                  cache: JudgeCache | None = None, prices: PriceTable | None = None,
                  progress: Callable[[int, int], None] | None = None, **judge_kw: Any) -> RunJudgeReport:
    """Judge every episode of the run in ``run_dir`` into ``run_dir/grades.jsonl`` (module docstring)."""
    from d2kgrade.runstore import load_run

    try:
        episodes = load_run(run_dir)["episodes"]
    except FileNotFoundError as exc:
        raise UserError(str(exc)) from None
    out = run_dir / GRADES_FILE
    report = RunJudgeReport(out=out)
    done = _done_keys(out, config.model)
    raters = ["llm"] + (["combined", "static"] if mode == "combined" else [])
    usage = Usage()
    client = ChatClient(config, usage)
    try:
        for task_id, group in episodes.groupby("task", sort=True):
            rubric, task = suite.load_rubric(str(task_id)), suite.load_task(str(task_id))
            items: list[JudgeItem] = []
            for ep in group.itertuples(index=False):
                for kind, rel in (("code", ep.kernel_path), ("proposal", ep.design_note_path)):
                    kind_raters = [r for r in raters if not (kind == "proposal" and r == "static")]
                    if all((ep.episode_id, kind, r, rubric.version) in done for r in kind_raters):
                        report.skipped += 1
                        continue
                    if not isinstance(rel, str) or not rel or not (run_dir / rel).is_file():
                        why = f"the episode has no {'kernel' if kind == 'code' else 'design note'}"
                        report.missing += 1
                        llm = _absent(rubric, str(rel or ""), kind, ep.episode_id, why, task, gating, config)
                        grades = [llm]
                        if mode == "combined":
                            static = (_absent(rubric, str(rel or ""), kind, ep.episode_id, why, task, gating,
                                              config, rater="static") if kind == "code" else None)
                            grades += [static] if static else []
                            grades.append(fuse_file(rubric, static, llm, task=task, gating=gating))
                        _append(out, [g for g in grades
                                      if (g.item, g.kind, g.rater, g.rubric_version) not in done])
                        continue
                    items.append(JudgeItem(run_dir / rel, kind=kind, item=ep.episode_id, display=rel))
            if not items:
                continue
            res = judge_files(rubric, items, config, mode=mode, task=task, gating=gating, cache=cache,
                              prices=prices, out=out, progress=progress, client=client,
                              out_filter=lambda fg: (fg.item, fg.kind, fg.rater, fg.rubric_version) not in done,
                              **judge_kw)
            report.judged += len(items)
            for r in res.results:
                for fg in r.grades():
                    report.scores.append({"item": fg.item, "task": fg.task, "kind": fg.kind, "rater": fg.rater,
                                          "score": fg.score, "n_unknown": fg.n_unknown})
    finally:
        client.close()
    report.usage = usage.report(config.model, prices)
    return report


def _append(out: Path, grades: list[FileGrade]) -> None:
    with open_jsonl_for_append(out) as fh:
        for fg in grades:
            fh.write(fg.model_dump_json() + "\n")
        fh.flush()
        os.fsync(fh.fileno())
