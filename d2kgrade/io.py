"""The one loader: YAML and JSON files into models, with errors that name the file, the field and the expectation.

Also the file helpers both sides share: :func:`regular_file_problem` (refuse FIFOs, devices and link loops before
reading), :func:`atomic_write_text`, and private temporary folders (:func:`private_tempdir`) that carry their
creator's PID, so :func:`sweep_stale_tempdirs` can remove those of dead processes and :func:`remove_own_tempdirs`
those of this one on exit.

A :class:`pydantic.ValidationError` never reaches a user: :func:`load_model` turns each of its entries into a
:class:`~d2kgrade.errors.Problem` (file, dotted field path, what was expected) and raises
:class:`~d2kgrade.errors.SpecError` with all of them.
"""

from __future__ import annotations

import errno
import json
import os
import re
import shutil
import stat
import tempfile
import time
from pathlib import Path
from typing import Any, TypeVar

import yaml
from pydantic import BaseModel, ValidationError

from d2kgrade.errors import Problem, SpecError

M = TypeVar("M", bound=BaseModel)

# A spec file larger than this is not a spec file (a mistaken path to a checkpoint, say).
MAX_SPEC_BYTES = 4 * 1024 * 1024


_KINDS = ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO (named pipe)"), (stat.S_ISSOCK, "a socket"),
          (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"))


def regular_file_problem(path: Path) -> str | None:
    """Why ``path`` is not a readable regular file (a FIFO blocks a reader forever, ``/dev/zero`` never ends, a
    link to itself loops), or None when it is one. Never opens the file."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return "is a broken symbolic link (its target does not exist)" if os.path.islink(path) else "file not found"
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            return "is a symbolic link that loops (it points back to itself)"
        return f"cannot read: {exc.strerror}"
    for test, what in _KINDS:
        if test(st.st_mode):
            return f"is {what}, expected a regular file"
    if not stat.S_ISREG(st.st_mode):
        return "is not a regular file"
    if not os.access(path, os.R_OK):
        return "cannot read: permission denied"
    return None


def read_text(path: Path) -> str:
    """Read a UTF-8 text file, or raise SpecError naming the file and the reason."""
    problem = regular_file_problem(path)
    if problem:
        raise SpecError([Problem(str(path), "", problem)])
    size = path.stat().st_size
    if size > MAX_SPEC_BYTES:
        raise SpecError([Problem(str(path), "", f"is {size} bytes; a spec file is at most {MAX_SPEC_BYTES}")])
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise SpecError([Problem(str(path), "", f"cannot read: {exc.strerror}")]) from None
    if b"\x00" in data:
        raise SpecError([Problem(str(path), "", "is binary (holds NUL bytes), expected UTF-8 text")])
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise SpecError([Problem(str(path), "", f"is not valid UTF-8 (byte {exc.start})")]) from None


# libyaml's parser under the same safe constructors as ``yaml.safe_load``: the suite's 52 task and rubric files parse
# in 0.08 s instead of 0.71 s (a test run loads them ~300 times while collecting). Its messages are terser ("found
# undefined alias" without the alias), so a file it refuses is parsed again by the pure-Python loader, whose
# error is the one reported.
_FAST_LOADER: type = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def load_yaml(path: Path) -> Any:
    """Parse a YAML (or JSON, a YAML subset) file as ``safe_load`` does; errors name the file and the line."""
    text = read_text(path)
    try:
        try:
            data = yaml.load(text, Loader=_FAST_LOADER)  # noqa: S506 - a safe loader
        except yaml.YAMLError:
            data = yaml.safe_load(text)  # raises again, with the pure-Python loader's message
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise SpecError([Problem(str(path), where, f"YAML syntax error: {problem}")]) from None
    if data is None:
        raise SpecError([Problem(str(path), "", "is empty, expected a mapping of fields")])
    return data


def _describe(err: dict[str, Any]) -> str:
    kind = err.get("type", "")
    if kind == "missing":
        return "field required"
    if kind == "extra_forbidden":
        return "unknown field (not part of this format; check the spelling)"
    msg = str(err.get("msg", "invalid"))
    if "input" in err and kind not in ("missing",) and not isinstance(err["input"], (dict, list)):
        return f"{msg} (got {err['input']!r})"
    return msg


def problems_from_validation(path: Path | str, exc: ValidationError) -> list[Problem]:
    """One Problem per entry of a pydantic ValidationError, with the dotted field path."""
    out = []
    for err in exc.errors():
        loc = ".".join(str(x) for x in err.get("loc", ()))
        out.append(Problem(str(path), loc, _describe(err)))
    return out


def validate_data(model: type[M], data: Any, path: Path | str) -> M:
    """Validate already-parsed data as ``model``; raise SpecError naming ``path`` on failure."""
    if not isinstance(data, dict):
        raise SpecError([Problem(str(path), "", f"expected a mapping of fields, got {type(data).__name__}")])
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise SpecError(problems_from_validation(path, exc)) from None


def load_model(model: type[M], path: Path) -> M:
    """Load a YAML/JSON file as ``model``. Raises SpecError with one Problem per defect."""
    return validate_data(model, load_yaml(path), path)


def atomic_write_text(path: Path, text: str) -> None:
    """Write a file so that a crash leaves either the old or the new content, never half of one."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_json(path: Path, data: Any) -> None:
    """Write ``data`` as indented JSON, atomically."""
    atomic_write_text(path, json.dumps(data, indent=2, sort_keys=False, default=str) + "\n")


# ------------------------------------------------------------------------------ temporary folders

TEMP_PREFIX = "d2k-"
_OWNED_RE = re.compile(r"^d2k-[a-z]+-(\d+)-")
LEGACY_TEMP_AGE_S = 24 * 3600
"""A ``d2k-*`` folder without a PID in its name is swept only when untouched this long (no evaluation lasts a day)."""


def private_tempdir(kind: str) -> Path:
    """A new private folder ``<tmp>/d2k-<kind>-<pid>-<random>`` (mode 700), named so a later start can tell that
    its creator died and remove it. ``kind`` is lowercase letters (``sub``, ``prof``, ``ep``, ``eval``)."""
    if not kind.isalpha() or not kind.islower():
        raise ValueError(f"kind must be lowercase letters, got {kind!r}")
    return Path(tempfile.mkdtemp(prefix=f"{TEMP_PREFIX}{kind}-{os.getpid()}-"))


def pid_alive(pid: int) -> bool:
    """Whether a process with this PID runs on this host (another user's counts)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _our_tempdirs(root: Path | None) -> list[tuple[Path, os.stat_result]]:
    base = Path(root or tempfile.gettempdir())
    out = []
    try:
        entries = list(os.scandir(base))
    except OSError:
        return []
    for e in entries:
        if not e.name.startswith(TEMP_PREFIX):
            continue
        try:
            st = e.stat(follow_symlinks=False)
        except OSError:
            continue
        if stat.S_ISDIR(st.st_mode) and st.st_uid == os.getuid():
            out.append((Path(e.path), st))
    return out


def sweep_stale_tempdirs(root: Path | None = None) -> list[Path]:
    """Remove this user's ``d2k-*`` temporary folders left by processes that died (killed, ``os._exit``).

    A folder named by :func:`private_tempdir` goes when its PID is not running; an older-style folder without a
    PID when untouched for :data:`LEGACY_TEMP_AGE_S`. Returns the folders removed.
    """
    removed = []
    now = time.time()
    for path, st in _our_tempdirs(root):
        m = _OWNED_RE.match(path.name)
        if m:
            stale = int(m.group(1)) != os.getpid() and not pid_alive(int(m.group(1)))
        else:
            stale = now - st.st_mtime > LEGACY_TEMP_AGE_S
        if stale:
            shutil.rmtree(path, ignore_errors=True)
            removed.append(path)
    return removed


def remove_own_tempdirs(root: Path | None = None) -> list[Path]:
    """Remove every folder :func:`private_tempdir` made for this process (call on the way out)."""
    removed = []
    for path, _ in _our_tempdirs(root):
        m = _OWNED_RE.match(path.name)
        if m and int(m.group(1)) == os.getpid():
            shutil.rmtree(path, ignore_errors=True)
            removed.append(path)
    return removed
