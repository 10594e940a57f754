"""Process containment for the kernel host: an unprivileged uid, no descendant left behind, secrets unreadable.

Used by the job leader (:mod:`runner.worker`) and the caller (:mod:`runner.sandbox`), both trusted: neither ever
runs submission code. What each mode guarantees:

- **Running as root** (CI, the GPU hosts): the kernel host drops to a uid of its own, drawn at random per job
  from :data:`UID_RANGE` (no two concurrent hosts share one), with no supplementary groups, its own temp folder
  and caches. ``/proc/<pid>/environ``, ``mem``, ``fd`` of every other process, the evaluator's included, are
  then unreadable to it, and it cannot signal them. At the end every process of that uid is killed
  (:func:`kill_uid`), wherever it moved to (a ``setsid`` double fork included).
- **Not root**: same uid, so the evaluator and the caller make themselves non-dumpable
  (``PR_SET_DUMPABLE=0``: their ``/proc`` entries become root-owned and they cannot be ptraced); processes that
  hold secrets and are not ours (the shell that started d2kgrade) stay readable, which :func:`isolation` says in
  one warning. Every text that comes back is redacted of the caller's secret values (:mod:`runner.redact`).
- **Both**: the job leader is a child subreaper (``PR_SET_CHILD_SUBREAPER``), so a descendant that escapes its
  parent is re-parented to the leader, which kills every descendant before it reports (:func:`kill_descendants`);
  the host gets ``PR_SET_PDEATHSIG`` and ``RLIMIT_NPROC`` (as its own uid).
"""

from __future__ import annotations

import ctypes
import logging
import os
import secrets
import signal
import time
from functools import lru_cache
from pathlib import Path

log = logging.getLogger(__name__)

PR_SET_PDEATHSIG = 1
PR_SET_DUMPABLE = 4
PR_SET_CHILD_SUBREAPER = 36
UID_RANGE = (3_000_000, 3_900_000)
"""Unprivileged uids for kernel hosts: far above any account a distribution creates."""
NPROC_LIMIT = 4096
"""Processes and threads the host's uid may have at once (a fork bomb stops here; Triton, OpenMP and the CUDA
driver start a few dozen threads)."""


@lru_cache(maxsize=1)
def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)


def prctl(option: int, value: int) -> bool:
    """``prctl(option, value)``; False when the kernel refuses."""
    try:
        return _libc().prctl(option, value, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def is_root() -> bool:
    return os.geteuid() == 0


def pick_uid() -> int:
    """A uid for one kernel host, unused by any live process."""
    used = {uid for _, uid in _processes()}
    while True:
        uid = UID_RANGE[0] + secrets.randbelow(UID_RANGE[1] - UID_RANGE[0])
        if uid not in used:
            return uid


def drop_privileges(uid: int) -> None:
    """Become ``uid`` (and gid ``uid``), with no supplementary groups; irreversible."""
    import resource

    os.setgroups([])
    os.setgid(uid)
    os.setuid(uid)
    try:
        resource.setrlimit(resource.RLIMIT_NPROC, (NPROC_LIMIT, NPROC_LIMIT))
    except (ValueError, OSError):
        pass
    if os.getuid() != uid or os.geteuid() != uid:
        raise RuntimeError(f"could not drop to uid {uid}")


def own_tree(path: Path, uid: int) -> None:
    """Give ``path`` and everything under it to ``uid`` (the host's temp folder and its caches)."""
    for root, dirs, files in os.walk(path):
        for name in [*dirs, *files]:
            try:
                os.lchown(os.path.join(root, name), uid, uid)
            except OSError:
                pass
    os.chown(path, uid, uid)


def _processes() -> list[tuple[int, int]]:
    """(pid, real uid) of every process."""
    out = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/status", "rb") as fh:
                for line in fh:
                    if line.startswith(b"Uid:"):
                        out.append((int(entry.name), int(line.split()[1])))
                        break
        except (OSError, ValueError, IndexError):
            continue
    return out


def kill_uid(uid: int, rounds: int = 20) -> int:
    """SIGKILL every process of ``uid`` until none is left (a process forking in between is caught on a later
    round); returns how many were killed. Only for the hosts' own random uids."""
    if not UID_RANGE[0] <= uid < UID_RANGE[1]:
        raise ValueError(f"refusing to kill uid {uid}: not a kernel-host uid")
    killed = 0
    for _ in range(rounds):
        pids = [pid for pid, u in _processes() if u == uid]
        if not pids:
            return killed
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
                killed += 1
            except (ProcessLookupError, PermissionError):
                pass
        time.sleep(0.01)
    return killed


def children(pid: int) -> set[int]:
    """Direct children of ``pid`` (all its threads'), from ``/proc/<pid>/task/*/children``."""
    out: set[int] = set()
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return out
    for tid in tasks:
        try:
            with open(f"/proc/{pid}/task/{tid}/children") as fh:
                out |= {int(x) for x in fh.read().split()}
        except (OSError, ValueError):
            continue
    return out


def descendants(pid: int) -> set[int]:
    """Every descendant of ``pid``."""
    seen: set[int] = set()
    todo = list(children(pid))
    while todo:
        p = todo.pop()
        if p in seen:
            continue
        seen.add(p)
        todo.extend(children(p))
    return seen


def kill_descendants(pid: int | None = None, rounds: int = 50) -> int:
    """SIGKILL every descendant of ``pid`` (default: this process) until none is left, reaping our own children
    (a subreaper inherits orphans, so escaped grandchildren are ours to reap too). Returns how many were killed."""
    me = os.getpid() if pid is None else pid
    killed = 0
    for _ in range(rounds):
        found = descendants(me)
        if not found:
            break
        for p in found:
            try:
                os.kill(p, signal.SIGKILL)
                killed += 1
            except (ProcessLookupError, PermissionError):
                pass
        _reap()
        time.sleep(0.005)
    _reap()
    return killed


def _reap() -> None:
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def thread_count(pid: int) -> int | None:
    """Native threads of ``pid`` (``/proc/<pid>/task``), counted from outside it; None if it is gone."""
    try:
        return len(os.listdir(f"/proc/{pid}/task"))
    except OSError:
        return None


def exit_status(pid: int) -> int | None:
    """The wait status of ``pid`` while it is a zombie (``/proc/<pid>/stat`` field 52), or None."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            fields = fh.read().rsplit(b")", 1)[1].split()
    except (OSError, IndexError):
        return None
    if fields[0] != b"Z" or len(fields) < 50:
        return None
    return int(fields[49])


_warned = False


def protect_self() -> str:
    """Make this process's ``/proc`` entries unreadable to same-uid processes (not root: the kernel host shares
    our uid); returns what holds, for the record."""
    global _warned
    if is_root():
        return "root: kernel hosts run as their own uid"
    ok = prctl(PR_SET_DUMPABLE, 0)
    if not _warned:
        _warned = True
        log.warning("d2kgrade is not running as root, so the kernel host runs as your own uid: this process is "
                    "non-dumpable%s, but the environments of processes it did not start (your shell) are readable "
                    "to native code in a submission; secrets in them are redacted from every output. Run "
                    "evaluations as root (or in a container) for full isolation.", "" if ok else " (refused)")
    return "same uid: evaluator non-dumpable" if ok else "same uid: no isolation from the caller's other processes"


__all__ = ["prctl", "is_root", "pick_uid", "drop_privileges", "own_tree", "kill_uid", "kill_descendants",
           "descendants", "children", "thread_count", "exit_status", "protect_self", "PR_SET_CHILD_SUBREAPER",
           "PR_SET_PDEATHSIG", "PR_SET_DUMPABLE"]
