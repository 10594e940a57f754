"""Pieces of a correctness trial that must not be fooled: calling the kernel, poisoning memory, checking outputs.

- The kernel gets clones; the originals stay with the harness and the clones are compared with them bit for bit
  afterwards (``input_mutated``).
- The reference is computed *after* the kernel returns, from the originals, so no freed block can hold this
  input's answer when the kernel allocates. Every output and reference is filled with 0xFF bytes (NaN in every
  float dtype) before it is released, and on CUDA the free blocks of the caching allocator are filled the same
  way before each call (:func:`sponge`): ``torch.empty_like(x)`` returns NaN, never an earlier answer.
- Outputs must be plain strided ``torch.Tensor`` objects on the task's device; anything else (a subclass, a
  lazy wrapper, a meta or sparse tensor) is flagged before any attribute of it is touched.
"""

from __future__ import annotations

import traceback
from pathlib import Path
from typing import Any

import torch

POISON_BYTE = 0xFF
"""0xFF..FF is a NaN in fp64/fp32/fp16/bf16 and fp8 e4m3fn/e5m2, and -1 in every signed integer type."""


def poison(t: Any) -> None:
    """Fill the whole storage behind ``t`` with :data:`POISON_BYTE` (a no-op for anything but a plain tensor)."""
    if type(t) is not torch.Tensor or t.is_meta:
        return
    try:
        storage = t.untyped_storage()
        if storage.nbytes():
            torch.empty(0, dtype=torch.uint8, device=t.device).set_(storage).fill_(POISON_BYTE)
    except Exception:  # noqa: BLE001 - a storage we cannot write is one we do not need to poison
        pass


def sponge(device: torch.device) -> int:
    """Fill every free block of the CUDA caching allocator with :data:`POISON_BYTE`; returns bytes filled.

    The allocator hands a freed block to the next request of a fitting size, so a kernel that allocates its
    output with ``torch.empty_like`` and computes nothing would return whatever the block last held. Taking the
    free blocks largest first with requests of exactly their size gets each block back (best fit), fills it,
    and frees it again.
    """
    if device.type != "cuda":
        return 0
    torch.cuda.synchronize(device)
    stream = torch.cuda.current_stream(device).cuda_stream
    sizes = sorted((b["size"] for seg in torch.cuda.memory_snapshot() if seg.get("stream", stream) == stream
                    for b in seg["blocks"] if b["state"] == "inactive"), reverse=True)
    held = []
    filled = 0
    for size in sizes:
        try:
            t = torch.empty(size, dtype=torch.uint8, device=device)
        except torch.OutOfMemoryError:
            break
        t.fill_(POISON_BYTE)
        held.append(t)
        filled += size
    del held
    torch.cuda.synchronize(device)
    return filled


def same_bits(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Whether two tensors hold the same bytes (NaN-safe, -0.0-safe)."""
    if type(a) is not torch.Tensor or a.shape != b.shape or a.dtype != b.dtype or a.device != b.device:
        return False
    if a.numel() == 0:
        return True
    av = a.detach().contiguous().view(-1).view(torch.uint8)
    bv = b.detach().contiguous().view(-1).view(torch.uint8)
    return bool(torch.equal(av, bv))


def describe(obj: Any) -> str:
    """A name for any object without running code it defines (no ``repr``, no ``__class__`` lookup)."""
    return object.__repr__(obj).split(" object at ")[0].lstrip("<")


def output_tuple(out: Any) -> tuple[Any, ...]:
    """The kernel's return value as a tuple, without iterating anything but a real tuple or list."""
    if type(out) in (tuple, list):
        return tuple(out)
    return (out,)


def bad_output(out: Any, device: torch.device) -> str | None:
    """Why ``out`` is not an acceptable output object (None: it is a plain strided tensor on ``device``)."""
    if type(out) is not torch.Tensor:
        return f"returned {describe(out)}, not a plain torch.Tensor (subclasses and lazy objects are rejected)"
    if out.is_meta or out.layout != torch.strided or out.is_nested:
        return "returned a meta, sparse or nested tensor"
    if out.device.type != device.type:
        return f"returned a tensor on {out.device}, expected {device.type}"
    return None


def classify_exception(exc: BaseException) -> tuple[str, bool]:
    """(status, fatal) for an exception raised by the submission. ``fatal``: the CUDA context is unusable."""
    text = f"{type(exc).__module__}.{type(exc).__name__}: {exc}"
    if isinstance(exc, torch.OutOfMemoryError):
        return "runtime_error", False
    fatal_markers = ("illegal memory access", "misaligned address", "device-side assert", "unspecified launch failure",
                     "an illegal instruction", "CUDA error: an", "cudaErrorLaunchFailure", "uncorrectable ECC",
                     "launch timed out")
    if any(m in text for m in fatal_markers):
        return "crashed", True
    if "CompilationError" in type(exc).__name__ or "triton.compiler" in type(exc).__module__ or (
            "Error building extension" in text) or "ninja" in text and "failed" in text:
        return "compile_error", False
    return "runtime_error", False


_HARNESS_DIR = str(Path(__file__).resolve().parent)


def format_exception(exc: BaseException, limit: int = 4000) -> str:
    """The traceback from the first frame outside the harness (the submission's), trimmed."""
    tb = exc.__traceback__
    while tb is not None and tb.tb_next is not None and tb.tb_frame.f_code.co_filename.startswith(_HARNESS_DIR):
        tb = tb.tb_next
    text = "".join(traceback.format_exception(type(exc), exc, tb))
    return text if len(text) <= limit else text[:1000] + "\n...\n" + text[-(limit - 1000):]


def context_alive(device: torch.device) -> bool:
    """Whether the CUDA context still works after an exception (a sticky error kills it)."""
    if device.type != "cuda":
        return True
    try:
        torch.cuda.synchronize(device)
        torch.zeros(1, device=device).add_(1).item()
        return True
    except Exception:  # noqa: BLE001
        return False


def perturb_(tensors: tuple[torch.Tensor, ...], generator: torch.Generator, k: int = 4) -> list[int]:
    """Move k random elements of each floating input halfway towards k others, in place; returns the indices.
    Values stay inside the input's own range (no precondition of the task breaks) and exact duplicates, which
    could create ties for top-k style tasks, are unlikely.

    Used for the repeat trial: the same buffers come back with a few values changed, so a cache keyed by the
    pointer or by a sampled fingerprint returns a stale answer.
    """
    changed = []
    for t in tensors:
        if not t.is_floating_point() or t.numel() < 2:
            continue
        flat = t.view(-1) if t.is_contiguous() else None
        if flat is None:
            continue
        n = flat.numel()
        dst = torch.randint(0, n, (k,), generator=generator, device=generator.device).to(t.device)
        src = torch.randint(0, n, (k,), generator=generator, device=generator.device).to(t.device)
        flat[dst] = (flat[dst].float() * 0.5 + flat[src].float() * 0.5).to(flat.dtype)
        changed += dst.tolist()
    return changed
