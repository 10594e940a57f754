"""The kernel host: the only process that runs submission code. Hostile from its first line of it.

It is forked by the job leader (:mod:`runner.worker`) from a clean template before the evaluator exists, so it
holds no seed, no reference, no key. As root it first drops to a uid of its own (:mod:`runner.containment`).
Then it imports what the harness needs, runs a warm-up Triton kernel, installs the audit hook
(:mod:`runner.audit`), says ``ready`` and serves the evaluator's requests, one at a time, on its socket:

- ``load``: write the source into its temp folder, arm the audit hook, import it, find ``kernel``;
- ``buffers``: map shared-memory buffers (:mod:`runner.shm`) the evaluator made (on CUDA, with a GPU mirror,
  unless the spec says ``mirror: false``; ``upload: true`` copies the buffer into its mirror now: a timed batch's
  input sets, which its batches then take from the mirror, outside their timed walls);
- ``release``: unmap buffers (the input sets of a rotation the evaluator is done with);
- ``call``: fill the GPU mirrors from the shared inputs (CUDA), call ``kernel`` under the always-on op recorder
  (and the profiler when asked), describe what came back, copy each declared output into the evaluator's slot,
  copy the inputs back (CUDA), reply;
- ``batch``: event-timed calls back to back (:mod:`runner.timing`), every output staged on the device;
- ``verify``: keyed checksums of every staged output, the rows asked for copied to the slots
  (:mod:`runner.host_timing`);
- ``fingerprint``: keyed checksums of huge inputs it holds;
- ``bye``.

Whatever it replies is data: the evaluator validates every message (:mod:`runner.protocol`), reads outputs and
inputs from the shared buffers itself and decides every status.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import Any

from runner import shm
from runner.protocol import MAX_TEXT, encode


class HostExit(Exception):
    """Leave the request loop (``bye``, a dead socket, a dead CUDA context)."""


def host_main(sock: Any, cfg: dict[str, Any]) -> None:
    """Serve the evaluator until ``bye`` or EOF. ``cfg`` is the host's part of the job (no secrets)."""
    Host(sock, cfg).serve()


class Host:
    def __init__(self, sock: Any, cfg: dict[str, Any]) -> None:
        import torch

        from runner import audit

        self.sock = sock
        self.cfg = cfg
        self.torch = torch
        self.cuda = cfg["device"] == "cuda"
        self.device = torch.device("cuda", 0) if self.cuda else torch.device("cpu")
        if self.cuda:
            torch.cuda.set_device(self.device)
            torch.cuda.init()
        else:
            torch.set_num_threads(1)
        self.buffers: dict[int, shm.SharedBuffer] = {}
        self.mirrors: dict[int, Any] = {}
        self.kernel: Any = None
        self.flush: Any = None
        self.staged: Any = None
        """The last timed batch's output slots, staging rows and set buffers, until it is verified."""
        self.launches: Any = None
        self.source_files: list[str] = []
        self._preimport()
        _warm_up(self.device)
        audit.install()
        self.audit = audit
        threads = len(os.listdir("/proc/self/task"))
        self._send({"kind": "ready", "pid": os.getpid(), "uid": os.getuid(), "threads": threads,
                    "sandbox": cfg.get("sandbox", "")})

    def _preimport(self) -> None:
        """Import now what a submission or a first launch would import later: after the uid drop, a Python
        installed under a private home (``/root/.pyenv``) is no longer readable."""
        import importlib

        names = ["math", "functools", "itertools", "operator", "typing", "dataclasses", "enum", "collections",
                 "contextlib", "numbers", "statistics", "random", "warnings", "inspect", "ast", "textwrap",
                 "numpy", "triton", "triton.language", "torch.nn.functional", "torch.profiler",
                 "runner.profile_proof", "runner.timing", "runner.trials", "runner.huge_inputs",
                 "runner.host_timing", "runner.interp_compat", "runner.loading", "runner.inputs"]
        try:
            import triton.language.extra.libdevice  # noqa: F401
        except ImportError:
            pass
        if self.cuda:
            names += ["torch.utils.cpp_extension", "triton.compiler", "triton.backends.nvidia.compiler",
                      "runner.cuda_share"]
        else:
            names += ["triton.runtime.interpreter"]
        for name in names:
            try:
                importlib.import_module(name)
            except Exception:  # noqa: BLE001 - what cannot be imported fails again, visibly, in the submission
                pass

    # ------------------------------------------------------------------------------------------ the loop

    def serve(self) -> None:
        while True:
            try:
                data, fds = shm.recv(self.sock, max_fds=250)
            except OSError:
                return
            if not data:
                return
            req = json.loads(data)
            op = req.get("op")
            try:
                if op == "load":
                    self._load(req)
                elif op == "buffers":
                    self._buffers(req, fds)
                elif op == "call":
                    self._call(req)
                elif op == "batch":
                    self._batch(req)
                elif op == "verify":
                    self._verify(req)
                elif op == "release":
                    self.release(req["ids"])
                    self._send({"kind": "released", "ids": list(req["ids"])})
                elif op == "fingerprint":
                    self._fingerprint(req)
                elif op == "bye":
                    self._send({"kind": "bye"})
                    return
            except HostExit:
                return

    def _send(self, msg: dict[str, Any]) -> None:
        try:
            shm.send(self.sock, encode(msg))
        except OSError:
            raise HostExit from None

    # ------------------------------------------------------------------------------------------ load

    def _load(self, req: dict[str, Any]) -> None:
        from runner.loading import load_module
        from runner.trials import classify_exception, format_exception

        path = Path.cwd() / f"submission_{req['sha'][:12]}.py"
        path.write_text(req["source"])
        os.chmod(path, 0o400)
        self.source_files = [str(path.resolve())]
        if not self.cuda:  # the interpreter's patches for production patterns, and launch counting
            from runner import interp_compat

            self.launches = interp_compat.install(self.source_files)
        self.audit.arm(self.source_files, write_roots=self.cfg.get("write_roots", []),
                       deny_roots=self.cfg.get("deny_roots", []))
        t0 = time.perf_counter()
        error = None
        try:
            module = load_module(path, prefix="d2k_sub")
            kernel = module.__dict__.get("kernel")
            if not callable(kernel):
                error = {"status": "compile_error", "fatal": True,
                         "message": "the file defines no callable kernel(...)"}
            else:
                self.kernel = kernel
        except BaseException as exc:  # noqa: BLE001 - the submission's own failure at import
            status = "compile_error"
            if classify_exception(exc)[0] == "crashed":
                status = "crashed"
            error = {"status": status, "fatal": True, "message": format_exception(exc, MAX_TEXT)}
            limit = _limitation(exc)
            if limit:
                error.update(status="unsupported_on_cpu", limitation=limit)
        self._send({"kind": "loaded", "ok": error is None, "error": error, "seconds": time.perf_counter() - t0,
                    "violations": self.audit.violations()})

    # ------------------------------------------------------------------------------------------ buffers

    def _buffers(self, req: dict[str, Any], fds: list[int]) -> None:
        from runner.inputs import dtype_from_name

        specs = req["specs"]
        mapped = []
        for spec, fd in zip(specs, fds, strict=True):
            old = self.buffers.pop(spec["id"], None)
            if old is not None:
                old.close()
            self.mirrors.pop(spec["id"], None)
            dtype, shape = dtype_from_name(spec["dtype"]), tuple(spec["shape"])
            if spec.get("cuda"):  # a GPU buffer of the evaluator's: the kernel's view is the buffer itself
                from runner.cuda_share import CudaShareError, DeviceBuffer

                if not self.cuda:
                    os.close(fd)
                    continue  # left out of the reply: the evaluator falls back to shared host memory
                try:
                    dbuf = DeviceBuffer.attach(spec["id"], dtype, shape, fd, self.device)  # closes fd
                except (CudaShareError, OSError, RuntimeError, ValueError):
                    continue
                self.buffers[dbuf.id] = dbuf  # type: ignore[assignment]
                self.mirrors[dbuf.id] = dbuf.tensor
                mapped.append(dbuf.id)
                continue
            buf = shm.SharedBuffer.attach(spec["id"], dtype, shape, fd)
            self.buffers[buf.id] = buf
            mapped.append(buf.id)
            if self.cuda and spec.get("mirror", True):
                self.mirrors[buf.id] = self.torch.empty(buf.shape, dtype=buf.dtype, device=self.device)
                if spec.get("upload"):
                    self.mirrors[buf.id].copy_(buf.tensor)
        if self.cuda:
            self.torch.cuda.synchronize()
        self._send({"kind": "registered", "ids": mapped})

    def release(self, ids: list[int]) -> None:
        """Unmap these buffers and drop their GPU mirrors (``release``, and the end of a verified batch)."""
        for i in ids:
            buf = self.buffers.pop(i, None)
            self.mirrors.pop(i, None)  # before the close: a GPU buffer's mirror is its own tensor
            if buf is not None:
                buf.close()

    def _view(self, buf_id: int) -> Any:
        """What the kernel gets for a buffer: the shared tensor itself (CPU) or its GPU mirror."""
        return self.mirrors[buf_id] if self.cuda else self.buffers[buf_id].tensor

    # ------------------------------------------------------------------------------------------ call

    def _call(self, req: dict[str, Any]) -> None:
        from runner import profile_proof
        from runner.trials import sponge

        torch = self.torch
        ids = req["args"]
        if self.cuda:
            for i in ids:
                self.mirrors[i].copy_(self.buffers[i].tensor)
            torch.cuda.synchronize()
        args = tuple(self._view(i) for i in ids)
        sponge(self.device)
        if self.launches is not None:
            self.launches.count = 0
        reply: dict[str, Any] = {"kind": "called", "call_id": req["call_id"], "ok": True, "error": None}
        recorder = _recorder()
        t0 = time.perf_counter()
        try:
            if req.get("profile"):
                out, summary = profile_proof.profile_call(lambda: self._run(args, req["scalars"], recorder),
                                                          self.device)
                reply["kernels"] = summary.get("kernels", {}) if self.cuda else None
                if recorder is None:
                    reply["ops"] = {"ops": summary.get("ops", {}), "interp_ops": {}}
            else:
                out = self._run(args, req["scalars"], recorder)
        except BaseException as exc:  # noqa: BLE001 - SystemExit and KeyboardInterrupt included
            self._fail(reply, exc)
            return
        reply["host_ms"] = 1e3 * (time.perf_counter() - t0)
        if recorder is not None:
            reply["ops"] = recorder.summary()
        if self.launches is not None:
            reply["own_launches"] = self.launches.count
        reply["returned"], reply["outputs"] = self._deliver(out, req["outs"], args)
        reply["violations"] = self.audit.violations()
        del out
        fp = req.get("fingerprint")
        if fp:
            from runner.huge_inputs import fingerprints

            reply["fingerprints"] = fingerprints([self._view(i) for i in fp["ids"]], int(fp["key"])).tolist()
        if self.cuda:
            for i in req.get("back", ids):
                self.buffers[i].tensor.copy_(self.mirrors[i])
            torch.cuda.synchronize()
        self._send(reply)

    def _run(self, args: tuple[Any, ...], scalars: dict[str, Any], recorder: Any) -> Any:
        if recorder is None:
            out = self.kernel(*args, **scalars)
        else:
            with recorder:
                out = self.kernel(*args, **scalars)
        if self.cuda:
            self.torch.cuda.synchronize()
        return out

    def _fail(self, reply: dict[str, Any], exc: BaseException) -> None:
        from runner.trials import classify_exception, context_alive, format_exception

        status, fatal = classify_exception(exc)
        if not fatal and not context_alive(self.device):
            status, fatal = "crashed", True
        err: dict[str, Any] = {"status": status, "fatal": fatal, "message": format_exception(exc, MAX_TEXT)}
        limit = _limitation(exc)
        if limit and not self.cuda:
            err.update(status="unsupported_on_cpu", limitation=limit)
        reply.update(ok=False, error=err, violations=self.audit.violations())
        self._send(reply)
        if fatal:
            raise HostExit

    def _deliver(self, out: Any, out_ids: list[int], args: tuple[Any, ...]) -> tuple[str, list[dict[str, Any]]]:
        """Describe the return value and copy each declared output into its slot."""
        from runner.trials import describe, poison

        torch = self.torch
        if type(out) is tuple:
            returned, items = "tuple", list(out)
        elif type(out) is list:
            returned, items = "list", list(out)
        elif out is None:
            returned, items = "none", [None]
        elif isinstance(out, torch.Tensor):
            returned, items = "tensor", [out]
        else:
            returned, items = "other", [out]
        infos = []
        storages = [a.untyped_storage().data_ptr() if type(a) is torch.Tensor else None for a in args]
        for pos, obj in enumerate(items[:64]):
            info: dict[str, Any] = {"kind": "other", "type_name": describe(obj)[:400]}
            if obj is None:
                info.update(kind="none")
            elif isinstance(obj, torch.Tensor):
                info["kind"] = "tensor"
                plain = type(obj) is torch.Tensor and not obj.is_meta and obj.layout == torch.strided and \
                    not obj.is_nested
                info["plain"] = plain
                if plain:
                    info.update(dtype=str(obj.dtype).replace("torch.", ""), shape=list(obj.shape),
                                device=obj.device.type)
                    ptr = obj.untyped_storage().data_ptr()
                    alias = next((i for i, s in enumerate(storages) if s is not None and s == ptr and ptr), None)
                    info["alias_of"] = alias
                    if pos < len(out_ids):
                        slot = self.buffers[out_ids[pos]]
                        if obj.dtype == slot.dtype and tuple(obj.shape) == slot.shape and \
                                obj.device.type == self.device.type:
                            slot.tensor.copy_(obj)
                            info["copied"] = True
                    if alias is None:
                        poison(obj)
            infos.append(info)
        if self.cuda:
            torch.cuda.synchronize()
        return returned, infos

    # ------------------------------------------------------------------------------------------ timing

    def _batch(self, req: dict[str, Any]) -> None:
        from runner.host_timing import run_batch

        reply = {"kind": "timed", "batch_id": req["batch_id"], "ok": True, "error": None}
        try:
            reply.update(run_batch(self, req))
            reply["violations"] = self.audit.violations()
        except BaseException as exc:  # noqa: BLE001
            self._fail(reply, exc)
            return
        self._send(reply)

    def _verify(self, req: dict[str, Any]) -> None:
        from runner.host_timing import verify

        reply = {"kind": "verified", "batch_id": req["batch_id"]}
        reply.update(verify(self, req))
        self._send(reply)

    def _fingerprint(self, req: dict[str, Any]) -> None:
        from runner.huge_inputs import fingerprints

        tensors = [self._view(i) for i in req["ids"]]
        self._send({"kind": "fingerprinted", "values": fingerprints(tensors, int(req["key"])).tolist()})


def _recorder() -> Any:
    """The always-on op recorder (:class:`runner.profile_proof.OpRecorder`), where it exists."""
    from runner import profile_proof

    cls = getattr(profile_proof, "OpRecorder", None)
    return cls() if cls is not None else None


def _limitation(exc: BaseException) -> str | None:
    """A known Triton-interpreter limitation behind ``exc`` (:func:`runner.interp_compat.limitation`)."""
    if os.environ.get("TRITON_INTERPRET") != "1":
        return None
    try:
        from runner import interp_compat
    except ImportError:
        return None
    fn = getattr(interp_compat, "limitation", None)
    return fn(exc) if fn is not None else None


def _warm_up(device: Any) -> None:
    """A first Triton compile and launch (and the profiler), before the submission: what torch and Triton set
    up lazily happens here, and the thread count the evaluator compares with is taken after it."""
    import torch
    import torch._dynamo  # noqa: F401

    from runner import warmup_kernel
    from runner.profile_proof import profile_call

    x = torch.zeros(200, device=device)
    profile_call(lambda: warmup_kernel.run(x), device)
    if device.type == "cuda":
        torch.cuda.synchronize()
    if float(x.sum()) != 200.0:
        raise RuntimeError("the warm-up Triton kernel computed a wrong result: this machine's Triton is broken")


__all__ = ["host_main", "Host"]
if __name__ == "__main__":  # pragma: no cover - started only by runner.worker
    sys.exit("runner.kernel_host is started by the evaluation job leader")
