"""An episode's workspace: the only files an agent can see or touch.

Every path an agent gives is relative to the workspace root. Refused: absolute paths, ``..`` components, names
outside ``[A-Za-z0-9._-]`` (per component), hidden names (``.x``), symlinks anywhere on the way (a link planted by
an earlier kernel run cannot point out), files over :data:`MAX_FILE_BYTES`, more than :data:`MAX_FILES` files or
:data:`MAX_TOTAL_BYTES` in all. Writes open with ``O_NOFOLLOW`` and go through a temporary file in the same
folder, so a reader never sees half a file. The workspace holds nothing but the agent's own files: the task's
reference, the rubric, the expert kernels and the evaluator live elsewhere and are never copied here.
"""

from __future__ import annotations

import os
import re
import stat
from pathlib import Path, PurePosixPath

MAX_FILE_BYTES = 256 * 1024
MAX_FILES = 64
MAX_TOTAL_BYTES = 4 * 1024 * 1024
MAX_DEPTH = 4
_COMPONENT_RE = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9._-]{0,99}$")


class WorkspaceError(ValueError):
    """A refused path or write; its message is shown to the agent as the tool's error."""


class Workspace:
    """Files of one episode under ``root``."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root).resolve()
        self.root.mkdir(parents=True, exist_ok=True)

    def _parts(self, path: str) -> list[str]:
        if not isinstance(path, str) or not path.strip():
            raise WorkspaceError("path must be a non-empty string relative to the workspace, e.g. 'kernel.py'")
        if "\\" in path or "\x00" in path:
            raise WorkspaceError(f"path {path!r}: use '/' separators and printable names")
        p = PurePosixPath(path)
        if p.is_absolute() or path.startswith("~"):
            raise WorkspaceError(f"path {path!r} is absolute; paths are relative to your workspace (e.g. 'kernel.py')")
        parts = [c for c in p.parts if c != "."]
        if any(c == ".." for c in parts):
            raise WorkspaceError(f"path {path!r} leaves the workspace ('..' is not allowed)")
        if not parts:
            return []
        if len(parts) > MAX_DEPTH:
            raise WorkspaceError(f"path {path!r} is nested deeper than {MAX_DEPTH} folders")
        for c in parts:
            if not _COMPONENT_RE.match(c):
                raise WorkspaceError(f"path {path!r}: {c!r} is not an allowed name (letters, digits, '._-'; "
                                     "no leading dot)")
        return parts

    def resolve(self, path: str, *, must_exist: bool = False) -> Path:
        """The absolute path of ``path`` inside the workspace; refuses anything that could lead outside."""
        parts = self._parts(path)
        cur = self.root
        for i, c in enumerate(parts):
            cur = cur / c
            try:
                st = os.lstat(cur)
            except FileNotFoundError:
                if must_exist:
                    raise WorkspaceError(f"{path!r} does not exist (list_files shows what does)") from None
                # nothing further down can exist either
                return self.root.joinpath(*parts)
            if stat.S_ISLNK(st.st_mode):
                raise WorkspaceError(f"path {path!r} goes through a symbolic link; links are not allowed")
            if i < len(parts) - 1 and not stat.S_ISDIR(st.st_mode):
                raise WorkspaceError(f"path {path!r}: {'/'.join(parts[:i + 1])!r} is a file, not a folder")
        resolved = self.root.joinpath(*parts)
        if not resolved.resolve().is_relative_to(self.root):  # belt and braces after the lstat walk
            raise WorkspaceError(f"path {path!r} leaves the workspace")
        return resolved

    def rel(self, path: Path) -> str:
        return path.relative_to(self.root).as_posix()

    def files(self) -> list[tuple[str, int]]:
        """``(relative path, size)`` of every regular file, sorted; links and special files are skipped."""
        out = []
        for dirpath, dirnames, filenames in os.walk(self.root, followlinks=False):
            dirnames[:] = sorted(d for d in dirnames if not os.path.islink(os.path.join(dirpath, d)))
            for name in filenames:
                full = os.path.join(dirpath, name)
                st = os.lstat(full)
                if stat.S_ISREG(st.st_mode):
                    out.append((Path(full).relative_to(self.root).as_posix(), st.st_size))
        return sorted(out)

    def write(self, path: str, content: str) -> Path:
        """Write a UTF-8 text file (creating folders); returns its absolute path."""
        if not isinstance(content, str):
            raise WorkspaceError("content must be a string")
        data = content.encode("utf-8", errors="replace")
        if len(data) > MAX_FILE_BYTES:
            raise WorkspaceError(f"{path!r}: {len(data)} bytes is over the {MAX_FILE_BYTES}-byte limit per file")
        target = self.resolve(path)
        if not self._parts(path):
            raise WorkspaceError("path names the workspace itself; give a file name such as 'kernel.py'")
        existing = dict(self.files())
        rel = self.rel(target)
        if rel not in existing and len(existing) >= MAX_FILES:
            raise WorkspaceError(f"the workspace already holds {MAX_FILES} files, the most allowed")
        total = sum(existing.values()) - existing.get(rel, 0) + len(data)
        if total > MAX_TOTAL_BYTES:
            raise WorkspaceError(f"the workspace would hold {total} bytes, over the {MAX_TOTAL_BYTES}-byte limit")
        if target.exists() and (target.is_dir() or target.is_symlink()):
            raise WorkspaceError(f"{path!r} is a folder, not a file")
        target.parent.mkdir(parents=True, exist_ok=True)
        self.resolve(path)  # re-check: the folders just made hold no link
        tmp = target.parent / f".tmp-{os.getpid()}-{target.name}"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o644)
        try:
            with os.fdopen(fd, "wb") as fh:
                fh.write(data)
            os.replace(tmp, target)
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise
        return target

    def read(self, path: str) -> str:
        """Read a text file of the workspace (at most :data:`MAX_FILE_BYTES`)."""
        target = self.resolve(path, must_exist=True)
        if target.is_dir():
            raise WorkspaceError(f"{path!r} is a folder; list_files shows its contents")
        fd = os.open(target, os.O_RDONLY | os.O_NOFOLLOW)
        with os.fdopen(fd, "rb") as fh:
            data = fh.read(MAX_FILE_BYTES + 1)
        if len(data) > MAX_FILE_BYTES:
            raise WorkspaceError(f"{path!r} is over {MAX_FILE_BYTES} bytes")
        return data.decode("utf-8", errors="replace")
