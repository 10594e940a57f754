"""Shared-memory tensors between the evaluator and the kernel host, and the socket they travel on.

A :class:`SharedBuffer` is an anonymous ``memfd`` mapped in both processes: the evaluator writes an input set
into it and the kernel sees it as an ordinary CPU tensor (on CPU the kernel works on it directly; on CUDA the
host copies it to and from its own GPU buffers). The file descriptor travels over the ``SOCK_SEQPACKET`` socket
as ``SCM_RIGHTS``, so no name exists in any file system and no other process can open it.

The rule that makes buffer reuse harmless: the evaluator copies every output out of its slot (and every input
back, for the mutation check) as soon as a reply arrives, before it writes the next input set or answers
anything; what the host writes later is never read.
"""

from __future__ import annotations

import mmap
import os
import socket
from dataclasses import dataclass, field
from typing import Any

import torch

from runner.protocol import MAX_MESSAGE

PAGE = mmap.PAGESIZE


@dataclass
class SharedBuffer:
    """One shared tensor: ``shape`` and ``dtype`` over a memfd of ``nbytes`` (contiguous, offset 0)."""

    id: int
    dtype: torch.dtype
    shape: tuple[int, ...]
    fd: int = -1
    _map: Any = field(default=None, repr=False)
    _tensor: torch.Tensor | None = field(default=None, repr=False)

    @property
    def nbytes(self) -> int:
        return tensor_nbytes(self.shape, self.dtype)

    @classmethod
    def create(cls, buf_id: int, dtype: torch.dtype, shape: tuple[int, ...]) -> SharedBuffer:
        """A new zero-filled buffer (evaluator side)."""
        buf = cls(buf_id, dtype, tuple(int(d) for d in shape))
        buf.fd = os.memfd_create(f"d2k-buf-{buf_id}", os.MFD_CLOEXEC)
        os.ftruncate(buf.fd, _mapped_size(buf.nbytes))
        buf._attach()
        return buf

    @classmethod
    def attach(cls, buf_id: int, dtype: torch.dtype, shape: tuple[int, ...], fd: int) -> SharedBuffer:
        """Map a buffer whose descriptor arrived over the socket (host side)."""
        buf = cls(buf_id, dtype, tuple(int(d) for d in shape), fd)
        if os.fstat(fd).st_size < _mapped_size(buf.nbytes):
            raise ValueError(f"buffer {buf_id}: descriptor smaller than its {buf.nbytes} bytes")
        buf._attach()
        return buf

    def _attach(self) -> None:
        self._map = mmap.mmap(self.fd, _mapped_size(self.nbytes), mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
        raw = torch.frombuffer(self._map, dtype=torch.uint8, count=self.nbytes) if self.nbytes else \
            torch.empty(0, dtype=torch.uint8)
        self._tensor = raw.view(self.dtype).view(self.shape) if self.nbytes else torch.empty(self.shape,
                                                                                             dtype=self.dtype)

    @property
    def tensor(self) -> torch.Tensor:
        """The shared tensor (a view of the mapping: writes are seen by the other process)."""
        assert self._tensor is not None
        return self._tensor

    def spec(self) -> dict[str, Any]:
        """What the host needs to map it (the descriptor travels beside this)."""
        from runner.inputs import dtype_name

        return {"id": self.id, "dtype": dtype_name(self.dtype), "shape": list(self.shape)}

    def close(self) -> None:
        self._tensor = None
        if self._map is not None:
            try:
                self._map.close()
            except BufferError:  # a tensor view is still alive somewhere: the mapping goes with the process
                pass
            self._map = None
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1


def tensor_nbytes(shape: Any, dtype: torch.dtype) -> int:
    """Bytes of a contiguous tensor of ``shape`` and ``dtype``."""
    n = torch.empty((), dtype=dtype).element_size()
    for d in shape:
        n *= int(d)
    return n


def _mapped_size(nbytes: int) -> int:
    return max(PAGE, (nbytes + PAGE - 1) // PAGE * PAGE)


def socket_pair() -> tuple[socket.socket, socket.socket]:
    """A connected pair for the evaluator and the host (message boundaries, descriptors, big buffers)."""
    a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    for s in (a, b):
        for opt in (socket.SO_SNDBUF, socket.SO_RCVBUF):
            try:
                s.setsockopt(socket.SOL_SOCKET, opt, MAX_MESSAGE + (64 << 10))
            except OSError:
                pass
    return a, b


def send(sock: socket.socket, data: bytes, fds: list[int] | None = None) -> None:
    """Send one message, with descriptors (at most 250 per message)."""
    if fds:
        socket.send_fds(sock, [data], fds)
    else:
        sock.sendall(data)


def recv(sock: socket.socket, max_fds: int = 0) -> tuple[bytes, list[int]]:
    """Receive one message (and up to ``max_fds`` descriptors); ``b""`` when the peer closed."""
    if max_fds:
        data, fds, _flags, _addr = socket.recv_fds(sock, MAX_MESSAGE + 1, max_fds)
        return data, list(fds)
    return sock.recv(MAX_MESSAGE + 1), []


__all__ = ["SharedBuffer", "socket_pair", "send", "recv", "tensor_nbytes"]
