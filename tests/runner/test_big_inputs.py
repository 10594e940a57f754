"""Huge inputs (issue 9: a 17 GB page pool, a 10 GB embedding table) are passed as they are, never cloned or
rotated, and fingerprinted after every call (:mod:`runner.huge_inputs`). On CPU the threshold is lowered to
64 KiB, so ``embedding_bag``'s smoke table (6000 x 40 bf16, 480 KB) is "huge" and its indices (9.6 KB) are not.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import torch

import runner.huge_inputs as hi
from runner.evaluate import EvalOptions, run_evaluation

HERE = Path(__file__).resolve().parent
SEED = 20240611
SMALL_HUGE = 64 << 10
TRIALS = 4  # smoke: max(3 trials, 2 distributions) + the repeat trial


def submission(tmp_path: Path, write_from_call: int = 0) -> Path:
    src = (HERE / "big_inputs" / "embedding_bag_sum.py").read_text()
    assert "WRITE_FROM_CALL = 0" in src
    path = tmp_path / f"embedding_bag_write_{write_from_call}.py"
    path.write_text(src.replace("WRITE_FROM_CALL = 0", f"WRITE_FROM_CALL = {write_from_call}"))
    return path


def run(path: Path, huge_input_bytes: int = SMALL_HUGE, **kw: object):
    return run_evaluation("embedding_bag", path, device="cpu", seed=SEED, timeout_s=120, hidden=False,
                          options=EvalOptions(huge_input_bytes=huge_input_bytes, **kw))  # type: ignore[arg-type]


def pointers(log: str) -> dict[int, tuple[int, int]]:
    return {int(c): (int(t), int(i)) for c, t, i in re.findall(r"^PTRS (\d+) (\d+) (\d+)$", log, re.M)}


def test_an_honest_kernel_passes_with_a_huge_input(tmp_path: Path) -> None:
    r = run(submission(tmp_path))
    assert r.status == "passed", r.message + r.log[-2000:]
    seen = pointers(r.log)
    # Every checked call gets one of two shared buffer sets, in turn (the evaluator rewrites them before each call).
    assert len(seen) >= TRIALS + 8 and len({t for t, _ in seen.values()}) == 2


@pytest.mark.parametrize(("from_call", "where"), [(1, "trial 0"), (TRIALS + 1, "rotated call 0")])
def test_a_kernel_that_writes_one_element_of_a_huge_input_is_rejected(tmp_path: Path, from_call: int,
                                                                       where: str) -> None:
    r = run(submission(tmp_path, from_call))
    assert r.status == "rejected" and not r.correct, r.message
    flag = next(f for f in r.flags if f.code == "input_mutated")
    assert flag.message.startswith(where) and "table" in flag.message and "indices" not in flag.message, flag


TIMING = {"host_timing": True, "compile_baseline": False, "baselines": False, "target_s": 0.05, "min_reps": 3,
          "max_reps": 3, "ceilings": {"copy_bytes_per_s": 4.0e12, "mufu_per_s": 4.0e12, "matmul_flops_per_s": {
              "bf16": 8e14, "fp16": 8e14, "fp32": 4e14, "fp8": 1.6e15, "int8": 1.6e15}}}


def test_a_timed_batch_shares_the_huge_input_and_checksums_it(tmp_path: Path) -> None:
    honest = run(submission(tmp_path), **TIMING)
    assert honest.status == "passed" and honest.workloads[0].time is not None, honest.message
    probe = [p for c, p in sorted(pointers(honest.log).items()) if c > TRIALS][:5]  # 2 sets + 3 paced reps
    # Within a batch: one table tensor for every input set and rep (never cloned per set); the small input
    # rotates over the 2 sets' buffers.
    assert len({t for t, _ in probe}) == 1 and len({i for _, i in probe}) == 2, probe
    r = run(submission(tmp_path, TRIALS + 3), **TIMING)
    assert r.status == "rejected", r.message
    flag = next(f for f in r.flags if f.code == "input_mutated")
    assert flag.message.startswith("timed calls") and "table" in flag.message, flag
    control = run(submission(tmp_path), huge_input_bytes=1 << 30, **TIMING)  # not huge: a buffer per set
    probe = [p for c, p in sorted(pointers(control.log).items()) if c > TRIALS][:5]
    assert len({t for t, _ in probe}) == 2, probe


# --------------------------------------------------------------------------------------------- the pieces


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32, torch.float8_e4m3fn, torch.uint8, torch.int64])
def test_the_fingerprint_catches_any_single_changed_bit(monkeypatch: pytest.MonkeyPatch, dtype: torch.dtype) -> None:
    monkeypatch.setattr(hi, "ROWS", 3)  # chunks of 3 x 4096 words, so one tensor spans full and partial chunks
    n_bytes = 3 * 4096 * 4 * 2 + 4096 * 4 + 37 * 4 + 3  # two full chunks, a part chunk, a part row, a byte tail
    n = n_bytes // torch.empty((), dtype=dtype).element_size()
    t = torch.randint(0, 256, (n * torch.empty((), dtype=dtype).element_size(),), dtype=torch.uint8).view(dtype)
    raw = t.view(torch.uint8)
    before = hi.fingerprint(t, 7)
    assert int(hi.fingerprint(t.clone(), 7)) == int(before) and int(hi.fingerprint(t, 8)) != int(before)
    for pos in (0, 4096 * 4 * 3 + 5, raw.numel() // 2, raw.numel() - 1):
        for bit in (0, 7):
            raw[pos] ^= 1 << bit
            assert int(hi.fingerprint(t, 7)) != int(before), (pos, bit)
            raw[pos] ^= 1 << bit
    assert int(hi.fingerprint(t, 7)) == int(before)
    # Two words swapped, or +d and -d at two places, keep a plain sum but not the weighted one.
    words = t.view(torch.uint8)[: (raw.numel() // 4) * 4].view(torch.int32)
    words[10], words[20000] = int(words[20000]), int(words[10])
    assert int(hi.fingerprint(t, 7)) != int(before)


@pytest.mark.parametrize("shape", [(5, 3 * 8 * 2 + 8 + 5), (3, 8), (4, 3), (1, 1)])
def test_the_triton_checksum_is_the_pytorch_one(monkeypatch: pytest.MonkeyPatch, shape: tuple[int, int]) -> None:
    """The verify step checksums every staged rep with the Triton kernel on CUDA and the evaluator may check a
    fetched copy with either: both must give the same integers. Under the interpreter on small chunks (3 x 8 words):
    several whole chunks, a part chunk, a part row; and the rows at once equal each row alone."""
    monkeypatch.setattr(hi, "ROWS", 3)
    monkeypatch.setattr(hi, "COLS", 8)
    monkeypatch.setattr(hi, "DIGEST_BLOCK", 16)  # programs that straddle chunks and rows' ends
    t = torch.randint(-(1 << 31), 1 << 31, shape, dtype=torch.int64).to(torch.int32)
    triton_rows = hi._digest_triton(t, 11).tolist()
    assert triton_rows == hi._digest_torch(t, 11).tolist()
    assert triton_rows == [int(hi.fingerprint(t[r].clone(), 11)) for r in range(shape[0])]
    assert hi.fingerprint_rows(t.view(torch.float32), 11) == triton_rows
    t[0, -1] ^= 1 << 30
    assert hi._digest_triton(t, 11).tolist()[0] != triton_rows[0]


def test_rotation_sets_share_the_first_sets_huge_inputs() -> None:
    made: list[int] = []

    def make(j: int) -> tuple[torch.Tensor, ...]:
        made.append(j)
        return torch.full((4,), float(j)), torch.full((100,), float(j))

    mask = (False, True)
    contents = hi.rotation_contents(make, 3, mask)
    assert made == [0, 1, 2]
    assert all(c[1] is contents[0][1] for c in contents)
    assert [float(c[0][0]) for c in contents] == [0.0, 1.0, 2.0]
