"""Each case fixed by helper H2's review (issue 16, point 2), asserted on the file that has it.

The review corpus (``tests/static/review/<task>/``) was labelled and committed before the rater was run on it;
``test_accuracy.py`` holds whole tasks to a threshold, which would let one shape regress unnoticed. Here every case
names its file, the property it decides and the verdict: the hand label and the static rater must both say it.
The first cases are the CUDA CTA tile that ``cuda_tensor_core(min_tile=...)`` reads (gemm_bf16 rubric v4), on the
in-repo and wild corpora.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path

import pytest

from d2kgrade.static.corpus import load_labels
from d2kgrade.static.grade import grade_file
from d2kgrade.suite import Suite

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent

# (case, corpus/task/file, property without the task prefix, verdict)
CASES = [
    # CUDA CTA tile (cuda_tensor_core min_tile)
    ("64x64 wmma tile from constexpr BM/BN", "corpus/gemm_bf16/cuda_wmma_cp_async.py", "L1.tiled-tensor-core",
     "absent"),
    ("128x256 / 128x128 template instantiations", "corpus/gemm_bf16/mma_sync_grouped.cu", "L1.tiled-tensor-core",
     "present"),
    ("template tile forwarded through a host template", "wild/gemm_bf16/cuda_wmma_template.py",
     "L1.tiled-tensor-core", "present"),
]


@cache
def _verdicts(rel: str) -> tuple[dict[str, str], dict[str, str]]:
    corpus, task, name = rel.split("/", 2)
    rubric = Suite(ROOT).load_rubric(task)
    labels = load_labels(HERE / corpus / task, rubric)[name]
    path = HERE / rel
    fg = grade_file(rubric, path / "kernel.py" if path.is_dir() else path)
    assert not fg.error, fg.error
    return labels, {g.property_id: g.verdict for g in fg.properties}


@pytest.mark.parametrize(("case", "rel", "prop", "verdict"), CASES, ids=[f"{c[1]}:{c[2]}" for c in CASES])
def test_case_is_graded_as_labelled(case, rel, prop, verdict):
    labels, got = _verdicts(rel)
    pid = f"{rel.split('/', 2)[1]}.{prop}"
    assert labels[pid] == verdict, f"{case}: the case table disagrees with labels.yaml"
    assert got[pid] == verdict, f"{case}: {rel} {pid} graded {got[pid]}, labelled {verdict}"


def test_tile_names_and_template_order():
    from d2kgrade.static import extract_facts
    from d2kgrade.static.patterns.mma import template_order, tile_axis

    assert [tile_axis(n) for n in ("BM", "BLOCK_N", "kTileM", "CTA_N", "WM", "BK", "tile_m")] == [
        "m", "n", "m", "n", None, None, "m"]
    facts = extract_facts(HERE / "wild/gemm_bf16/cuda_wmma_template.py")
    fn = facts.functions["cu:gemm_bf16_wmma"]
    assert template_order(facts, fn) == ["BM", "BN", "BK", "STAGES", "WM", "WN"]
