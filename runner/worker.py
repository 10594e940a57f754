"""Entry points of the sandboxed side: the zygote, the job leader, and what the leader starts.

One evaluation is one *job*, led by a process forked from the zygote (or spawned fresh, ``D2KGRADE_EVAL_MODE=
spawn``) that never runs submission code. The leader:

1. becomes a child subreaper (:mod:`runner.containment`), so a descendant that escapes its parent comes back to it;
2. forks the **kernel host** first, while it still holds nothing secret: the host closes every descriptor but its
   socket and the log, gets ``PR_SET_PDEATHSIG``, moves into its own temp folder, takes the scrubbed environment,
   drops to its own uid (as root) and serves requests (:mod:`runner.kernel_host`);
3. forks the **evaluator**, which alone reads the job's configuration (the secret seed, the channel key) from
   the config pipe, makes itself non-dumpable and drives the host (:mod:`runner.evaluator`);
4. waits for the evaluator, kills every descendant left (and, as root, every process of the host's uid),
   and reports both exit statuses to the caller.

A prebuild job (a CUDA submission's ``load_inline`` built without a GPU, :mod:`runner.cuda_cache`) runs the
import alone in a host-like child, contained the same way.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import sys
import time
import traceback
from pathlib import Path
from typing import Any

from runner import containment
from runner.sandbox import ChannelWriter, apply_limits, read_all

PRELOAD = ("torch", "triton", "triton.language", "numpy", "yaml", "pydantic", "d2kgrade.schema", "d2kgrade.records",
           "runner.compare", "runner.direct", "runner.inputs", "runner.loading", "runner.timing",
           "runner.trials", "runner.profile_proof", "runner.roofline", "runner.stats", "runner.checks",
           "runner.huge_inputs", "runner.protocol", "runner.shm", "runner.audit", "runner.kernel_host",
           "runner.host_timing", "runner.host_client", "runner.evaluator", "runner.eval_timing",
           "runner.baselines", "torch.profiler", "torch._dynamo")
"""Imported once by the zygote (torch._dynamo alone is ~3 s). If they mapped the CUDA driver and a forked child
then cannot use the GPU, the zygote refuses to serve and jobs are spawned instead (see :func:`zygote_main`)."""


# --------------------------------------------------------------------------------------------- the zygote


def zygote_main(ctrl_fd: int) -> None:
    """Import the heavy modules once, then fork one job leader per request (see :mod:`runner.sandbox`)."""
    import importlib

    sock = socket.socket(fileno=ctrl_fd)
    for name in PRELOAD:
        try:
            importlib.import_module(name)
        except Exception:  # noqa: BLE001 - a module that fails here fails again, visibly, in the job
            pass
    with open("/proc/self/maps") as fh:
        driver_loaded = "libcuda.so" in fh.read()
    # torch 2.11 (cu130) maps libcuda at import without initializing it (round 11's preload probe: libcuda mapped
    # right after `import torch`), which alone does not stop a forked child from using the GPU: only a driver
    # initialized before the fork does. So the zygote tries: a forked child must initialize CUDA and run an op.
    forkable = not driver_loaded or _forked_cuda_works()
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # job leaders (and orphans re-parented here) are reaped
    containment.prctl(containment.PR_SET_CHILD_SUBREAPER, 1)
    sock.send(b"ready" if forkable else b"nofork")
    if not forkable:
        os._exit(0)
    leaders: set[int] = set()
    while True:
        try:
            msg, fds, _flags, _addr = socket.recv_fds(sock, 1 << 20, 4)
        except OSError:
            break
        if not msg:
            break
        job = json.loads(msg)
        if job.get("op") == "sweep":
            # Orphans that outlived a killed leader were re-parented here: nothing but live leaders may remain.
            leaders = {p for p in leaders if _alive(p)}
            for pid in containment.children(os.getpid()) - leaders:
                _kill(pid)
            sock.send(b"{}")
            continue
        pid = os.fork()
        if pid == 0:
            sock.close()
            _job_leader(job, fds)
        leaders.add(pid)
        for fd in fds:
            os.close(fd)
        try:
            sock.send(json.dumps({"pid": pid}).encode())
        except OSError:
            break
    os._exit(0)


def _forked_cuda_works(timeout_s: float = 120.0) -> bool:
    """Whether a child forked from this process can initialize CUDA and run a kernel (exit 0 within
    ``timeout_s``); a child that fails, hangs or dies says no."""
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            import torch

            torch.cuda.init()
            code = 0 if torch.ones(8, device="cuda").sum().item() == 8.0 else 1
        except BaseException:  # noqa: BLE001 - any failure is a no
            code = 1
        finally:
            os._exit(code)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0
        time.sleep(0.05)
    _kill(pid)
    os.waitpid(pid, 0)
    return False


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            return fh.read().rsplit(b")", 1)[1].split()[0] != b"Z"
    except (OSError, IndexError):
        return False


def _kill(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _job_leader(job: dict[str, Any], fds: list[int]) -> None:
    """Forked from the zygote: lead one job in a session of its own."""
    try:
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        os.setsid()
        cfg_r, res_w, log_fd, status_w = fds
        status = lead(job, cfg_r, res_w, log_fd)
        os.write(status_w, json.dumps(status).encode())
    finally:
        os._exit(0)


def spawn_main(job_json: str, cfg_fd: int, res_fd: int) -> None:
    """Entry of a freshly spawned job leader (``D2KGRADE_EVAL_MODE=spawn``); the status is its exit code."""
    job = json.loads(job_json)
    if job.get("launcher_env") is not None:
        _inherit_launcher(job, (cfg_fd, res_fd))
    status = lead(job, cfg_fd, res_fd, None)
    code = status.get("evaluator") or 0
    os._exit(0 if os.WIFEXITED(code) and os.WEXITSTATUS(code) == 0 else 1)


def _inherit_launcher(job: dict[str, Any], ours: tuple[int, ...]) -> None:
    """A leader started under a launcher (``compute-sanitizer --target-processes all``): what the launcher added
    to the environment (its injection variables: every name the caller did not set) and the descriptors it left
    open (its channel to the tool) go to the kernel host too, which otherwise starts from a clean environment
    and closes every descriptor, and so would leave the tool without word from the process it is meant to check
    (round 11: memcheck waited 300 s for a host that never reported)."""
    given = set(job["launcher_env"])
    job["host"]["env"].update({k: v for k, v in os.environ.items() if k not in given})
    fds = [int(fd) for fd in os.listdir("/proc/self/fd") if fd.isdigit()]
    job["host"]["keep_fds"] = [fd for fd in fds if fd > 2 and fd not in ours and _is_open(fd)]


def _is_open(fd: int) -> bool:
    try:
        os.fstat(fd)
    except OSError:  # the listing's own descriptor, closed by now
        return False
    return True


# --------------------------------------------------------------------------------------------- the leader


def lead(job: dict[str, Any], cfg_r: int, res_w: int, log_fd: int | None) -> dict[str, Any]:
    """Start the kernel host and the evaluator, wait for the evaluator, contain and reap everything."""
    import importlib

    from runner import shm

    for name in PRELOAD:  # spawn mode: import before the host drops its uid (a Python under /root is private)
        try:
            importlib.import_module(name)
        except Exception:  # noqa: BLE001 - fails again, visibly, where it is used
            pass
    containment.prctl(containment.PR_SET_CHILD_SUBREAPER, 1)
    os.chdir(job["cwd"])
    os.environ.update(job["env"])  # on top of the scrubbed environment the zygote (or spawn) started with
    host_cfg = job["host"]
    uid = host_cfg.get("uid")

    def on_term(signum: int, frame: Any) -> None:
        containment.kill_descendants()
        if uid:
            containment.kill_uid(uid)
        os._exit(128 + signum)

    signal.signal(signal.SIGTERM, on_term)
    if job.get("mode") == "prebuild":
        return _prebuild(job, cfg_r, res_w, log_fd)
    ev_sock, host_sock = shm.socket_pair()
    host_pid = os.fork()
    if host_pid == 0:
        _host_child(host_sock, host_cfg, log_fd, keep=(host_sock.fileno(), *host_cfg.get("keep_fds", [])))
    host_sock.close()
    eval_pid = os.fork()
    if eval_pid == 0:
        _evaluator_child(cfg_r, res_w, ev_sock, host_pid, log_fd, tuple(host_cfg.get("keep_fds", [])))
    ev_sock.close()
    for fd in (cfg_r, res_w):
        os.close(fd)
    _, ev_status = os.waitpid(eval_pid, 0)
    host_status = containment.exit_status(host_pid)
    killed = containment.kill_descendants()
    if uid:
        killed += containment.kill_uid(uid)
    _remove_tree(host_cfg.get("dir"))
    return {"evaluator": ev_status, "host": host_status, "killed": killed}


def _remove_tree(path: str | None) -> None:
    import shutil

    if path:
        shutil.rmtree(path, ignore_errors=True)


def _redirect(log_fd: int | None, keep: tuple[int, ...]) -> None:
    """stdout/stderr to the log, every other descriptor closed (but ``keep``)."""
    if log_fd is not None:
        os.dup2(log_fd, 1)
        os.dup2(log_fd, 2)
    keep_set = {0, 1, 2, *keep}
    for fd in range(3, _max_fd()):
        if fd not in keep_set:
            try:
                os.close(fd)
            except OSError:
                pass


def _max_fd() -> int:
    try:
        return max(int(x) for x in os.listdir("/proc/self/fd")) + 1
    except (OSError, ValueError):
        return 1024


def _host_child(sock: socket.socket, host_cfg: dict[str, Any], log_fd: int | None, keep: tuple[int, ...]) -> None:
    """The kernel host: contain, then serve (never returns)."""
    code = 0
    try:
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGPIPE):
            signal.signal(sig, signal.SIG_DFL)
        _redirect(log_fd, keep)
        containment.prctl(containment.PR_SET_PDEATHSIG, signal.SIGKILL)
        os.environ.clear()
        os.environ.update(host_cfg["env"])
        os.chdir(host_cfg["dir"])
        import tempfile

        tempfile.tempdir = host_cfg["dir"]  # the leader's cached choice (its own TMPDIR) is not the host's
        if host_cfg.get("uid"):
            containment.drop_privileges(int(host_cfg["uid"]))
        apply_limits(host_cfg.get("limits", {}))
        from runner.kernel_host import host_main

        host_main(sock, host_cfg)
    except BaseException:  # noqa: BLE001 - the host's own failure: the evaluator sees the socket close
        code = 1
        traceback.print_exc()
    finally:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(code)


def _evaluator_child(cfg_r: int, res_w: int, sock: socket.socket, host_pid: int, log_fd: int | None,
                     launcher_fds: tuple[int, ...] = ()) -> None:
    """The evaluator: the job's secrets exist only here (never returns). ``launcher_fds``: a launcher's own
    descriptors (see :func:`_inherit_launcher`), kept open."""
    code = 0
    chan: ChannelWriter | None = None
    try:
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGPIPE):
            signal.signal(sig, signal.SIG_DFL)
        _redirect(log_fd, keep=(cfg_r, res_w, sock.fileno(), *launcher_fds))
        containment.prctl(containment.PR_SET_DUMPABLE, 0)
        containment.prctl(containment.PR_SET_PDEATHSIG, signal.SIGKILL)
        cfg = json.loads(read_all(cfg_r))
        chan = ChannelWriter(res_w, bytes.fromhex(cfg.pop("channel_key")))
        from runner.evaluator import evaluator_main
        from runner.host_client import HostClient

        evaluator_main(cfg, chan, HostClient(sock, host_pid, stall_s=float(cfg.get("stall_s") or 300.0)))
    except BaseException as exc:  # noqa: BLE001 - whatever happens is reported, then the process ends
        code = 1
        if chan is not None:
            try:
                chan.send("harness_error", message="".join(traceback.format_exception(exc))[-4000:])
            except OSError:
                pass
    finally:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(code)


def _prebuild(job: dict[str, Any], cfg_r: int, res_w: int, log_fd: int | None) -> dict[str, Any]:
    """Import a CUDA submission with no GPU visible, as the host's uid, so its top-level ``load_inline`` builds
    into the cache. Nothing it says is trusted: the caller looks for the built library itself."""
    host_cfg = job["host"]
    source = read_all(cfg_r).decode()
    os.close(res_w)
    pid = os.fork()
    if pid == 0:
        code = 0
        try:
            _redirect(log_fd, keep=())
            containment.prctl(containment.PR_SET_PDEATHSIG, signal.SIGKILL)
            os.environ.clear()
            os.environ.update(host_cfg["env"])
            os.chdir(host_cfg["dir"])
            if host_cfg.get("uid"):
                containment.drop_privileges(int(host_cfg["uid"]))
            from runner.loading import load_module

            path = Path.cwd() / "submission_prebuild.py"
            path.write_text(source)
            load_module(path, prefix="d2k_build")
        except BaseException:  # noqa: BLE001 - GPU code at import fails here by design; the build may be done
            code = 1
            traceback.print_exc()
        finally:
            os._exit(code)
    _, st = os.waitpid(pid, 0)
    containment.kill_descendants()
    if host_cfg.get("uid"):
        containment.kill_uid(int(host_cfg["uid"]))
    _remove_tree(host_cfg.get("dir"))
    return {"evaluator": st, "host": st, "killed": 0}


__all__ = ["zygote_main", "spawn_main", "lead", "PRELOAD"]
