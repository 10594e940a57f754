"""The workspace refuses every way out: traversal, absolute paths, symlinks, odd names, oversize files."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from runner.agent import workspace as ws_mod
from runner.agent.workspace import Workspace, WorkspaceError


@pytest.fixture
def ws(tmp_path: Path) -> Workspace:
    return Workspace(tmp_path / "ws")


@pytest.mark.parametrize("path", ["../x.py", "a/../../x.py", "/etc/passwd", "~/x.py", "a\\..\\x.py", ".hidden",
                                  "a/.git/config", "", "x\x00.py", "a b.py", "a/b/c/d/e.py"])
def test_bad_paths_are_refused(ws: Workspace, path: str):
    with pytest.raises(WorkspaceError):
        ws.write(path, "x")
    assert ws.files() == []
    assert not (ws.root.parent / "x.py").exists()


def test_symlink_escape_is_refused(ws: Workspace, tmp_path: Path):
    secret = tmp_path / "secret.txt"
    secret.write_text("the reference")
    os.symlink(secret, ws.root / "link.txt")
    os.symlink(tmp_path, ws.root / "up")
    with pytest.raises(WorkspaceError, match="symbolic link"):
        ws.read("link.txt")
    with pytest.raises(WorkspaceError, match="symbolic link"):
        ws.write("link.txt", "overwrite")
    with pytest.raises(WorkspaceError, match="symbolic link"):
        ws.write("up/secret.txt", "overwrite")
    assert secret.read_text() == "the reference"
    assert ws.files() == []  # links are not listed either


def test_size_and_count_limits(ws: Workspace, monkeypatch: pytest.MonkeyPatch):
    with pytest.raises(WorkspaceError, match="limit per file"):
        ws.write("big.py", "x" * (ws_mod.MAX_FILE_BYTES + 1))
    monkeypatch.setattr(ws_mod, "MAX_FILES", 2)
    ws.write("a.py", "a")
    ws.write("sub/b.py", "b")
    ws.write("a.py", "a2")  # replacing a file is not a new file
    with pytest.raises(WorkspaceError, match="already holds 2 files"):
        ws.write("c.py", "c")
    monkeypatch.setattr(ws_mod, "MAX_TOTAL_BYTES", 10)
    with pytest.raises(WorkspaceError, match="10-byte limit"):
        ws.write("a.py", "y" * 10)
    assert ws.files() == [("a.py", 2), ("sub/b.py", 1)]
    assert ws.read("./sub/b.py") == "b"


def test_reading_missing_and_folders(ws: Workspace):
    with pytest.raises(WorkspaceError, match="does not exist"):
        ws.read("nope.py")
    ws.write("d/k.py", "x")
    with pytest.raises(WorkspaceError, match="is a folder"):
        ws.read("d")
    with pytest.raises(WorkspaceError, match="is a file, not a folder"):
        ws.write("d/k.py/z.py", "x")
