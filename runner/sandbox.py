"""Run the evaluation worker in a sandboxed child process and collect what it reports.

Each job runs in a process of its own, in a new session (so a timeout kills its whole process group), in a fresh
temporary working directory, with an environment rebuilt from an allowlist (secrets never reach it), resource
limits, and its stdout/stderr captured to a log that is kept (trimmed) but never parsed. Results come back over
a private pipe as length-prefixed JSON frames, each authenticated with an HMAC whose per-job key travels on a
second pipe that the worker reads and closes before it imports the submission; a frame that fails the check makes
the outcome ``forged``.

Two ways to start the child (``D2KGRADE_EVAL_MODE``):

- ``zygote`` (default): a pre-started process that has imported torch and triton (but never initialised CUDA
  and never runs submissions) forks one child per job. A fork of a clean template starts as clean as a fresh
  interpreter, and skips the ~3-8 s import of torch per evaluation. The zygote itself was started with the
  scrubbed environment, so even ``/proc/self/environ`` of a child holds no secret.
- ``spawn``: a fresh ``python -I`` per job.

Same-uid isolation has limits: a hostile child can still signal or read files of its own user. The static
tripwires forbid the calls that do so; run the whole evaluator under its own user or container for untrusted
code at scale.
"""

from __future__ import annotations

import atexit
import hashlib
import hmac
import json
import logging
import os
import re
import resource
import secrets
import select
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from d2kgrade.io import pid_alive, private_tempdir

log = logging.getLogger(__name__)

ROOT = Path(__file__).resolve().parent.parent
"""Folder that holds the ``runner`` package (put on the child's sys.path: ``python -I`` ignores PYTHONPATH)."""


def _boot_path() -> str:
    """The package root, then the caller's PYTHONPATH entries (packages carried beside the installed ones)."""
    extra = [p for p in os.environ.get("PYTHONPATH", "").split(":") if p and ":" not in p]
    return ":".join([str(ROOT), *extra])

MAX_FRAME = 64 << 20
LOG_HEAD = 4000
LOG_TAIL = 12000

ALLOWED_ENV = re.compile(
    r"^(PATH|LANG|LANGUAGE|LC_[A-Z_]+|TERM|TZ|USER|LOGNAME|CUDA_[A-Z0-9_]+|NVIDIA_[A-Z0-9_]+|LD_LIBRARY_PATH|"
    r"TRITON_[A-Z0-9_]+|TORCH_CUDA_ARCH_LIST|TORCHINDUCTOR_[A-Z0-9_]+|PYTORCH_[A-Z0-9_]+|OMP_NUM_THREADS|"
    r"MKL_NUM_THREADS|OPENBLAS_NUM_THREADS|CC|CXX|CUDAHOSTCXX|NVCC_[A-Z_]+|MAX_JOBS|CPATH|LIBRARY_PATH|"
    r"VIRTUAL_ENV)$")
"""Variables the worker may inherit. Everything else is dropped, whatever its name."""

SECRET_ENV = re.compile(
    r"(_KEY|_KEYS|_TOKEN|_TOKENS|_SECRET|_PASS|_PAT)$|SECRET|PASSWORD|PASSWD|CREDENTIAL|API_?KEY|AUTH|^AWS_|"
    r"^GOOGLE_|^GCP_|^GCLOUD|^CLOUDSDK_|^AZURE_|^OPENAI_|^ANTHROPIC_|^HF_|^HUGGING|^GITHUB_|^GH_|^SSH_|"
    r"^NETRC$|^KUBE|^DOCKER_|^WANDB_", re.I)
"""Dropped even when the allowlist would keep them (``TRITON_REMOTE_TOKEN``...)."""

# The worker entry: `python -I` leaves the script folder and PYTHONPATH off sys.path, so put the package root on.
BOOT = ("import sys; sys.path[:0] = sys.argv[1].split(':'); import runner.worker as w; "
        "w.zygote_main(int(sys.argv[3])) if sys.argv[2] == 'zygote' else "
        "w.spawn_main(sys.argv[3], int(sys.argv[4]), int(sys.argv[5]))")


def scrub_env(environ: dict[str, str] | os._Environ[str]) -> dict[str, str]:
    """The environment a worker gets: allowlisted names only, minus anything that looks like a secret."""
    return {k: v for k, v in environ.items() if ALLOWED_ENV.match(k) and not SECRET_ENV.search(k)}


# --------------------------------------------------------------------------------------------- channel


class ChannelWriter:
    """Worker side of the result channel: length-prefixed JSON frames, each with an HMAC-SHA256 of its body."""

    def __init__(self, fd: int, key: bytes) -> None:
        self._fd = fd
        self._key = key
        self._seq = 0

    def send(self, kind: str, **data: Any) -> None:
        body = json.dumps({"seq": self._seq, "kind": kind, **data}, default=_json_default).encode()
        self._seq += 1
        mac = hmac.new(self._key, body, hashlib.sha256).digest()
        frame = struct.pack(">I", len(body) + len(mac)) + mac + body
        view = memoryview(frame)
        while view:
            n = os.write(self._fd, view)
            view = view[n:]

    def close(self) -> None:
        try:
            os.close(self._fd)
        except OSError:
            pass


def _json_default(obj: Any) -> Any:
    if hasattr(obj, "item"):
        return obj.item()
    if isinstance(obj, (set, tuple)):
        return list(obj)
    return str(obj)


class ForgedMessage(Exception):
    """A frame on the result channel failed its HMAC or sequence check."""


class ChannelReader:
    """Parent side: feed bytes, get verified messages back in order."""

    def __init__(self, key: bytes) -> None:
        self._key = key
        self._buf = bytearray()
        self._seq = 0

    def feed(self, data: bytes) -> list[dict[str, Any]]:
        self._buf += data
        out = []
        while len(self._buf) >= 4:
            (n,) = struct.unpack(">I", self._buf[:4])
            if n > MAX_FRAME or n < 32:
                raise ForgedMessage(f"frame of {n} bytes")
            if len(self._buf) < 4 + n:
                break
            mac, body = bytes(self._buf[4:36]), bytes(self._buf[36:4 + n])
            del self._buf[:4 + n]
            if not hmac.compare_digest(mac, hmac.new(self._key, body, hashlib.sha256).digest()):
                raise ForgedMessage("a frame failed authentication")
            msg = json.loads(body)
            if not isinstance(msg, dict) or msg.get("seq") != self._seq:
                raise ForgedMessage(f"frame out of sequence (expected {self._seq})")
            self._seq += 1
            out.append(msg)
        return out


# --------------------------------------------------------------------------------------------- jobs


@dataclass
class JobSpec:
    """One sandboxed worker run."""

    config: dict[str, Any]
    """What the worker is told (JSON); the channel key is added here and never written to disk."""
    device: str
    """``cuda`` or ``cpu`` (cpu: Triton interpreter, no GPU visible)."""
    env: dict[str, str] = field(default_factory=dict)
    """Per-job variables on top of the scrubbed environment, for the evaluator and the kernel host
    (``CUDA_VISIBLE_DEVICES``)."""
    host_env: dict[str, str] = field(default_factory=dict)
    """Variables for the kernel host alone (its build cache: ``TORCH_EXTENSIONS_DIR``...)."""
    host_write: list[str] = field(default_factory=list)
    """Folders the kernel host may write besides its temp folder (given to its uid); its caches."""
    deny: list[str] = field(default_factory=list)
    """Folders the kernel host must not read (the suite, the run store, the trusted caches, the caller's cwd)."""
    timeout_s: float = 600.0
    """Wall limit of the whole job."""
    stall_s: float | None = None
    """Limit on the time between two messages once the submission is imported (an infinite loop)."""
    mem_limit_bytes: int = 16 << 30
    """Host memory limit: RLIMIT_AS on cpu; on cuda (where RLIMIT_AS breaks the driver's address-space
    reservations) the parent polls the resident memory of the process group and kills it past this."""
    fsize_limit_bytes: int = 4 << 30
    """Largest file the worker may write (logs, caches)."""
    host_extra: dict[str, Any] = field(default_factory=dict)
    """More of the kernel host's configuration (test knobs)."""
    launcher: list[str] = field(default_factory=list)
    """A command the spawned job leader runs under (``compute-sanitizer --tool memcheck ...``); spawn mode only."""
    triton_cache: str | None = None
    """The evaluator's own Triton cache, kept across jobs (a trusted folder the host may not read; None: a fresh
    one per job). A new host cache starts as a copy of its harness kernels (:func:`seed_triton_cache`)."""
    host_triton_cache: str | None = None
    """The kernel host's Triton cache, kept across the jobs of one source (:func:`runner.cuda_cache.triton_dir`;
    writable by the host), autotuning results included. None: a fresh one in the host's temp folder, removed
    with it."""


@dataclass
class JobOutcome:
    """What came back from one job."""

    messages: list[tuple[float, dict[str, Any]]] = field(default_factory=list)
    """Verified messages with the parent's monotonic arrival time."""
    returncode: int | None = None
    """Exit code (negative: killed by that signal); None if unknown."""
    host_status: int | None = None
    """The kernel host's wait status, as the job leader saw it (negative exit codes are not used here)."""
    sandbox: str = ""
    """How the host was contained (uid, what could not be enforced)."""
    timed_out: bool = False
    stalled: bool = False
    mem_exceeded: bool = False
    forged: str | None = None
    log: str = ""
    """What the worker and the submission printed, trimmed; never parsed."""
    wall_s: float = 0.0


def _read_log(path: Path) -> str:
    """Head and tail of the worker's log, without reading a multi-gigabyte log into memory."""
    try:
        with open(path, "rb") as fh:
            size = os.fstat(fh.fileno()).st_size
            if size <= LOG_HEAD + LOG_TAIL:
                return fh.read().decode(errors="replace")
            head = fh.read(LOG_HEAD).decode(errors="replace")
            fh.seek(size - LOG_TAIL)
            tail = fh.read().decode(errors="replace")
    except OSError:
        return ""
    return f"{head}\n... [{size - LOG_HEAD - LOG_TAIL} bytes cut] ...\n{tail}"


def _group_rss(pgid: int) -> int:
    """Resident bytes of every process in the group."""
    total = 0
    page = os.sysconf("SC_PAGE_SIZE")
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/stat", "rb") as fh:
                fields = fh.read().rsplit(b")", 1)[1].split()
            if int(fields[2]) != pgid:
                continue
            with open(f"/proc/{entry.name}/statm", "rb") as fh:
                fields = fh.read().split()
            # Resident minus shared: the evaluator's and the host's shared-memory buffers are mapped in both and
            # would count twice (a 17 GB page pool would look like 34 GB).
            total += max(0, int(fields[1]) - int(fields[2])) * page
        except (OSError, IndexError, ValueError):
            continue
    return total


def _kill_group(pgid: int | None) -> None:
    if not pgid:
        return
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _feed_config(fd: int, payload: bytes) -> None:
    def write() -> None:
        try:
            view = memoryview(payload)
            while view:
                n = os.write(fd, view)
                view = view[n:]
        except OSError:
            pass
        finally:
            os.close(fd)

    threading.Thread(target=write, daemon=True, name="d2k-config-feed").start()


def run_job(spec: JobSpec, mode: str | None = None) -> JobOutcome:
    """Run one job (a job leader, its kernel host and its evaluator: :mod:`runner.worker`) and supervise it until
    it ends, times out, stalls or overruns memory; then make sure nothing of it is left running."""
    from runner import containment

    mode = mode or os.environ.get("D2KGRADE_EVAL_MODE", "zygote")
    if mode not in ("zygote", "spawn"):
        raise ValueError(f"D2KGRADE_EVAL_MODE must be zygote or spawn, got {mode!r}")
    if spec.launcher:
        mode = "spawn"
    sweep_stale()
    if mode == "zygote":
        try:
            _zygote(spec.device)
        except ZygoteUnavailable as exc:
            log.warning("spawning evaluation workers instead of forking them: %s", exc)
            mode = "spawn"
    key = secrets.token_bytes(32)
    workdir = private_tempdir("eval")
    uid = containment.pick_uid() if containment.is_root() else None
    host_dir = _host_dir()
    host_triton = Path(spec.host_triton_cache) if spec.host_triton_cache else host_dir / ".triton"
    host_write = [*spec.host_write, *([str(host_triton)] if spec.host_triton_cache else [])]
    # A kept cache keeps the autotuner's choices too (Triton's TRITON_CACHE_AUTOTUNING): round 14 on the H200 saw
    # gemm_bias_act decode_batch_256 at 58-87 us over five evaluations (three levels: most likely one autotuned
    # config or another; the choice was not recorded).
    tune_env = {"TRITON_CACHE_AUTOTUNING": "1"} if spec.host_triton_cache else {}
    if spec.triton_cache and _new_folder(host_triton):
        # Only into a folder made here: one a host had before may hold its links, which a copy would follow.
        seed_triton_cache(Path(spec.triton_cache), host_triton)
    sandbox_note = f"kernel host as uid {uid}" if uid else containment.protect_self()
    if uid:
        for folder in [host_dir, *map(Path, host_write)]:
            folder.mkdir(parents=True, exist_ok=True)
            containment.own_tree(folder, uid)
        os.chmod(host_dir, 0o700)
    job_env = {"HOME": str(workdir), "TMPDIR": str(workdir), "PYTHONDONTWRITEBYTECODE": "1",
               "TRITON_CACHE_DIR": spec.triton_cache or str(workdir / ".triton"), **spec.env}
    host_env = {**scrub_env(os.environ), **_device_env(spec.device), "HOME": str(host_dir), "TMPDIR": str(host_dir),
                "PYTHONDONTWRITEBYTECODE": "1", "TRITON_CACHE_DIR": str(host_triton),
                "TORCHINDUCTOR_CACHE_DIR": str(host_dir / ".inductor"), **tune_env, **spec.env, **spec.host_env}
    limits = {"as_bytes": spec.mem_limit_bytes if spec.device == "cpu" else None,
              "fsize_bytes": spec.fsize_limit_bytes}
    host_cfg = {"device": spec.device, "dir": str(host_dir), "uid": uid, "env": host_env, "limits": limits,
                "write_roots": [str(host_dir), *host_write], "deny_roots": [*spec.deny, str(workdir)],
                "sandbox": sandbox_note, **spec.host_extra}
    job = {"cwd": str(workdir), "env": job_env, "host": host_cfg, "mode": spec.config.get("mode", "evaluate")}
    if job["mode"] == "prebuild":
        payload = spec.config["source"].encode()
    else:
        payload = json.dumps({**spec.config, "channel_key": key.hex(),
                              "limits": {"fsize_bytes": spec.fsize_limit_bytes}}).encode()
    cfg_r, cfg_w = os.pipe()
    res_r, res_w = os.pipe()
    log_path = workdir / "worker.log"
    log_fd = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    out = JobOutcome(sandbox=sandbox_note)
    t0 = time.monotonic()
    proc: subprocess.Popen[bytes] | None = None
    status_r = -1
    pgid: int | None = None
    try:
        if mode == "spawn":
            env = {**scrub_env(os.environ), **_device_env(spec.device), **job_env}
            if spec.launcher:  # the leader passes what the launcher adds on to the host (runner.worker)
                job["launcher_env"] = sorted(env)
            proc = subprocess.Popen([*spec.launcher, sys.executable, "-I", "-c", BOOT, _boot_path(), "spawn",
                                     json.dumps(job), str(cfg_r), str(res_w)],
                                    cwd=workdir, env=env, stdin=subprocess.DEVNULL, stdout=log_fd, stderr=log_fd,
                                    pass_fds=(cfg_r, res_w), start_new_session=True)
            pgid = proc.pid
        else:
            status_r, status_w = os.pipe()
            try:
                try:
                    pgid = _zygote(spec.device).fork(job, [cfg_r, res_w, log_fd, status_w])
                except (OSError, RuntimeError):  # the zygote died (killed by a previous job?): start another
                    pgid = _zygote(spec.device).fork(job, [cfg_r, res_w, log_fd, status_w])
            finally:
                os.close(status_w)
        for fd in (cfg_r, res_w, log_fd):
            os.close(fd)
        cfg_r = res_w = log_fd = -1
        _feed_config(cfg_w, payload)
        cfg_w = -1
        _supervise(out, spec, ChannelReader(key), res_r, proc, status_r, pgid, t0)
    finally:
        _end_group(pgid)
        if proc is not None:
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                pass
        if uid:
            containment.kill_uid(uid)
        if mode == "zygote":
            _sweep_zygote(spec.device)
        for fd in (cfg_r, cfg_w, res_r, res_w, log_fd, status_r):
            if fd >= 0:
                try:
                    os.close(fd)
                except OSError:
                    pass
        out.log = _read_log(log_path)
        shutil.rmtree(workdir, ignore_errors=True)
        shutil.rmtree(host_dir, ignore_errors=True)
        out.wall_s = time.monotonic() - t0
    return out


def _host_tmp_root() -> Path:
    """Where kernel-host temp folders go: a folder every uid can enter (the caller's TMPDIR may be private)."""
    return Path("/tmp" if os.path.isdir("/tmp") else tempfile.gettempdir())


HARNESS_KERNELS = ("_warmup_kernel", "digest_kernel")
"""The Triton kernels the kernel host itself compiles (runner.warmup_kernel, runner.huge_inputs)."""
SEED_MAX_BYTES = 64 << 20


def seed_triton_cache(src: Path, dst: Path) -> int:
    """Copy the trusted cache's entries of the harness kernels and of Triton's compiled helper modules (launchers,
    ``cuda_utils``) into a new host's Triton cache, so that the host does not compile them again (about 2 s an
    evaluation on the H200). The host gets copies: what it writes to its cache stays in its own folder. An entry
    is one folder per cache key (Triton's FileCacheManager); an entry holding anything else is left out, and so
    is the rest once :data:`SEED_MAX_BYTES` are copied. Returns the entries copied."""
    try:
        entries = sorted(p for p in src.iterdir() if p.is_dir())
    except OSError:
        return 0
    copied, total = 0, 0
    for entry in entries:
        try:
            files = [f for f in entry.iterdir() if f.is_file() and not f.name.startswith(".")]
            if not files or not all(_harness_file(f.name) for f in files):
                continue
            size = sum(f.stat().st_size for f in files)
            if total + size > SEED_MAX_BYTES:
                break
            out = dst / entry.name
            out.mkdir(parents=True, exist_ok=True)
            for f in files:
                shutil.copyfile(f, out / f.name)
        except OSError:
            continue  # an entry being written by another evaluator now: the host compiles it itself
        copied += 1
        total += size
    return copied


def _new_folder(path: Path) -> bool:
    """Create ``path`` (and its parents); False if it was there already."""
    try:
        path.mkdir(parents=True)
    except FileExistsError:
        return False
    return True


def _harness_file(name: str) -> bool:
    if name.endswith(".so"):
        return name.startswith(("__triton_launcher", "cuda_utils"))
    stem = name.removeprefix("__grp__").split(".", 1)[0]
    return stem in HARNESS_KERNELS


def _host_dir() -> Path:
    """The kernel host's temp folder, ``/tmp/d2k-host-<our pid>-*``, named so a later start can tell its creator
    died (:func:`sweep_stale`)."""
    return Path(tempfile.mkdtemp(prefix=f"d2k-host-{os.getpid()}-", dir=_host_tmp_root()))


def _end_group(pgid: int | None) -> None:
    """Ask the job leader to contain its job (SIGTERM: it kills every descendant), then kill the group."""
    if not pgid:
        return
    try:
        os.kill(pgid, signal.SIGTERM)
    except (ProcessLookupError, PermissionError):
        _kill_group(pgid)
        return
    deadline = time.monotonic() + 3.0
    while time.monotonic() < deadline:
        try:
            with open(f"/proc/{pgid}/stat", "rb") as fh:
                if fh.read().rsplit(b")", 1)[1].split()[0] == b"Z":
                    break
        except (OSError, IndexError):
            break
        time.sleep(0.02)
    _kill_group(pgid)


def sweep_stale() -> int:
    """Remove kernel-host temp folders whose creator is gone (a caller killed with ``kill -9``: they belong to
    another uid, so the run store's own sweep leaves them); returns how many."""
    removed = 0
    for folder in _host_tmp_root().glob("d2k-host-*"):
        parts = folder.name.split("-")
        if len(parts) < 4 or not parts[2].isdigit() or pid_alive(int(parts[2])):
            continue
        shutil.rmtree(folder, ignore_errors=True)
        removed += 1
    return removed


def _supervise(out: JobOutcome, spec: JobSpec, reader: ChannelReader, res_r: int,
               proc: subprocess.Popen[bytes] | None, status_r: int, pgid: int | None, t0: float) -> None:
    last_msg = time.monotonic()
    imported = False
    res_open = True
    exited = False
    exited_at = 0.0
    next_rss = 0.0
    while True:
        now = time.monotonic()
        if now - t0 > spec.timeout_s:
            out.timed_out = True
            _end_group(pgid)
            break
        if imported and spec.stall_s is not None and now - last_msg > spec.stall_s:
            out.stalled = out.timed_out = True
            _end_group(pgid)
            break
        if spec.device != "cpu" and now >= next_rss and pgid:
            next_rss = now + 0.5
            if _group_rss(pgid) > spec.mem_limit_bytes:
                out.mem_exceeded = True
                _end_group(pgid)
                break
        watch = [fd for fd, open_ in ((res_r, res_open), (status_r, status_r >= 0 and not exited)) if open_]
        ready = select.select(watch, [], [], 0.2)[0] if watch else []
        if res_r in ready:
            data = os.read(res_r, 1 << 20)
            if not data:
                res_open = False
            else:
                try:
                    for msg in reader.feed(data):
                        last_msg = time.monotonic()
                        imported = imported or msg.get("kind") == "import_start"
                        out.messages.append((last_msg, msg))
                except ForgedMessage as exc:
                    out.forged = str(exc)
                    _end_group(pgid)
                    break
        if not exited:
            if proc is not None:
                rc = proc.poll()
                if rc is not None:
                    exited, out.returncode = True, rc
            elif status_r in ready:
                data = os.read(status_r, 4096)
                exited = True
                if data:
                    st = json.loads(data)
                    if st.get("evaluator") is not None:
                        out.returncode = os.waitstatus_to_exitcode(st["evaluator"])
                    out.host_status = st.get("host")
            if exited:
                exited_at = time.monotonic()
        if exited and (not res_open or time.monotonic() - exited_at > 2.0):
            break
        if not watch:
            time.sleep(0.05)


def _device_env(device: str) -> dict[str, str]:
    if device == "cpu":
        # The submission sees no GPU, and Triton runs its interpreter. One intra-op thread: the smoke tensors are
        # just over ATen's parallel grain, and on a shared 2-core machine two spinning OpenMP threads made each
        # check 100-300x slower (1.4 s vs 5 ms for one comparison of 37x1000).
        return {"TRITON_INTERPRET": "1", "CUDA_VISIBLE_DEVICES": "", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    return {}


# --------------------------------------------------------------------------------------------- zygote


class ZygoteUnavailable(RuntimeError):
    """No zygote can serve this device here; jobs are spawned instead."""


class _Zygote:
    """A pre-started template process that forks one child per job."""

    def __init__(self, device: str) -> None:
        # NVML-based device checks: an accidental torch.cuda.is_available() in the zygote must not cuInit.
        self.env = {**scrub_env(os.environ), **_device_env(device), "PYTORCH_NVML_BASED_CUDA_CHECK": "1"}
        log.info("starting an evaluation zygote for %s", device)
        parent_sock, child_sock = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.sock = parent_sock
        self.lock = threading.Lock()
        # stderr to a file, not a pipe nobody drains (a full pipe would block the zygote).
        self.err = tempfile.TemporaryFile()
        self.proc = subprocess.Popen(
            [sys.executable, "-I", "-c", BOOT, _boot_path(), "zygote", str(child_sock.fileno())],
            env=self.env, cwd=tempfile.gettempdir(), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
            stderr=self.err, pass_fds=(child_sock.fileno(),), start_new_session=True)
        child_sock.close()
        self.sock.settimeout(300)
        try:
            hello = self.sock.recv(4096)
        except OSError:
            hello = b""
        if hello == b"nofork":
            self.close()
            raise ZygoteUnavailable("a child forked after importing torch/triton could not use the GPU")
        if hello != b"ready":
            self.err.seek(0)
            err = self.err.read().decode(errors="replace")[-2000:]
            self.close()
            raise ZygoteUnavailable(f"the evaluation zygote did not start: {err}")

    def alive(self) -> bool:
        return self.proc.poll() is None

    def fork(self, job: dict[str, Any], fds: list[int]) -> int:
        """Start one job; return the pid (and process group) of its session leader."""
        with self.lock:
            socket.send_fds(self.sock, [json.dumps(job).encode()], fds)
            reply = self.sock.recv(4096)
        if not reply:
            raise RuntimeError("the evaluation zygote died")
        return int(json.loads(reply)["pid"])

    def sweep(self) -> None:
        """Kill processes re-parented to the zygote that are not live job leaders (orphans of a killed job)."""
        with self.lock:
            self.sock.send(json.dumps({"op": "sweep"}).encode())
            self.sock.recv(4096)

    def close(self) -> None:
        try:
            self.sock.close()
            self.err.close()
        finally:
            _kill_group(self.proc.pid)
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                pass


_ZYGOTES: dict[tuple[str, str], _Zygote] = {}
_ZYGOTE_LOCK = threading.Lock()


_NO_ZYGOTE: set[tuple[str, str]] = set()


def _zygote(device: str) -> _Zygote:
    """The zygote for this device and environment (a changed environment gets a new one)."""
    key = (device, json.dumps({**scrub_env(os.environ), **_device_env(device)}, sort_keys=True))
    with _ZYGOTE_LOCK:
        if key in _NO_ZYGOTE:
            raise ZygoteUnavailable("a zygote cannot serve this device here")
        z = _ZYGOTES.get(key)
        if z is None or not z.alive():
            if z is not None:
                z.close()
            try:
                z = _ZYGOTES[key] = _Zygote(device)
            except ZygoteUnavailable:
                _NO_ZYGOTE.add(key)
                _ZYGOTES.pop(key, None)
                raise
        return z


def _sweep_zygote(device: str) -> None:
    key = (device, json.dumps({**scrub_env(os.environ), **_device_env(device)}, sort_keys=True))
    z = _ZYGOTES.get(key)
    if z is not None and z.alive():
        try:
            z.sweep()
        except OSError:
            pass


@atexit.register
def shutdown_zygotes() -> None:
    """Stop every zygote this process started."""
    with _ZYGOTE_LOCK:
        for z in _ZYGOTES.values():
            z.close()
        _ZYGOTES.clear()


# --------------------------------------------------------------------------------------------- child side


def apply_limits(limits: dict[str, Any]) -> None:
    """Resource limits inside the child, before any submission code runs."""
    if limits.get("as_bytes"):
        resource.setrlimit(resource.RLIMIT_AS, (limits["as_bytes"], limits["as_bytes"]))
    if limits.get("fsize_bytes"):
        resource.setrlimit(resource.RLIMIT_FSIZE, (limits["fsize_bytes"], limits["fsize_bytes"]))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


def read_all(fd: int) -> bytes:
    chunks = []
    while True:
        data = os.read(fd, 1 << 20)
        if not data:
            break
        chunks.append(data)
    os.close(fd)
    return b"".join(chunks)
