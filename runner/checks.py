"""How the worker judges a kernel's outputs: elementwise against the reference, or by the task's own ``check``
for outputs that are not unique (top-k indices among ties), in the correctness trials and in every timed or
rotated call.

A task opts in from ``reference.py`` (see :func:`runner.direct.checked_outputs`)::

    CHECKED_OUTPUTS = ("indices",)
    def check(inputs, outputs, expected, scalars) -> list[str]: ...

Those outputs get the dtype, shape and finiteness checks, then ``check``; every other output is compared
elementwise with the task's tolerances. ``check`` only ever sees values the submission cannot reach: the harness's
pristine inputs (the originals of a trial, a rotation set's contents), the reference's outputs, and private copies
of the kernel's outputs; it runs in the evaluator process (:mod:`runner.evaluator`), where no submission code ever
ran, so nothing it calls can have been patched.
"""

from __future__ import annotations

from collections.abc import Sequence
from types import ModuleType
from typing import Any

import torch

from runner.compare import Mismatch, check_dtype, compare_tensor
from runner.direct import checked_outputs, custom_check
from runner.timing import Recheck
from runner.trials import bad_output, output_tuple, poison

PENDING_CPU_BYTES = 1 << 30
"""Copies of checked outputs held until a timed batch settles, on the host."""
PENDING_GPU_FRACTION = 0.1
"""... and on the GPU, as a fraction of free memory when the batch starts. Past it the batch settles early (one
host sync): 1024 x 2048 top-k indices are 16 MB, so an H200 holds thousands of calls' worth."""


def judge(task: Any, spec: Any, ref: ModuleType, outs: tuple[Any, ...], expected: Any,
          inputs: tuple[torch.Tensor, ...], device: torch.device) -> list[Mismatch]:
    """One :class:`Mismatch` per output (plus one for the task's ``check`` when it ran).

    ``inputs`` must be the harness's pristine copies, ``expected`` the reference's outputs on them."""
    exp = output_tuple(expected)
    names = spec.output_names
    if len(outs) != len(names):
        return [Mismatch("(outputs)", False, f"returned {len(outs)} outputs, expected {len(names)} "
                         f"({', '.join(names)})")]
    custom = checked_outputs(ref)
    dtypes = task.tensor_dtypes(spec.workload)
    res = []
    for name, o, e in zip(names, outs, exp, strict=True):
        bad = check_dtype(name, o, spec.dtypes[name])
        if bad is None:
            # A checked output is not compared with the reference's choice: type, shape and finiteness only.
            tol = (float("inf"), 0.0) if name in custom else task.tolerance_for(dtypes[name])
            bad = compare_tensor(name, o, e, tol, expect_device=device)
        res.append(bad)
    if custom and all(m.ok for m in res):
        res.append(custom_check(ref, spec, inputs, outs, exp))
    return res


class TaskRecheck(Recheck):
    """A :class:`runner.timing.Recheck` that also runs the task's ``check`` on its checked outputs.

    The elementwise outputs go to the base class unchanged. Each call's outputs are copied (queued on the stream,
    no sync) and the copies judged by ``check`` when the batch settles (or when the held copies pass their budget).
    """

    def __init__(self, refs: Sequence[tuple[torch.Tensor, ...]], tols: Sequence[tuple[float, float]],
                 device: torch.device, *args: Any, ref: ModuleType, spec: Any,
                 contents: Sequence[tuple[torch.Tensor, ...]], **kwargs: Any) -> None:
        checked = set(checked_outputs(ref))
        names = spec.output_names
        self.plain = [i for i, n in enumerate(names) if n not in checked]
        self.checked = [i for i, n in enumerate(names) if n in checked]
        super().__init__([tuple(r[i] for i in self.plain) for r in refs], [tols[i] for i in self.plain], device,
                         *args, **kwargs)
        self.all_refs = list(refs)
        self.ref_module = ref
        self.spec = spec
        self.contents = contents
        self._outs: list[tuple[int, tuple[torch.Tensor, ...]]] = []
        self._held = 0
        if device.type == "cuda":
            free, _total = torch.cuda.mem_get_info(device)
            self.budget = int(PENDING_GPU_FRACTION * free)
        else:
            self.budget = PENDING_CPU_BYTES

    def __call__(self, content: int, out: Any) -> None:
        outs = output_tuple(out)
        refs = self.all_refs[content]
        if len(outs) != len(refs):
            super().__call__(content, out)  # counts the call and reports the count mismatch
            return
        screened = True
        for i in self.checked:
            o, r = outs[i], refs[i]
            why = bad_output(o, self.device)
            if why is None and o.dtype != r.dtype:
                why = f"dtype {o.dtype}, expected {r.dtype}"
            elif why is None and o.shape != r.shape:
                why = f"shape {tuple(o.shape)}, expected {tuple(r.shape)}"
            if why:
                self.problems.append(why)
                screened = False
        if self.checked and screened and all(bad_output(o, self.device) is None for o in outs):
            copies = tuple(o.detach().clone() for o in outs)
            self._outs.append((content, copies))
            self._held += sum(c.numel() * c.element_size() for c in copies)
        super().__call__(content, tuple(outs[i] for i in self.plain))
        for i in self.checked:
            poison(outs[i])
        if self._held > self.budget:
            self._drain()

    def settle(self) -> None:
        super().settle()
        self._drain()

    def _drain(self) -> None:
        for content, copies in self._outs:
            m = custom_check(self.ref_module, self.spec, self.contents[content], copies, self.all_refs[content])
            if not m.ok:
                self.problems.append(f"{m.name}: {m.reason}")
            for c in copies:
                poison(c)
        self._outs.clear()
        self._held = 0


def make_recheck(refs: Sequence[tuple[torch.Tensor, ...]], tols: Sequence[tuple[float, float]],
                 device: torch.device, *args: Any, ref: ModuleType, spec: Any,
                 contents: Sequence[tuple[torch.Tensor, ...]], **kwargs: Any) -> Recheck:
    """The plain :class:`Recheck` when the task checks no output itself, else a :class:`TaskRecheck`. Extra
    arguments go to the ``Recheck`` constructor."""
    if not checked_outputs(ref):
        return Recheck(refs, tols, device, *args, **kwargs)
    return TaskRecheck(refs, tols, device, *args, ref=ref, spec=spec, contents=contents, **kwargs)


__all__ = ["judge", "TaskRecheck", "make_recheck"]
