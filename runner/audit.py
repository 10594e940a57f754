"""The kernel host's audit hook (PEP 578): what submission code may not do at run time, whatever the AST showed.

Installed by :mod:`runner.kernel_host` after the harness is imported and before the submission is, and armed
from then on (a hook can never be removed). Each audited event is attributed to the nearest frame that decides
it, walking up from the event and skipping the standard library's own frames (``pathlib`` calling ``open`` is
whoever called ``pathlib``):

- ``submission``: a frame of the submission's file;
- ``library``: torch, triton, numpy and other installed packages (they compile, launch, read their own files);
- ``import``: the import system (module source is compiled and executed there; what it opens is still checked);
- ``harness``: the host's own code (its socket, its traceback formatting).

What is refused (a ``PermissionError`` inside the submission, and a recorded violation the evaluator turns into
``rejected``):

- frame access by the submission: ``sys._getframe`` (except through the few standard-library helpers that
  need their caller's frame, and never returning a harness frame), ``sys._current_frames``, a traceback's or
  generator's frame (``tb_frame``, ``gi_frame``...), trace and profile hooks;
- ``gc`` object walks (``get_objects``, ``get_referrers``, ``get_referents``) by the submission;
- native code loaded from Python by the submission: ``ctypes`` (``dlopen``, ``dlsym``, calls, raw addresses),
  imports of ``ctypes``/``cffi``/``_ctypes``, code objects built by hand (``compile``, ``marshal``,
  ``types.CodeType``, replacing a function's ``__code__``);
- processes: ``os.system``, ``os.exec*``, ``fork``, ``posix_spawn``, ``pty``; ``subprocess`` only from a
  library, and only for the compiler tools of Triton and ``load_inline`` (:data:`TOOLS`);
- threads started by the submission (``_thread.start_new_thread``);
- sockets and signals, from anyone but the harness;
- ``open`` of another process's ``/proc`` entries, of the suite, the run store and the evaluator's files
  (:func:`arm`'s ``deny``), and writes outside the host's temp folder and caches.

Native code (a CUDA extension, a C library the submission compiles) is not seen by an audit hook: what holds
then is the process boundary, the unprivileged uid and the containment of :mod:`runner.containment`.
"""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Iterable
from pathlib import Path
from typing import Any

TOOLS = frozenset({"ptxas", "nvcc", "ninja", "gcc", "g++", "cc", "c++", "clang", "clang++", "ld", "cuobjdump",
                   "nvdisasm", "nvlink", "fatbinary", "cicc", "ldconfig", "which", "uname", "cudafe++"})
"""Executables a library may start: Triton's and ``load_inline``'s build tools."""

FRAME_HELPERS = ("collections/__init__.py", "typing.py", "enum.py", "dataclasses.py", "warnings.py",
                 "logging/__init__.py", "abc.py", "functools.py", "_collections_abc.py", "contextlib.py")
"""Standard-library modules that take their caller's frame to name things (namedtuple's ``__module__``)."""

FRAME_ATTRS = frozenset({"tb_frame", "gi_frame", "cr_frame", "ag_frame", "f_back"})

SUBMISSION_ONLY = {
    "sys._current_frames", "sys.settrace", "sys.setprofile", "gc.get_objects", "gc.get_referrers",
    "gc.get_referents", "ctypes.dlopen", "ctypes.dlsym", "ctypes.call_function", "ctypes.cdata",
    "ctypes.cdata/buffer", "ctypes.create_string_buffer", "ctypes.create_unicode_buffer", "ctypes.string_at",
    "ctypes.wstring_at", "ctypes.addressof", "ctypes.get_errno", "ctypes.set_errno", "ctypes.seh_exception",
    "code.__new__", "marshal.loads", "marshal.load", "function.__new__", "_thread.start_new_thread",
    "os.putenv", "os.unsetenv", "cpython.run_command", "cpython.run_file", "cpython.run_module",
}
"""Events refused when the submission makes them (libraries may: torch's dispatcher uses ctypes, for one)."""

NOT_LIBRARIES = {"os.system", "os.exec", "os.fork", "os.forkpty", "os.spawn", "pty.spawn",
                 "socket.__new__", "socket.bind", "socket.connect", "socket.sendto", "socket.sendmsg",
                 "socket.getaddrinfo", "socket.gethostbyname", "os.kill", "os.killpg", "signal.pthread_kill",
                 "os.setuid", "os.setgid", "os.chroot", "os.chown", "os.fchown", "sys.addaudithook"}
"""Events refused to the submission and to libraries alike (the harness may: it owns the socket)."""

BANNED_IMPORTS = frozenset({"ctypes", "_ctypes", "cffi", "_cffi_backend", "runner", "d2kgrade", "tasks",
                            "references", "pty", "_posixsubprocess", "_thread", "multiprocessing", "socket",
                            "_socket"})
"""Modules the submission may not import (the first component of the dotted name)."""


class _State:
    armed = False
    submission_files: frozenset[str] = frozenset()
    harness_dir = str(Path(__file__).resolve().parent) + os.sep
    stdlib_dirs: tuple[str, ...] = ()
    write_roots: tuple[str, ...] = ()
    read_roots: tuple[str, ...] = ()
    deny_roots: tuple[str, ...] = ()
    violations: list[str] = []
    local = threading.local()


S = _State()


def install() -> None:
    """Add the hook (unarmed: it refuses nothing until :func:`arm`)."""
    import sysconfig

    stdlib = {sysconfig.get_paths()["stdlib"], sysconfig.get_paths()["platstdlib"]}
    S.stdlib_dirs = tuple(sorted(p.rstrip(os.sep) + os.sep for p in stdlib if p))
    sys.addaudithook(_hook)


def arm(submission_files: Iterable[str], *, write_roots: Iterable[str], deny_roots: Iterable[str]) -> None:
    """From now on, enforce. ``write_roots``: the temp folder and caches the host may write; ``deny_roots``: the
    suite, the run store and anything else the host must not read (checked after the installed packages, which
    may live inside a checkout)."""
    S.submission_files = frozenset(str(Path(f).resolve()) for f in submission_files)
    S.write_roots = _roots(write_roots)
    S.deny_roots = _roots(deny_roots)
    site = [p for p in sys.path if p and ("site-packages" in p or "dist-packages" in p)]
    S.read_roots = _roots([*site, sys.prefix, sys.base_prefix, sys.exec_prefix, *S.stdlib_dirs])
    S.armed = True


def violations() -> list[str]:
    """Refusals since the last call (and forget them)."""
    out, S.violations = S.violations, []
    return out


def _roots(paths: Iterable[str]) -> tuple[str, ...]:
    out = set()
    for p in paths:
        if p:
            out.add(os.path.realpath(p).rstrip(os.sep) + os.sep)
    return tuple(sorted(out))


def _under(path: str, roots: tuple[str, ...]) -> bool:
    p = path.rstrip(os.sep) + os.sep
    return any(p.startswith(r) for r in roots)


def _attribute(frame: Any, through_imports: bool = False) -> tuple[str, Any]:
    """(who, the first frame outside the standard library) for an event raised below ``frame``; with
    ``through_imports`` the import system's frames are skipped too (a file it opens is its importer's)."""
    f = frame
    while f is not None:
        fn = f.f_code.co_filename
        if fn in S.submission_files:
            return "submission", f
        if fn.startswith("<frozen importlib") or fn.startswith("<frozen zipimport"):
            if through_imports:
                f = f.f_back
                continue
            return "import", f
        if fn.startswith(S.harness_dir):
            return "harness", f
        if fn.startswith("<frozen") or any(fn.startswith(d) for d in S.stdlib_dirs) and \
                "-packages" + os.sep not in fn:
            f = f.f_back
            continue
        # Installed packages, and code they generated (``<string>``: the submission cannot make such frames,
        # since building code is refused to it).
        return "library", f
    return "harness", None


def _refuse(event: str, who: str, detail: str = "") -> None:
    what = f"{event}{f' ({detail})' if detail else ''} by the {who}"
    if len(S.violations) < 50:
        S.violations.append(what)
    raise PermissionError(f"d2kgrade sandbox: {what} is not allowed in a submission")


def _hook(event: str, args: tuple[Any, ...]) -> None:
    if not S.armed or getattr(S.local, "busy", False):
        return
    S.local.busy = True
    try:
        _check(event, args)
    finally:
        S.local.busy = False


def _check(event: str, args: tuple[Any, ...]) -> None:
    if event == "open":
        _check_open(args)
        return
    if event in ("sys._getframe", "object.__getattr__", "object.__setattr__", "compile", "import",
                 "subprocess.Popen", "os.posix_spawn") or event in SUBMISSION_ONLY or event in NOT_LIBRARIES or \
            event.startswith("os.exec") or event.startswith("os.spawn"):
        caller = sys._getframe(2)  # _check <- _hook <- the frame that raised the event
        who, frame = _attribute(caller)
    else:
        return
    if event == "sys._getframe":
        if who == "submission" and not caller.f_code.co_filename.endswith(FRAME_HELPERS):
            _refuse(event, who)
        returned = args[0] if args else None
        if who in ("submission", "library") and returned is not None and \
                returned.f_code.co_filename.startswith(S.harness_dir):
            _refuse(event, who, "a harness frame")
        return
    if event == "object.__getattr__":
        if who == "submission" and len(args) > 1 and args[1] in FRAME_ATTRS:
            _refuse(event, who, str(args[1]))
        return
    if event == "object.__setattr__":
        if who == "submission" and len(args) > 1 and args[1] in ("__code__", "__globals__", "__closure__"):
            _refuse(event, who, str(args[1]))
        return
    if event == "compile":
        if who == "submission":
            _refuse(event, who, "code built from a string")
        return
    if event == "import":
        name = str(args[0]) if args else ""
        if who == "submission" and name.split(".")[0] in BANNED_IMPORTS:
            _refuse(event, who, name)
        return
    if event in ("subprocess.Popen", "os.posix_spawn"):  # Python 3.12's subprocess may posix_spawn
        exe = args[0] if args and args[0] else (args[1][0] if len(args) > 1 and args[1] else "")
        base = os.path.basename(os.fsdecode(exe)) if exe else ""
        if who != "library" or base not in TOOLS:
            _refuse(event, who, base or "?")
        return
    if event in NOT_LIBRARIES or event.startswith("os.exec") or event.startswith("os.spawn"):
        if who != "harness":
            _refuse(event, who)
        return
    if event in SUBMISSION_ONLY and who == "submission":
        _refuse(event, who)


def _check_open(args: tuple[Any, ...]) -> None:
    path = args[0] if args else None
    if path is None or isinstance(path, int):
        return
    try:
        real = os.path.realpath(os.fsdecode(path))
    except (TypeError, ValueError):
        return
    mode = args[1] if len(args) > 1 and isinstance(args[1], str) else "r"
    flags = args[2] if len(args) > 2 and isinstance(args[2], int) else 0
    writing = any(c in mode for c in "wax+") or bool(flags & (os.O_WRONLY | os.O_RDWR | os.O_CREAT))
    why = _open_problem(real, writing)
    if why is None:
        return
    who, _ = _attribute(sys._getframe(3), through_imports=True)  # _check_open <- _check <- _hook <- the raiser
    if who != "harness":
        _refuse("open", who, why)


def _open_problem(real: str, writing: bool) -> str | None:
    """Why opening ``real`` is refused, or None."""
    parts = real.split(os.sep)
    if len(parts) > 2 and parts[1] == "proc":
        own = (parts[2] in ("self", "thread-self", str(os.getpid())) or not parts[2].isdigit())
        return None if own and not writing else f"{'write' if writing else 'read'} {real}"
    if _under(real, S.write_roots) or real == "/dev/null":
        return None
    if writing:
        return f"write {real}"
    if _under(real, S.read_roots):
        return None
    if _under(real, S.deny_roots):
        return f"read {real}"
    if real.startswith(("/dev/urandom", "/dev/random", "/sys/", "/usr/", "/opt/", "/etc/", "/lib")):
        return None
    return f"read {real}"


__all__ = ["install", "arm", "violations", "TOOLS"]
