"""``extract_facts``: read a file (or a source string) safely and build its :class:`Facts`.

Nothing here imports or runs the analysed code. A file that cannot be analysed (too large, binary, not UTF-8,
empty, a syntax error, nesting too deep) yields facts with ``errors`` set, never an exception. Facts are cached
by content hash, so grading one file against several rubrics (or by several raters) parses it once.
"""

from __future__ import annotations

import gc
import hashlib
import logging
import os
import stat
from collections import OrderedDict
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from d2kgrade.static.facts import Facts

log = logging.getLogger(__name__)

MAX_BYTES = 512 * 1024
"""A kernel file larger than this is not a kernel file (200-line kernels are ~8 KB)."""
PY_SUFFIXES = {".py"}
CUDA_SUFFIXES = {".cu", ".cuh", ".cpp", ".cc", ".cxx", ".h", ".hpp"}
_CACHE: OrderedDict[tuple[str, str, str], Facts] = OrderedDict()
_CACHE_SIZE = 256


def read_source(path: Path, limit: int) -> tuple[bytes | None, str]:
    """The bytes of a regular file of at most ``limit`` bytes, or (None, why not).

    Only a regular file is read (after following links): a FIFO would block the grader, ``/dev/zero`` or a socket
    would never end. The size is checked from ``stat`` before anything is read, the file is opened without
    blocking, checked again on the open descriptor (the path may have been swapped in between), and at most
    ``limit + 1`` bytes are read, so a file that grows while it is read is still refused.
    """
    try:
        st = os.stat(path)
    except OSError as exc:
        return None, f"cannot read file: {exc.strerror or exc}"
    if not stat.S_ISREG(st.st_mode):
        return None, f"not a regular file ({_kind(st.st_mode)}); a kernel is a source file"
    if st.st_size > limit:
        return None, f"file is {st.st_size} bytes; a kernel file is at most {limit} bytes"
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0))
    except OSError as exc:
        return None, f"cannot read file: {exc.strerror or exc}"
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            return None, f"not a regular file ({_kind(st.st_mode)}); a kernel is a source file"
        chunks, total = [], 0
        while total <= limit:
            chunk = os.read(fd, min(1 << 16, limit + 1 - total))
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
    except OSError as exc:
        return None, f"cannot read file: {exc.strerror or exc}"
    finally:
        os.close(fd)
    data = b"".join(chunks)
    if len(data) > limit:
        return None, f"file is more than {limit} bytes; a kernel file is at most {limit} bytes"
    return data, ""


def _kind(mode: int) -> str:
    for test, name in ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"),
                       (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket")):
        if test(mode):
            return name
    return "not a plain file"


def _decode(data: bytes, facts: Facts) -> str | None:
    if len(data) > MAX_BYTES:
        facts.errors.append(f"file is {len(data)} bytes; a kernel file is at most {MAX_BYTES} bytes")
        return None
    if b"\x00" in data:
        facts.errors.append("file is binary (holds NUL bytes), expected UTF-8 source text")
        return None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        facts.errors.append(f"file is not valid UTF-8 (byte {exc.start})")
        return None
    if not text.strip():
        facts.errors.append("file is empty")
        return None
    return text


@contextmanager
def gc_paused() -> Iterator[None]:
    """Pause Python's cyclic garbage collector while one file is analysed.

    Parsing and lowering a 200-line kernel allocate ~40k container objects (AST nodes, then IR records); each
    700 allocations start a young-generation collection that finds nothing to free (the AST has no parent
    links and the IR is kept). Counted with callgrind on the 150-250-line references, the collector took 11%
    of extraction's instructions. Reference counting still frees everything that is not in a cycle, and the
    collector is resumed (if it was running) as soon as the file is done, so the few cycles (a file's Flow and
    its Facts) are collected at the next ordinary collection."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def _build(path: str, data: bytes, suffix: str) -> Facts:
    with gc_paused():
        return _build_facts(path, data, suffix)


def _build_facts(path: str, data: bytes, suffix: str) -> Facts:
    facts = Facts(path=path, text="", suffix="cu" if suffix in CUDA_SUFFIXES else "py")
    text = _decode(data, facts)
    if text is None:
        return facts
    facts.text = text
    try:
        if suffix in PY_SUFFIXES:
            from d2kgrade.static.pyfacts import extract_python

            extract_python(facts)
        elif suffix in CUDA_SUFFIXES:
            from d2kgrade.static.cudafacts import extract_cu

            extract_cu(facts)
        else:
            facts.errors.append(f"unsupported file type {suffix or '(none)'}; expected .py or .cu/.cuh")
    except RecursionError:
        facts.errors.append("code is nested too deeply to analyse")
    except MemoryError:
        facts.errors.append("out of memory while analysing the file")
    except Exception as exc:  # a fault of the analyser: the file still gets a grade (unknown), and we log it
        log.exception("static analysis failed on %s", path)
        facts.errors.append(f"internal error in the static analyser: {type(exc).__name__}: {exc}")
    if facts.errors:
        facts.functions.clear()
        facts.reachable.clear()
    return facts


def extract_facts(path_or_source: str | Path, *, suffix: str | None = None, cache: bool = True) -> Facts:
    """Facts of a kernel file, or of source text.

    Args:
        path_or_source: a :class:`~pathlib.Path` (read from disk), or a ``str`` that is a path of an existing file
            when it holds no newline, else source text.
        suffix: file type of source text (``.py`` default, ``.cu``); for paths, the path's suffix.
        cache: reuse facts of identical content (keyed by path, type and SHA-256 of the bytes).
    """
    if isinstance(path_or_source, Path) or ("\n" not in path_or_source and len(path_or_source) < 4096
                                            and Path(path_or_source).exists()):
        p = Path(path_or_source)
        data, why = read_source(p, MAX_BYTES)
        if data is None:
            facts = Facts(path=str(p), text="", suffix="py")
            facts.errors.append(why)
            return facts
        name, sfx = str(p), (suffix or p.suffix).lower()
    else:
        data = path_or_source.encode("utf-8", "surrogatepass")
        name, sfx = "<source>", (suffix or ".py").lower()
    if not cache:
        return _build(name, data, sfx)
    key = (name, sfx, hashlib.sha256(data).hexdigest())
    hit = _CACHE.get(key)
    if hit is not None:
        _CACHE.move_to_end(key)
        return hit
    facts = _build(name, data, sfx)
    _CACHE[key] = facts
    if len(_CACHE) > _CACHE_SIZE:
        _CACHE.popitem(last=False)
    return facts


def clear_cache() -> None:
    """Forget cached facts."""
    _CACHE.clear()
