"""The evaluator's building blocks on CPU: memory poisoning, output screening,
input rotation, the output checks of timed calls and the batched timing loop (on the host clock)."""

from __future__ import annotations

import math
import time

import pytest
import torch

from runner.timing import (MAX_PAD_MS, Recheck, Rotation, bits_differ, count_bad, flush_buffer, pad_for, timed_reps,
                           wall_batch)
from runner.trials import bad_output, output_tuple, perturb_, poison, same_bits


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16, torch.float64])
def test_poison_turns_every_float_into_nan(dtype: torch.dtype) -> None:
    t = torch.randn(7, 13).to(dtype)
    view = t[2:5]
    poison(view)  # the whole storage, not only the view
    assert torch.isnan(t.float()).all()


def test_poison_ints_and_non_tensors() -> None:
    t = torch.arange(10, dtype=torch.int32)
    poison(t)
    assert (t == -1).all()
    poison(object())  # ignored, no error


def test_same_bits() -> None:
    a = torch.tensor([1.0, float("nan"), -0.0])
    assert same_bits(a, a.clone()) and not same_bits(a, torch.tensor([1.0, float("nan"), 0.0]))


def test_bad_output_screens_without_touching_subclasses() -> None:
    class Sneaky(torch.Tensor):
        touched = False

        @classmethod
        def __torch_function__(cls, func, types, args=(), kwargs=None):
            Sneaky.touched = True
            return super().__torch_function__(func, types, args, kwargs or {})

    s = torch.zeros(3).as_subclass(Sneaky)
    Sneaky.touched = False
    assert "not a plain torch.Tensor" in bad_output(s, torch.device("cpu"))
    assert not Sneaky.touched
    assert "meta" in bad_output(torch.empty(3, device="meta"), torch.device("cpu"))
    assert "sparse" in bad_output(torch.eye(3).to_sparse(), torch.device("cpu"))
    assert "cuda" in bad_output(torch.zeros(3), torch.device("cuda"))
    assert bad_output(torch.zeros(3), torch.device("cpu")) is None

    class FakeTuple(tuple):
        def __iter__(self):
            raise AssertionError("iterated")

    assert output_tuple(FakeTuple((1, 2))) == (FakeTuple((1, 2)),)
    assert output_tuple((1, 2)) == (1, 2) and output_tuple([3]) == (3,)


def test_perturb_changes_a_few_values_in_range() -> None:
    x = torch.randn(37, 1000)
    y = x.clone()
    g = torch.Generator().manual_seed(3)
    changed = perturb_((y, torch.arange(4)), g, k=4)
    diff = (y != x).sum().item()
    assert len(changed) == 4 and 1 <= diff <= 4
    assert y.min() >= x.min() and y.max() <= x.max()


def test_rotation_never_reuses_a_buffer_with_the_same_content() -> None:
    contents = [(torch.full((4,), float(i)),) for i in range(3)]
    rot = Rotation.make(contents)
    last: dict[int, int] = {}
    for r in range(30):
        (buf,), c = rot.prepare(r)
        b = rot.slot(r)[0]
        assert buf.data_ptr() == rot.buffers[b][0].data_ptr() and buf[0].item() == c
        assert last.get(b) != c, f"rep {r}: buffer {b} holds content {c} twice in a row"
        last[b] = c
    assert {rot.slot(r)[1] for r in range(9)} == {0, 1, 2}


def test_count_bad_matches_the_tolerance_rule() -> None:
    ref = torch.tensor([1.0, 2.0, float("inf"), float("nan"), 0.0])
    assert count_bad(ref.clone(), ref, 1e-6, 1e-5) == 0
    out = ref.clone()
    out[0] = 1.0 + 2e-5  # |d| = 2e-5 > 1e-6 + 1e-5
    out[4] = float("nan")
    assert count_bad(out, ref, 1e-6, 1e-5) == 2
    assert count_bad(torch.zeros(3), torch.zeros(4), 0, 0) == 4
    assert math.isclose(count_bad(torch.ones(10), torch.ones(10) * (1 + 1e-6), 0.0, 2e-6), 0)


CPU = torch.device("cpu")


def _rotation(sets: int = 3) -> Rotation:
    g = torch.Generator().manual_seed(5)
    contents = [(torch.randn(1823, generator=g),) for _ in range(sets)]
    return Rotation.make(contents, [(c[0] * 2,) for c in contents])


def _timed(kernel, reps: int = 9) -> tuple[list[float], Recheck, list[torch.Tensor]]:
    rot = _rotation()
    check = Recheck(rot.refs, [(1e-6, 1e-5)], CPU)
    outs: list[torch.Tensor] = []

    def call(args):
        out = kernel(args[0])
        outs.append(out)
        return out

    samples = timed_reps(call, rot, reps, flush_buffer(CPU), check)
    return samples, check, outs


def test_timed_outputs_checked_in_full_once_per_input_then_bit_for_bit() -> None:
    samples, check, outs = _timed(lambda x: x * 2)
    assert len(samples) == 9 and check.calls == 9 and check.problems == [] and not check.full
    assert all(torch.isnan(o).all() for o in outs)  # every checked output is poisoned before it is released


def test_a_kernel_that_changes_its_answers_is_retimed_with_full_checks_and_caught() -> None:
    calls = [0]

    def late_garbage(x):
        calls[0] += 1
        return x * 2 + (1.0 if calls[0] > 4 else 0.0)  # right on the first call for each input only

    samples, check, _ = _timed(late_garbage)
    assert check.full and len(samples) == 9 and check.calls == 18  # timed again, every output vs the reference
    assert check.problems and all("out of tolerance" in p for p in check.problems)


def test_a_nondeterministic_correct_kernel_passes_with_full_checks() -> None:
    g = torch.Generator().manual_seed(1)
    samples, check, _ = _timed(lambda x: x * 2 + 1e-9 * torch.randn(x.shape, generator=g))
    assert check.full and check.problems == [] and check.calls == 18
    rot = _rotation()
    assert wall_batch(lambda a: a[0] * 2, rot, 2, check)["calls"] == 6 and check.problems == []


def test_a_wrong_first_output_repeated_bit_for_bit_is_counted_every_time() -> None:
    _, check, _ = _timed(lambda x: x * 3)
    assert len(check.problems) == 9 and not check.full
    rot = _rotation()
    bad = Recheck(rot.refs, [(1e-6, 1e-5)], CPU)
    bad(0, (rot.refs[0][0].clone(), rot.refs[0][0].clone()))
    bad(1, rot.refs[1][0].double())
    bad(2, rot.refs[2][0].clone()[:5])
    bad.settle()
    assert [p.split(" ")[0] for p in bad.problems] == ["returned", "dtype", "shape"], bad.problems


def test_bits_differ_counts_nan_payloads_and_signed_zeros_at_any_alignment() -> None:
    a = torch.zeros(9, dtype=torch.bfloat16)[1:]  # a storage offset of 2 bytes: no int64 view
    b = a.clone()
    assert int(bits_differ(a, b)) == 0
    b[3] = -0.0
    assert int(bits_differ(a, b)) == 1
    n = torch.full((8,), float("nan"))
    assert int(bits_differ(n, n.clone())) == 0


def test_the_pad_follows_the_host_time_of_a_rep() -> None:
    stats: dict[str, float] = {}

    def slow_host(args):
        time.sleep(0.002)  # host code slower than its (here: no) GPU work
        return args[0] * 2

    timed_reps(slow_host, _rotation(), 3, flush_buffer(CPU), stats=stats, pad_ms=1.0)  # the spin is a no-op on CPU
    assert stats["host_ms_per_rep"] >= 2.0
    assert pad_for(stats["host_ms_per_rep"]) == min(MAX_PAD_MS, 1.5 * stats["host_ms_per_rep"])
    assert pad_for(0.1) == pytest.approx(0.15) and pad_for(1e3) == MAX_PAD_MS and pad_for(-1.0) == 0.0
