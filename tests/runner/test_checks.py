"""The worker's building blocks on CPU: memory poisoning, input digests, output screening, the harness guard,
input rotation and the fast output check."""

from __future__ import annotations

import math
import sys
import threading
import types

import pytest
import torch

from runner.integrity import Guard
from runner.timing import Rotation, count_bad
from runner.trials import bad_output, digest, output_tuple, perturb_, poison, same_bits


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


def test_same_bits_and_digest() -> None:
    a = torch.tensor([1.0, float("nan"), -0.0])
    assert same_bits(a, a.clone()) and not same_bits(a, torch.tensor([1.0, float("nan"), 0.0]))
    x = (torch.randn(37, 1000), torch.randint(0, 9, (5,), dtype=torch.int64))
    d = digest(x, 99)
    assert d == digest(tuple(t.clone() for t in x), 99)
    y = x[0].clone()
    y[36, 999] += 1e-3
    assert digest((y, x[1]), 99) != d
    swapped = x[0].clone()
    swapped[0, 0], swapped[0, 1] = x[0][0, 1], x[0][0, 0]
    assert digest((swapped, x[1]), 99) != d  # a plain sum would not see a swap


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


def test_guard_sees_replaced_functions_code_and_modes() -> None:
    mod = types.ModuleType("runner_fake_mod")
    exec("def f(x):\n    return x\nclass C:\n    def m(self):\n        return 1\n", mod.__dict__)
    sys.modules["runner_fake_mod"] = mod
    try:
        g = Guard([mod, torch, torch.Tensor])
        assert g.violations() == []
        mod.new_attr = 1  # additions are tolerated
        assert g.violations() == []
        mod.f.__code__ = (lambda x: 0).__code__
        assert any("f was replaced" in v for v in g.violations())
        mod.f = lambda x: x
        torch.Tensor.clone_backup = torch.Tensor.clone
        assert g.violations()
    finally:
        del sys.modules["runner_fake_mod"]
        del torch.Tensor.clone_backup
    g = Guard([torch.Tensor])
    assert "__le__" not in vars(torch.Tensor)  # inherited from TensorBase: shadowing it is an addition
    try:
        torch.Tensor.__le__ = lambda a, b: True
        assert any("__le__" in v for v in g.violations())
    finally:
        del torch.Tensor.__le__
    assert g.violations() == []
    from torch.overrides import TorchFunctionMode

    with TorchFunctionMode():
        assert any("mode" in v for v in g.violations())
    stop = threading.Event()
    t = threading.Thread(target=stop.wait)
    t.start()
    try:
        assert g.new_threads() == 1
    finally:
        stop.set()
        t.join()
    assert g.new_threads() == 0


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
