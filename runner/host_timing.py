"""The kernel host's side of a timed batch (see :mod:`runner.timing` for the method, :mod:`runner.eval_timing`
for what the evaluator checks).

The evaluator hands over S input sets in shared memory (on CUDA uploaded to the host's device when they were
registered, and kept for every batch of one rotation) and one ``[reps, *shape]`` output slot per output. The
host makes S buffer sets from them, and queues every rep back to back: copy a set into a
buffer set, flush L2, pad, event, ``kernel(...)``, event, then copy each output into its staging row on the device
and poison the output (all queued, outside the timed region). One synchronize, and the event times go back
(``timed``). Then the **verify** step (:func:`verify`): with a key the evaluator draws only now, the host
checksums every rep's staged outputs on the device and copies the rows the evaluator names (the first rep of
each input set and a secret sample of others) to the shared slots; the evaluator compares those in full and
every checksum with the one it computes from a full copy. A kernel never sees the key, so it cannot make a wrong
output checksum like a right one; staging every rep through host memory instead would make the evaluator's
clock measure copies (a 268 MB softmax output per rep). ``null`` batches (the evaluator's calibration, before the
submission is loaded) call no submission code: they return preallocated outputs.
"""

from __future__ import annotations

import time
from typing import Any


def run_batch(host: Any, req: dict[str, Any]) -> dict[str, Any]:
    """Run one batch request; returns the reply's fields (the caller adds kind, id and ok)."""
    import torch

    from runner.inputs import dtype_from_name
    from runner.kernel_host import _recorder
    from runner.timing import Rotation, _event, _sync, flush_buffer, spin, wall_batch, warm_up
    from runner.trials import poison

    dev = host.device
    if host.flush is None:
        host.flush = flush_buffer(dev)
    flush = host.flush
    shared = set(req.get("shared", []))
    uploaded: dict[int, Any] = {}
    for ids in req["sets"]:
        for i in ids:
            if i not in uploaded:  # uploaded at registration (CUDA), else copied now
                uploaded[i] = host.mirrors[i] if i in host.mirrors else host.buffers[i].tensor.to(dev, copy=True)
    contents = [tuple(uploaded[i] for i in ids) for ids in req["sets"]]
    # A shared (huge) input is one tensor for every set, and it is its own buffer: never cloned, never copied.
    rot = Rotation(contents, [tuple(t if j in shared else t.clone() for j, t in enumerate(c)) for c in contents])
    slots = [host.buffers[i] for i in req["outs"]]
    reps = int(req["reps"])
    staged = [s.tensor.to(dev, copy=False) if dev.type == "cpu" else
              torch.empty(s.shape, dtype=s.dtype, device=dev) for s in slots]
    scalars = req.get("scalars", {})
    if req.get("null") is not None:
        fixed = tuple(torch.zeros(shape, dtype=dtype_from_name(d), device=dev) for d, shape in req["null"])

        def call(args: tuple[Any, ...]) -> Any:
            return fixed if len(fixed) > 1 else fixed[0]
        recorder = None
    else:
        kernel = host.kernel

        def call(args: tuple[Any, ...]) -> Any:
            return kernel(*args, **scalars)
        recorder = _recorder()

    screened: list[str] = []
    ops: dict[str, dict[str, int]] = {"ops": {}, "interp_ops": {}}
    warm_up(flush, float(req.get("warmup_ms", 0.0)))
    events = []
    launches: int | None = None
    pad = float(req.get("pad_ms", 0.0))
    start = int(req.get("start", 0))
    t0 = time.perf_counter()
    for r in range(start, start + reps):
        args, _content = rot.prepare(r)
        flush.zero_()
        spin(dev, pad)
        s, e = _event(dev), _event(dev)
        if host.launches is not None:
            host.launches.count = 0
        s.record()
        if recorder is not None:
            with recorder:
                out = call(args)
        else:
            out = call(args)
        e.record()
        events.append((s, e))
        if host.launches is not None and req.get("null") is None:
            launches = host.launches.count if launches is None else min(launches, host.launches.count)
        _stage(out, staged, r - start, screened, poison)
        del out
        if recorder is not None:
            _merge(ops, recorder.summary())
    host_ms = 1e3 * (time.perf_counter() - t0) / max(reps, 1)
    _sync(dev)
    samples = [s.elapsed_time(e) for s, e in events]
    if host.cfg.get("forge_events") and req.get("null") is None:  # tests: a compromised host under-reporting
        samples = [x * float(host.cfg["forge_events"]) for x in samples]
    # The sets stay mapped when the evaluator reuses them for its next batch (``keep_sets``; it releases them).
    host.staged = (slots, staged, [] if req.get("keep_sets") else [i for ids in req["sets"] for i in ids])
    prints = None
    if req.get("fingerprint_key") is not None:
        from runner.huge_inputs import fingerprints

        prints = fingerprints([contents[0][j] for j in sorted(shared)], int(req["fingerprint_key"])).tolist()
    wall = None
    if req.get("wall_rounds"):
        wall = wall_batch(lambda a: call(a), rot, int(req["wall_rounds"]), start_rep=start + reps)
    return {"samples_ms": samples, "screened": screened[:64], "host_ms_per_rep": host_ms, "wall": wall,
            "pad_ms": pad, "ops": ops, "own_launches": launches, "fingerprints": prints}


def verify(host: Any, req: dict[str, Any]) -> dict[str, Any]:
    """Checksum every staged rep with ``req["key"]``, copy the rows ``req["full"]`` to the shared slots (or, with
    ``req["into"]``, to rows 0, 1, ... of the evaluator's GPU buffers), and (with ``req["last"]``) release the
    batch's buffers."""
    import torch

    from runner.huge_inputs import fingerprint_rows

    slots, staged, set_ids = host.staged
    key = int(req["key"])
    reps = staged[0].shape[0] if staged else 0
    per_output = [fingerprint_rows(st, key + j) for j, st in enumerate(staged)]
    digests = [[col[r] for col in per_output] for r in range(reps)]
    if host.device.type == "cuda":
        into = [host.buffers[i] for i in req["into"]] if req.get("into") is not None else None
        for j, r in enumerate(req.get("full", [])):
            for k, st in enumerate(staged):
                if into is not None:  # the evaluator's GPU buffers (runner.cuda_share): row j, on the device
                    into[k].tensor[j].copy_(st[r])
                else:
                    slots[k].tensor[r].copy_(st[r])
        torch.cuda.synchronize()
    if req.get("last", True):
        host.staged = None
        host.release([*(s.id for s in slots), *set_ids])
    return {"digests": digests}


def _stage(out: Any, staged: list[Any], row: int, screened: list[str], poison: Any) -> None:
    """Copy one rep's outputs into row ``row`` of the staging slots (queued), or note why not."""
    import torch

    items = list(out) if type(out) is tuple else [out]
    if len(items) != len(staged):
        if len(screened) < 64:
            screened.append(f"returned {len(items)} outputs, expected {len(staged)}")
        return
    for obj, st in zip(items, staged, strict=True):
        if type(obj) is not torch.Tensor or obj.dtype != st.dtype or tuple(obj.shape) != tuple(st.shape[1:]) or \
                obj.device.type != st.device.type:
            if len(screened) < 64:
                screened.append("a timed call returned an output of the wrong type, dtype, shape or device")
            continue
        st[row].copy_(obj)
        poison(obj)


def _merge(into: dict[str, dict[str, int]], summary: dict[str, Any]) -> None:
    for key in ("ops", "interp_ops"):
        for op, n in summary.get(key, {}).items():
            into[key][op] = max(into[key].get(op, 0), int(n))


__all__ = ["run_batch"]
