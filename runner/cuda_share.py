"""GPU buffers the evaluator shares with the kernel host, so a timed batch's input sets and fetched outputs never
pass through host memory.

Round 12 (H200, 2026-12-02) profiled the evaluation of the rmsnorm_residual reference with the eager baseline
only: of 219 s, 104 went to the host copying outputs into shared host memory (fresh ``memfd`` pages, pageable),
54 to the evaluator writing input sets there and unmapping them, and 20 to copying the fetched outputs back to
the GPU; the kernel's own timed work was about 1 s. A :class:`DeviceBuffer` is the same tensor on the GPU: a
CUDA virtual-memory allocation that the evaluator creates (``cuMemCreate``) and exports as a POSIX file
descriptor (``cuMemExportToShareableHandle``); the descriptor travels over the host's socket like a
:class:`runner.shm.SharedBuffer`'s, and the host maps the same physical memory into its own address space
(``cuMemImportFromShareableHandle``, ``cuMemMap``).

Why this and not ``cudaIpcGetMemHandle`` (what ``torch.multiprocessing`` uses): an IPC handle of a caching-
allocator tensor opens the whole segment it lives in, and the segment may hold the evaluator's private tensors
(references, the secret sample's copies). An exported allocation is only itself, and its physical memory lives
as long as either side maps it, so memory the host still maps is never handed to the evaluator's other tensors.

The trust rule is that of shared memory (:mod:`runner.shm`): the host may write into a shared buffer whenever it
likes, so the evaluator reads nothing from one but through a private copy made after the host's reply, and
never shares a tensor it trusts (sets are clones of the evaluator's own input sets).

Only on CUDA with a driver that supports it (:func:`supported`); the evaluator also checks, with a probe buffer,
that the host sees what it wrote (:meth:`runner.eval_timing.Timer._probe_sharing`) and falls back to shared host
memory otherwise.
"""

from __future__ import annotations

import ctypes
import os
from dataclasses import dataclass, field
from typing import Any

import torch

from runner.shm import tensor_nbytes

_ALLOCATION_PINNED = 1
_HANDLE_POSIX_FD = 1
_LOCATION_DEVICE = 1
_ACCESS_READWRITE = 3
_GRANULARITY_MINIMUM = 0
_ATTR_VMM = 102
_ATTR_POSIX_FD = 103


class _Location(ctypes.Structure):
    _fields_ = [("type", ctypes.c_int), ("id", ctypes.c_int)]


class _AllocFlags(ctypes.Structure):
    _fields_ = [("compressionType", ctypes.c_ubyte), ("gpuDirectRDMACapable", ctypes.c_ubyte),
                ("usage", ctypes.c_ushort), ("reserved", ctypes.c_ubyte * 4)]


class _Prop(ctypes.Structure):
    """``CUmemAllocationProp``."""

    _fields_ = [("type", ctypes.c_int), ("requestedHandleTypes", ctypes.c_int), ("location", _Location),
                ("win32HandleMetaData", ctypes.c_void_p), ("allocFlags", _AllocFlags)]


class _Access(ctypes.Structure):
    """``CUmemAccessDesc``."""

    _fields_ = [("location", _Location), ("flags", ctypes.c_int)]


class CudaShareError(RuntimeError):
    """A driver call failed (its name and CUresult in the message)."""


_LIB: Any = None


def _lib() -> Any:
    """The CUDA driver (already loaded by torch), with the signatures used here. Loaded before any submission
    code runs: the host's audit hook refuses ``ctypes`` to the submission, not to the harness."""
    global _LIB
    if _LIB is None:
        lib = ctypes.CDLL("libcuda.so.1")
        u64, size, vp, i32 = ctypes.c_uint64, ctypes.c_size_t, ctypes.c_void_p, ctypes.c_int
        sigs = {
            "cuDeviceGet": [ctypes.POINTER(i32), i32],
            "cuDeviceGetAttribute": [ctypes.POINTER(i32), i32, i32],
            "cuMemGetAllocationGranularity": [ctypes.POINTER(size), ctypes.POINTER(_Prop), i32],
            "cuMemCreate": [ctypes.POINTER(u64), size, ctypes.POINTER(_Prop), u64],
            "cuMemExportToShareableHandle": [vp, u64, i32, u64],
            "cuMemImportFromShareableHandle": [ctypes.POINTER(u64), vp, i32],
            "cuMemAddressReserve": [ctypes.POINTER(u64), size, size, u64, u64],
            "cuMemMap": [u64, size, size, u64, u64],
            "cuMemSetAccess": [u64, size, ctypes.POINTER(_Access), size],
            "cuMemUnmap": [u64, size],
            "cuMemAddressFree": [u64, size],
            "cuMemRelease": [u64],
        }
        for name, args in sigs.items():
            fn = getattr(lib, name)
            fn.argtypes, fn.restype = args, ctypes.c_int
        _LIB = lib
    return _LIB


def _check(name: str, *args: Any) -> None:
    rc = getattr(_lib(), name)(*args)
    if rc != 0:
        raise CudaShareError(f"{name} failed (CUresult {rc})")


def _ordinal(device: torch.device) -> int:
    return device.index if device.index is not None else torch.cuda.current_device()


def supported(device: torch.device) -> bool:
    """Whether ``device`` can export allocations as file descriptors (virtual memory management and POSIX
    handles), the driver loads and torch has a CUDA context on it."""
    if device.type != "cuda":
        return False
    try:
        torch.cuda.init()
        torch.empty(1, device=device)  # the primary context current on this thread
        dev, val = ctypes.c_int(), ctypes.c_int()
        _check("cuDeviceGet", ctypes.byref(dev), _ordinal(device))
        for attr in (_ATTR_VMM, _ATTR_POSIX_FD):
            _check("cuDeviceGetAttribute", ctypes.byref(val), attr, dev)
            if not val.value:
                return False
        return True
    except (OSError, AttributeError, CudaShareError, RuntimeError):
        return False


def _prop(device: torch.device) -> _Prop:
    p = _Prop()
    p.type, p.requestedHandleTypes = _ALLOCATION_PINNED, _HANDLE_POSIX_FD
    p.location.type, p.location.id = _LOCATION_DEVICE, _ordinal(device)
    return p


def _granule(device: torch.device) -> int:
    g = ctypes.c_size_t()
    _check("cuMemGetAllocationGranularity", ctypes.byref(g), ctypes.byref(_prop(device)), _GRANULARITY_MINIMUM)
    return int(g.value)


class _Interface:
    """Just enough ``__cuda_array_interface__`` for ``torch.as_tensor`` to view a raw device range."""

    def __init__(self, ptr: int, nbytes: int) -> None:
        self.__cuda_array_interface__ = {"shape": (nbytes,), "typestr": "|u1", "data": (ptr, False),
                                         "strides": None, "version": 2}


@dataclass
class DeviceBuffer:
    """One shared GPU tensor: ``shape`` and ``dtype`` over an exported allocation of ``size`` bytes (a multiple
    of the driver's granularity). The interface of :class:`runner.shm.SharedBuffer`: ``id``, ``fd``,
    ``tensor``, ``spec()``, ``close()``."""

    id: int
    dtype: torch.dtype
    shape: tuple[int, ...]
    device: torch.device
    fd: int = -1
    size: int = 0
    _handle: int = 0
    _ptr: int = 0
    _tensor: torch.Tensor | None = field(default=None, repr=False)

    @property
    def nbytes(self) -> int:
        return tensor_nbytes(self.shape, self.dtype)

    def _round_up(self) -> None:
        """``size``: ``nbytes`` rounded up to the driver's granularity (at least one granule)."""
        g = _granule(self.device)
        self.size = max(g, (self.nbytes + g - 1) // g * g)

    @classmethod
    def create(cls, buf_id: int, dtype: torch.dtype, shape: tuple[int, ...], device: torch.device) -> DeviceBuffer:
        """A new zero-filled buffer on ``device`` and its descriptor (evaluator side)."""
        buf = cls(buf_id, dtype, tuple(int(d) for d in shape), device)
        buf._round_up()
        handle = ctypes.c_uint64()
        _check("cuMemCreate", ctypes.byref(handle), buf.size, ctypes.byref(_prop(device)), 0)
        buf._handle = int(handle.value)
        try:
            fd = ctypes.c_int(-1)
            _check("cuMemExportToShareableHandle", ctypes.byref(fd), buf._handle, _HANDLE_POSIX_FD, 0)
            buf.fd = fd.value
            buf._map()
            buf.tensor.zero_()
            torch.cuda.synchronize(device)  # done before the host can write: its stream is not ordered with ours
        except BaseException:
            buf.close()
            raise
        return buf

    @classmethod
    def attach(cls, buf_id: int, dtype: torch.dtype, shape: tuple[int, ...], fd: int,
               device: torch.device) -> DeviceBuffer:
        """Map a buffer whose descriptor arrived over the socket (host side); the descriptor is closed."""
        buf = cls(buf_id, dtype, tuple(int(d) for d in shape), device)
        try:
            handle = ctypes.c_uint64()
            _check("cuMemImportFromShareableHandle", ctypes.byref(handle), ctypes.c_void_p(fd), _HANDLE_POSIX_FD)
            buf._handle = int(handle.value)
            buf._round_up()
            buf._map()
        except BaseException:
            buf.close()
            raise
        finally:
            os.close(fd)
        return buf

    def _map(self) -> None:
        ptr = ctypes.c_uint64()
        _check("cuMemAddressReserve", ctypes.byref(ptr), self.size, 0, 0, 0)
        self._ptr = int(ptr.value)
        _check("cuMemMap", self._ptr, self.size, 0, self._handle, 0)
        access = _Access()
        access.location.type, access.location.id, access.flags = _LOCATION_DEVICE, _ordinal(self.device), \
            _ACCESS_READWRITE
        _check("cuMemSetAccess", self._ptr, self.size, ctypes.byref(access), 1)
        raw = torch.as_tensor(_Interface(self._ptr, self.nbytes or 1), device=self.device)[:self.nbytes]
        self._tensor = raw.view(self.dtype).view(self.shape)

    @property
    def tensor(self) -> torch.Tensor:
        """The shared tensor on the GPU (writes are seen by the other process once its stream has run them)."""
        assert self._tensor is not None
        return self._tensor

    def spec(self) -> dict[str, Any]:
        """What the host needs to map it (the descriptor travels beside this)."""
        from runner.inputs import dtype_name

        return {"id": self.id, "dtype": dtype_name(self.dtype), "shape": list(self.shape), "cuda": True}

    def close(self) -> None:
        """Unmap and release (after the device has finished with it: work still queued on it would fault)."""
        if self._tensor is not None:
            torch.cuda.synchronize(self.device)
        self._tensor = None
        if self._ptr:
            _lib().cuMemUnmap(self._ptr, self.size)
            _lib().cuMemAddressFree(self._ptr, self.size)
            self._ptr = 0
        if self._handle:
            _lib().cuMemRelease(self._handle)
            self._handle = 0
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1


__all__ = ["CudaShareError", "DeviceBuffer", "supported"]
