"""Agents without a model: ``reference`` submits an expert kernel, ``replay`` re-submits another run's answer.

``--agent reference`` validates the suite end to end: every task's input maker, reference semantics, expert
kernel and the evaluator, through the same records as an LLM run (on CPU: the smoke workload under the Triton
interpreter). A task without the expert kernel in question ends as ``no_submission`` with a message saying so.

``--agent replay --from RUN_DIR`` re-evaluates each episode's final submission of another run (a new GPU, a
hardened evaluator), keeping its model, arm, guidance, seed and design note; episodes that had no submission
stay ``no_submission``, so the replayed run has the same denominators.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

from runner.agent.episode import EpisodeEnv, EpisodeSpec, Final, Tally, final_evaluation, finish
from runner.agent.recorder import EpisodeRecorder


def keep_kernel(rec: EpisodeRecorder, name: str, source: str) -> str:
    """Keep ``source`` as kernel version 1 of the episode; returns its path relative to RUN_DIR."""
    rel = rec.save_file(f"kernels/v001_{name}", source)
    rec.kernel_version({"version": 1, "turn": 0, "path": name, "file_path": rel,
                        "sha256": hashlib.sha256(source.encode()).hexdigest(), "n_bytes": len(source.encode())})
    return rel


def _submit(env: EpisodeEnv, spec: EpisodeSpec, rec: EpisodeRecorder, tally: Tally, *, name: str, source: str,
            message: str, design_note_path: str | None = None) -> dict[str, Any]:
    kernel_path = keep_kernel(rec, name, source)
    tally.submissions = 1
    final = final_evaluation(env, spec, source=source, filename=name, version=1, eval_id=1, turn=0)
    status_msg = f"{message}; final evaluation: {final.status}" + ("" if final.correct else f": {final.message}")
    return finish(env, spec, rec, tally, status="finished", final=final, message=status_msg,
                  design_note_path=design_note_path, kernel_path=kernel_path, transcript=False)


def run_reference_episode(spec: EpisodeSpec, env: EpisodeEnv, rec: EpisodeRecorder, tally: Tally) -> dict[str, Any]:
    """Submit ``references/<task>/<lang>.py``."""
    lang = spec.lang or "triton"
    path = env.suite_root / "references" / spec.task / f"{lang}.py"
    if not path.is_file():
        return finish(env, spec, rec, tally, status="no_submission", final=Final(), transcript=False,
                      message=f"no expert kernel references/{spec.task}/{lang}.py in the suite")
    return _submit(env, spec, rec, tally, name=f"{lang}.py", source=path.read_text(encoding="utf-8"),
                   message=f"expert kernel references/{spec.task}/{lang}.py")


def run_replay_episode(spec: EpisodeSpec, env: EpisodeEnv, rec: EpisodeRecorder, tally: Tally) -> dict[str, Any]:
    """Re-evaluate another run's final submission of the same episode."""
    src_run = Path(spec.source_run or "")
    design = None
    if spec.source_design_note and (src_run / spec.source_design_note).is_file():
        design = rec.save_file("design_note.md", (src_run / spec.source_design_note).read_text(encoding="utf-8"))
    if not spec.source_kernel:
        return finish(env, spec, rec, tally, status="no_submission", final=Final(), transcript=False,
                      design_note_path=design,
                      message=f"the replayed episode had no submission (status {spec.source_status})")
    kernel = src_run / spec.source_kernel
    if not kernel.is_file():
        raise FileNotFoundError(f"{kernel}: the replayed run's submission is missing")
    name = Path(spec.source_kernel).name.split("_", 1)[-1] if Path(spec.source_kernel).name.startswith("v") \
        else Path(spec.source_kernel).name
    return _submit(env, spec, rec, tally, name=name, source=kernel.read_text(encoding="utf-8"),
                   message=f"replay of {src_run}/{spec.source_kernel}", design_note_path=design)
