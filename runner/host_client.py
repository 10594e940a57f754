"""The evaluator's side of the kernel-host protocol: one request at a time, every reply validated.

A reply that does not come back in time is a ``timeout`` (the host is killed); a closed socket is ``crashed``
with how the host ended (a signal, an exit code, read from its zombie's ``/proc`` entry); a reply that does not
parse as the one the request allows is ``crashed`` too (:class:`runner.protocol.ProtocolError`). All three raise
:class:`HostFailure`, which the evaluator turns into the submission's status; none can make anything pass.
"""

from __future__ import annotations

import os
import select
import signal
import socket
import time
from typing import Any

from runner import containment, protocol, shm


class HostFailure(Exception):
    """The kernel host cannot be used any more; ``status`` is what it means for the submission."""

    def __init__(self, status: str, message: str, flag: str | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.flag = flag
        """A reject flag it amounts to (``protocol.malformed``: an honest host never sends a malformed message)."""


class HostClient:
    """Requests to one kernel host (``pid``, as the job leader reported it, never as the host says)."""

    def __init__(self, sock: socket.socket, pid: int, *, stall_s: float) -> None:
        self.sock = sock
        self.pid = pid
        self.stall_s = stall_s
        self._next = 0
        self.dead = False
        self.violations: list[str] = []

    # ------------------------------------------------------------------------------------------ plumbing

    def _id(self) -> int:
        self._next += 1
        return self._next

    def kill(self) -> None:
        """SIGKILL the host (the leader kills the rest of the tree at the end)."""
        self.dead = True
        try:
            os.kill(self.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass

    def _ended(self) -> str:
        """How the host ended, as far as its zombie tells (waits up to 2 s for it to become one)."""
        deadline = time.monotonic() + 2.0
        while time.monotonic() < deadline:
            st = containment.exit_status(self.pid)
            if st is not None:
                if os.WIFSIGNALED(st):
                    return f"was killed by signal {os.WTERMSIG(st)}"
                return f"exited with code {os.WEXITSTATUS(st)}"
            time.sleep(0.02)
        return "closed its end of the protocol"

    def request(self, msg: dict[str, Any], expect: str, *, fds: list[int] | None = None,
                timeout_s: float | None = None, call_id: int | None = None) -> Any:
        """Send ``msg``, wait for the reply of kind ``expect`` and validate it."""
        if self.dead:
            raise HostFailure("crashed", "the kernel host is gone")
        try:
            shm.send(self.sock, protocol.encode(msg), fds)
        except OSError as exc:
            self.dead = True
            raise HostFailure("crashed", f"the kernel host {self._ended()} (send: {exc.strerror})") from None
        limit = self.stall_s if timeout_s is None else timeout_s
        ready = select.select([self.sock], [], [], limit)[0]
        if not ready:
            self.kill()
            raise HostFailure("timeout", f"no answer from the kernel within {limit:.0f} s (an infinite loop?)")
        try:
            data, _ = shm.recv(self.sock)
        except OSError as exc:
            data = b""
            del exc
        if not data:
            self.dead = True
            raise HostFailure("crashed", f"the kernel host {self._ended()} before answering")
        try:
            reply = protocol.parse_reply(data, expect, call_id=call_id)
        except protocol.ProtocolError as exc:
            self.kill()
            raise HostFailure("rejected", f"the kernel host sent a malformed message: {exc}",
                              flag="protocol.malformed") from None
        self.violations += list(getattr(reply, "violations", []) or [])
        return reply

    # ------------------------------------------------------------------------------------------ requests

    def ready(self, timeout_s: float = 300.0) -> protocol.Ready:
        """The host's first message (it sends it unasked, once it is set up)."""
        ready = select.select([self.sock], [], [], timeout_s)[0]
        if not ready:
            self.kill()
            raise HostFailure("crashed", f"the kernel host did not start within {timeout_s:.0f} s")
        data, _ = shm.recv(self.sock)
        if not data:
            self.dead = True
            raise HostFailure("crashed", f"the kernel host {self._ended()} while starting")
        return protocol.parse_reply(data, "ready")  # type: ignore[no-any-return]

    def load(self, source: str, sha: str, timeout_s: float) -> protocol.Loaded:
        return self.request({"op": "load", "source": source, "sha": sha}, "loaded",  # type: ignore[no-any-return]
                            timeout_s=timeout_s)

    def register(self, buffers: list[Any], *, mirror: bool = True, upload: bool = False) -> list[int]:
        """Hand shared buffers (:class:`runner.shm.SharedBuffer` or :class:`runner.cuda_share.DeviceBuffer`) to
        the host; returns the ids it says it mapped (a GPU buffer it could not map is left out)."""
        flags = {**({} if mirror else {"mirror": False}), **({"upload": True} if upload else {})}
        got: list[int] = []
        for start in range(0, len(buffers), 200):
            part = buffers[start:start + 200]
            got += self.request({"op": "buffers", "specs": [{**b.spec(), **flags} for b in part]}, "registered",
                                fds=[b.fd for b in part]).ids
        return got

    def release(self, ids: list[int]) -> None:
        """The host unmaps these buffers (the evaluator closes its own maps)."""
        if ids:
            self.request({"op": "release", "ids": ids}, "released")

    def call(self, args: list[int], scalars: dict[str, Any], outs: list[int], *, profile: bool = False,
             back: list[int] | None = None, fingerprint: dict[str, Any] | None = None) -> protocol.Called:
        """One call. ``back``: inputs the host copies back after it (CUDA; default all); ``fingerprint``:
        ``{"ids": [...], "key": k}``, inputs it checksums instead (huge ones)."""
        cid = self._id()
        msg: dict[str, Any] = {"op": "call", "call_id": cid, "args": args, "scalars": scalars, "outs": outs,
                               "profile": profile}
        if back is not None:
            msg["back"] = back
        if fingerprint:
            msg["fingerprint"] = fingerprint
        return self.request(msg, "called", call_id=cid)  # type: ignore[no-any-return]

    def batch(self, req: dict[str, Any], timeout_s: float | None = None) -> protocol.Timed:
        bid = self._id()
        return self.request({**req, "op": "batch", "batch_id": bid}, "timed",  # type: ignore[no-any-return]
                            call_id=bid, timeout_s=timeout_s)

    def verify(self, batch_id: int, key: int, full: list[int], *, last: bool = True, into: list[int] | None = None,
               timeout_s: float | None = None) -> protocol.Verified:
        """Checksums of every staged rep; the reps ``full`` copied to the batch's output slots or, with ``into``
        (one GPU buffer per output), to rows 0, 1, ... of those."""
        msg: dict[str, Any] = {"op": "verify", "batch_id": batch_id, "key": key, "full": full, "last": last}
        if into is not None:
            msg["into"] = into
        return self.request(msg, "verified", call_id=batch_id, timeout_s=timeout_s)  # type: ignore[no-any-return]

    def fingerprint(self, ids: list[int], key: int) -> list[int]:
        reply = self.request({"op": "fingerprint", "ids": ids, "key": key}, "fingerprinted")
        return list(reply.values)

    def threads(self) -> int | None:
        """The host's native threads, counted by the evaluator from ``/proc/<pid>/task``."""
        return containment.thread_count(self.pid)

    def close(self) -> None:
        if not self.dead:
            try:
                shm.send(self.sock, protocol.encode({"op": "bye"}))
            except OSError:
                pass
        try:
            self.sock.close()
        except OSError:
            pass


__all__ = ["HostClient", "HostFailure"]
