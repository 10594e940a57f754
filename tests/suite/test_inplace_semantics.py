"""In-place outputs: a task's semantics text allows writing an output over an input exactly when its
``inplace`` declaration (``{output: input}``) says so, and both name the same tensors.

The text's form is ``<output> may alias <input>`` or ``<output> may be written in place over the <input>``; any
other mention of in-place writing or aliasing in a task's semantics is an error of this test (the evaluator only
reads the declaration, so a text it cannot read here would promise something the evaluator refuses)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from d2kgrade.schema import Task
from d2kgrade.suite import Suite

ROOT = Path(__file__).resolve().parents[2]
SUITE = Suite(ROOT)
TASKS = SUITE.task_ids

# "<output> may alias <input>", "<output> may be written in place over the <input>", "<output> may overwrite <input>"
_PAIR = re.compile(r"\b([A-Za-z_]\w*) may (?:alias|overwrite|be written in place over)(?: the)? ([A-Za-z_]\w*)")
# Anything that talks about in-place writing or aliasing at all.
_MENTION = re.compile(r"in[- ]place|\balias|\boverwrit", re.IGNORECASE)


def inplace_in_text(text: str) -> dict[str, str]:
    """The ``{output: input}`` pairs a semantics text allows, read from its ``may alias`` phrases."""
    return {out: inp for out, inp in _PAIR.findall(text)}


def test_the_reader_finds_both_phrasings():
    assert inplace_in_text("dlogits may be written in place over the logits.") == {"dlogits": "logits"}
    assert inplace_in_text("In-place output is allowed: q_out may alias q and k_out may alias k.") == {
        "q_out": "q", "k_out": "k"}
    assert inplace_in_text("y = softmax(x) for each row.") == {}


@pytest.mark.parametrize("task_id", TASKS)
def test_semantics_text_and_declaration_agree(task_id):
    task: Task = SUITE.load_task(task_id)
    said = inplace_in_text(task.semantics)
    assert said == dict(task.inplace), (
        f"{task_id}: the semantics allow {said or 'no in-place output'}, task.yaml declares "
        f"inplace: {dict(task.inplace) or '{}'}")
    if _MENTION.search(task.semantics):
        assert said, f"{task_id}: the semantics mention in-place writing but name no '<output> may alias <input>'"
    outputs, inputs = {t.name for t in task.outputs}, {t.name for t in task.inputs}
    for out, inp in said.items():
        assert out in outputs and inp in inputs, f"{task_id}: '{out} may alias {inp}' names no output/input pair"


def test_the_tasks_that_allow_in_place_output():
    """The two tasks whose semantics allow it (the gradient over the logits, RoPE over q and k); a change here is
    a change of the benchmark's contract."""
    declared = {t: dict(SUITE.load_task(t).inplace) for t in TASKS if SUITE.load_task(t).inplace}
    assert declared == {"cross_entropy": {"dlogits": "logits"}, "rotary_embedding": {"q_out": "q", "k_out": "k"}}
