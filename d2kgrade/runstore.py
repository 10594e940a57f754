"""The run store: ``RUN_DIR/results.sqlite``, written by the runner and read by score, report and judge.

A *format* module (sqlite3, hashlib and pandas only; no torch), imported by both sides. Layout of a run directory::

    RUN_DIR/results.sqlite                     this store (WAL mode)
    RUN_DIR/episodes/<episode_id>/transcript.jsonl   every message, tool call and result, in full
    RUN_DIR/episodes/<episode_id>/design_note.md     the design stated before any code
    RUN_DIR/episodes/<episode_id>/kernels/v003_kernel.py   every kernel version the agent wrote
    RUN_DIR/grades.jsonl                       written by the judge, not here

Tables (every row carries ``run_id``; paths are relative to RUN_DIR):

- ``runs``: one row: config (the union of every session's extent), suite version, per-task versions, environment.
- ``sessions``: one row per invocation of ``d2kgrade run`` on the directory (argv, config, environment, times).
- ``episodes``: one row per *ended* episode, written in the same transaction as its final evaluation and its
  ``workloads`` rows, so a ``kill -9`` loses nothing that ended and leaves no half episode. See
  :data:`EPISODE_COLUMNS` for the columns.
- ``workloads``: the final evaluation of each episode's last submission, one row per workload (``hidden`` for the
  per-run drawn shape); times are NaN where not timed (CPU).
- ``turns``: one row per model call (tokens, cost, wall time, finish reason, context size after elision).
- ``tool_calls``: one row per tool call (name, arguments trimmed to 2000 chars, ok/error, output size).
- ``kernel_versions``: one row per distinct content of a ``.py`` file the agent wrote; the file is kept.
- ``evaluations``: every evaluation (``test``, ``benchmark``, ``final``) with its full ``EvalResult`` JSON.

Rows of an episode that did not end (a killed run) are deleted by :meth:`RunStore.reset_episode` before the
episode is run again, so an episode's rows always come from one attempt.

One writer per run directory: ``d2kgrade run`` holds :class:`RunLock` (``RUN_DIR/run.lock``, an ``flock`` plus the
holder's PID, host, start time and command) for the whole session; a second writer is refused with the holder's
name, and a lock whose holder died is taken over with a warning. A store that is not one (0 bytes, garbled, an
SQLite file of something else, or an ``episodes/`` folder whose store is gone) is a :class:`RunStoreError` naming
the file, raised before anything is written.
"""

from __future__ import annotations

import errno
import fcntl
import hashlib
import json
import math
import os
import socket
import sqlite3
import stat as stat_mod
import sys
import threading
import time
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from d2kgrade.errors import RunStoreError
from d2kgrade.io import pid_alive

STORE_SCHEMA_VERSION = 1
DB_NAME = "results.sqlite"
LOCK_NAME = "run.lock"

EpisodeStatus = str
EPISODE_STATUSES = ("finished", "failed", "api_failed", "budget_exhausted", "no_submission")
"""``finished``: the agent ended the episode; ``budget_exhausted``: a turn, wall or token budget ran out;
``no_submission``: the agent ended (or kept answering without tools) without ever submitting; ``api_failed``: the
model's API gave no answer (unreachable after retries, or refused the request); ``failed``: an internal fault (the
evaluator or the runner). ``api_failed`` and ``failed`` episodes say nothing about the agent: ``score`` leaves them
out (and counts them), and a resume runs them again; the others are done."""
DONE_STATUSES = ("finished", "budget_exhausted", "no_submission")
UNSCORED_STATUSES = ("api_failed", "failed")
"""Episode statuses that are not outcomes of the agent: left out of every metric, reported as counts."""

_DDL = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS runs (
  run_id TEXT PRIMARY KEY, created_at TEXT NOT NULL, updated_at TEXT NOT NULL, model TEXT, agent TEXT NOT NULL,
  suite_version TEXT NOT NULL, task_versions_json TEXT NOT NULL, config_json TEXT NOT NULL, env_json TEXT NOT NULL,
  schema_version INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS sessions (
  session_id INTEGER PRIMARY KEY AUTOINCREMENT, run_id TEXT NOT NULL, started_at TEXT NOT NULL, ended_at TEXT,
  argv_json TEXT, config_json TEXT NOT NULL, env_json TEXT NOT NULL, suite_version TEXT NOT NULL,
  episodes_planned INTEGER, episodes_run INTEGER, status TEXT);
CREATE TABLE IF NOT EXISTS episodes (
  run_id TEXT NOT NULL, episode_id TEXT PRIMARY KEY, model TEXT, agent TEXT NOT NULL, arm TEXT NOT NULL,
  guidance TEXT NOT NULL, task TEXT NOT NULL, seed INTEGER NOT NULL, status TEXT NOT NULL, turns INTEGER NOT NULL,
  tokens_in INTEGER NOT NULL, tokens_out INTEGER NOT NULL, cost_usd REAL, wall_s REAL NOT NULL,
  final_status TEXT NOT NULL, correct INTEGER NOT NULL, design_note_path TEXT, kernel_path TEXT,
  transcript_path TEXT, submissions INTEGER NOT NULL, tool_calls INTEGER NOT NULL, message TEXT,
  suite_version TEXT NOT NULL, task_version TEXT NOT NULL, config_json TEXT NOT NULL, env_json TEXT NOT NULL,
  session_id INTEGER, attempt INTEGER NOT NULL, started_at TEXT NOT NULL, ended_at TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS workloads (
  run_id TEXT NOT NULL, episode_id TEXT NOT NULL, eval_id INTEGER NOT NULL, workload TEXT NOT NULL,
  status TEXT NOT NULL, time_ms REAL, eager_ms REAL, compiled_ms REAL, speedup_eager REAL, speedup_compiled REAL,
  roofline_floor_ms REAL, roofline_fraction REAL, params_json TEXT, message TEXT,
  PRIMARY KEY (episode_id, workload));
CREATE TABLE IF NOT EXISTS turns (
  run_id TEXT NOT NULL, episode_id TEXT NOT NULL, turn INTEGER NOT NULL, started_at TEXT NOT NULL,
  wall_s REAL NOT NULL, tokens_in INTEGER NOT NULL, tokens_out INTEGER NOT NULL, cost_usd REAL,
  finish_reason TEXT, n_tool_calls INTEGER NOT NULL, api_attempts INTEGER NOT NULL, tool_mode TEXT,
  content_chars INTEGER NOT NULL, context_chars INTEGER NOT NULL, elided_results INTEGER NOT NULL, error TEXT,
  PRIMARY KEY (episode_id, turn));
CREATE TABLE IF NOT EXISTS tool_calls (
  run_id TEXT NOT NULL, episode_id TEXT NOT NULL, turn INTEGER NOT NULL, idx INTEGER NOT NULL, call_id TEXT,
  name TEXT NOT NULL, arguments TEXT, ok INTEGER NOT NULL, error TEXT, output_chars INTEGER NOT NULL,
  wall_s REAL NOT NULL, kernel_version INTEGER, eval_id INTEGER, PRIMARY KEY (episode_id, turn, idx));
CREATE TABLE IF NOT EXISTS kernel_versions (
  run_id TEXT NOT NULL, episode_id TEXT NOT NULL, version INTEGER NOT NULL, turn INTEGER NOT NULL,
  path TEXT NOT NULL, file_path TEXT NOT NULL, sha256 TEXT NOT NULL, n_bytes INTEGER NOT NULL,
  PRIMARY KEY (episode_id, version));
CREATE TABLE IF NOT EXISTS evaluations (
  run_id TEXT NOT NULL, episode_id TEXT NOT NULL, eval_id INTEGER NOT NULL, turn INTEGER NOT NULL,
  kind TEXT NOT NULL, kernel_version INTEGER, workloads_requested TEXT, status TEXT NOT NULL,
  correct INTEGER NOT NULL, wall_s REAL NOT NULL, result_json TEXT NOT NULL, PRIMARY KEY (episode_id, eval_id));
"""

EPISODE_COLUMNS = (
    "run_id", "episode_id", "model", "agent", "arm", "guidance", "task", "seed", "status", "turns", "tokens_in",
    "tokens_out", "cost_usd", "wall_s", "final_status", "correct", "design_note_path", "kernel_path",
    "transcript_path", "submissions", "tool_calls", "message", "suite_version", "task_version", "config_json",
    "env_json", "session_id", "attempt", "started_at", "ended_at",
)
"""Columns of ``episodes``. ``final_status`` is an EvalStatus of the final evaluation or ``no_submission``;
``correct`` is that evaluation's verdict (all workloads plus the hidden one)."""

WORKLOAD_COLUMNS = ("run_id", "episode_id", "eval_id", "workload", "status", "time_ms", "eager_ms", "compiled_ms",
                    "speedup_eager", "speedup_compiled", "roofline_floor_ms", "roofline_fraction", "params_json",
                    "message")
TURN_COLUMNS = ("run_id", "episode_id", "turn", "started_at", "wall_s", "tokens_in", "tokens_out", "cost_usd",
                "finish_reason", "n_tool_calls", "api_attempts", "tool_mode", "content_chars", "context_chars",
                "elided_results", "error")
TOOL_CALL_COLUMNS = ("run_id", "episode_id", "turn", "idx", "call_id", "name", "arguments", "ok", "error",
                     "output_chars", "wall_s", "kernel_version", "eval_id")
KERNEL_VERSION_COLUMNS = ("run_id", "episode_id", "version", "turn", "path", "file_path", "sha256", "n_bytes")
EVALUATION_COLUMNS = ("run_id", "episode_id", "eval_id", "turn", "kind", "kernel_version", "workloads_requested",
                      "status", "correct", "wall_s", "result_json")

_TABLE_COLUMNS: dict[str, tuple[str, ...]] = {
    "episodes": EPISODE_COLUMNS, "workloads": WORKLOAD_COLUMNS, "turns": TURN_COLUMNS,
    "tool_calls": TOOL_CALL_COLUMNS, "kernel_versions": KERNEL_VERSION_COLUMNS, "evaluations": EVALUATION_COLUMNS,
}
_PER_EPISODE_TABLES = ("workloads", "turns", "tool_calls", "kernel_versions", "evaluations")
_BOOL_COLUMNS = {"episodes": ("correct",), "tool_calls": ("ok",), "evaluations": ("correct",)}
_FLOAT_COLUMNS = {
    "episodes": ("cost_usd", "wall_s"),
    "workloads": ("time_ms", "eager_ms", "compiled_ms", "speedup_eager", "speedup_compiled", "roofline_floor_ms",
                  "roofline_fraction"),
    "turns": ("wall_s", "cost_usd"),
}

# Files hashed into the suite version: what an episode's outcome can depend on.
SUITE_DIRS = ("tasks", "references")


def now_iso() -> str:
    """UTC time as ISO 8601 with seconds."""
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def _hash_files(files: Iterable[tuple[str, Path]]) -> str:
    h = hashlib.sha256()
    for rel, path in sorted(files):
        h.update(rel.encode() + b"\0")
        h.update(hashlib.sha256(path.read_bytes()).digest())
    return h.hexdigest()[:16]


def _suite_files(root: Path, task_id: str | None = None) -> list[tuple[str, Path]]:
    out = []
    for top in SUITE_DIRS:
        base = root / top if task_id is None else root / top / task_id
        if not base.is_dir():
            continue
        for p in base.rglob("*"):
            if p.is_file() and "__pycache__" not in p.parts and not p.name.endswith(".pyc"):
                out.append((p.relative_to(root).as_posix(), p))
    return out


def suite_version(root: Path) -> str:
    """Hash (16 hex digits) of every file under ``tasks/`` and ``references/`` of the suite at ``root``."""
    return _hash_files(_suite_files(root))


def task_version(root: Path, task_id: str) -> str:
    """Hash of ``tasks/<id>/`` and ``references/<id>/``: what one task's episodes depend on."""
    return _hash_files(_suite_files(root, task_id))


def _nan_to_none(v: Any) -> Any:
    return None if isinstance(v, float) and math.isnan(v) else v


class RunStore:
    """Writer of ``RUN_DIR/results.sqlite``; safe to share between threads (one connection, one lock).

    Every ``add_*``/``finish_episode`` call is one transaction, committed with ``synchronous=FULL`` in WAL mode.
    """

    def __init__(self, run_dir: Path) -> None:
        self.run_dir = Path(run_dir)
        self.path = self.run_dir / DB_NAME
        if self.path.exists() or self.path.is_symlink():
            check_store_file(self.path)
        elif (self.run_dir / "episodes").is_dir():
            raise RunStoreError(f"{self.path}: missing, but {self.run_dir / 'episodes'} holds episodes; starting "
                                "over would overwrite them. Restore the store, or move the folder away and use a new "
                                "--out; nothing was changed")
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self._lock = threading.RLock()
        self._con = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False, timeout=60)
        self._con.execute("PRAGMA journal_mode=WAL")
        self._con.execute("PRAGMA synchronous=FULL")
        with self.transaction() as con:
            # executescript would commit on its own; run the statements one by one inside this transaction
            for stmt in filter(None, (s.strip() for s in _DDL.split(";"))):
                con.execute(stmt)
            row = con.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()
            if row is None:
                con.execute("INSERT INTO meta VALUES ('schema_version', ?)", (str(STORE_SCHEMA_VERSION),))
            elif int(row[0]) != STORE_SCHEMA_VERSION:
                raise ValueError(f"{self.path}: run store schema {row[0]}, this d2kgrade writes "
                                 f"{STORE_SCHEMA_VERSION}")

    def close(self) -> None:
        with self._lock:
            self._con.close()

    @contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """One write transaction (BEGIN IMMEDIATE ... COMMIT), serialized across threads."""
        with self._lock:
            self._con.execute("BEGIN IMMEDIATE")
            try:
                yield self._con
            except BaseException:
                self._con.execute("ROLLBACK")
                raise
            self._con.execute("COMMIT")

    def _insert(self, con: sqlite3.Connection, table: str, row: Mapping[str, Any], *, replace: bool = False) -> None:
        cols = _TABLE_COLUMNS[table]
        unknown = set(row) - set(cols)
        if unknown:
            raise KeyError(f"{table}: unknown columns {sorted(unknown)}")
        verb = "INSERT OR REPLACE" if replace else "INSERT"
        con.execute(f"{verb} INTO {table} ({', '.join(cols)}) VALUES ({', '.join('?' * len(cols))})",
                    [_nan_to_none(row.get(c)) for c in cols])

    # ------------------------------------------------------------------ runs and sessions

    def get_run(self) -> dict[str, Any] | None:
        """The run row, or None for a new directory."""
        with self._lock:
            cur = self._con.execute("SELECT * FROM runs")
            row = cur.fetchone()
            return dict(zip([d[0] for d in cur.description], row, strict=True)) if row else None

    def put_run(self, *, run_id: str, model: str | None, agent: str, suite_version: str,
                task_versions: dict[str, str], config: dict[str, Any], env: dict[str, Any]) -> None:
        """Create the run row, or update its config and task versions (a resumed run that extends the plan)."""
        with self.transaction() as con:
            old = con.execute("SELECT created_at FROM runs WHERE run_id=?", (run_id,)).fetchone()
            con.execute("DELETE FROM runs")
            con.execute("INSERT INTO runs VALUES (?,?,?,?,?,?,?,?,?,?)",
                        (run_id, old[0] if old else now_iso(), now_iso(), model, agent, suite_version,
                         json.dumps(task_versions, sort_keys=True), json.dumps(config, sort_keys=True),
                         json.dumps(env, sort_keys=True), STORE_SCHEMA_VERSION))

    def start_session(self, *, run_id: str, argv: list[str], config: dict[str, Any], env: dict[str, Any],
                      suite_version: str, planned: int) -> int:
        with self.transaction() as con:
            cur = con.execute(
                "INSERT INTO sessions (run_id, started_at, argv_json, config_json, env_json, suite_version, "
                "episodes_planned, episodes_run, status) VALUES (?,?,?,?,?,?,?,0,'running')",
                (run_id, now_iso(), json.dumps(argv), json.dumps(config, sort_keys=True),
                 json.dumps(env, sort_keys=True), suite_version, planned))
            return int(cur.lastrowid or 0)

    def end_session(self, session_id: int, *, status: str) -> None:
        """Close a session: its end time, status and the number of episodes it ended."""
        with self.transaction() as con:
            n = con.execute("SELECT COUNT(*) FROM episodes WHERE session_id=?", (session_id,)).fetchone()[0]
            con.execute("UPDATE sessions SET ended_at=?, episodes_run=?, status=? WHERE session_id=?",
                        (now_iso(), n, status, session_id))

    # ------------------------------------------------------------------ episodes

    def episode_statuses(self) -> dict[str, str]:
        """``episode_id -> status`` of every episode with a row."""
        with self._lock:
            return dict(self._con.execute("SELECT episode_id, status FROM episodes").fetchall())

    def done_episode_ids(self) -> set[str]:
        """Episodes that ended for good (not ``failed``): a resume skips them."""
        return {e for e, s in self.episode_statuses().items() if s in DONE_STATUSES}

    def episode_attempts(self, episode_id: str) -> int:
        with self._lock:
            row = self._con.execute("SELECT attempt FROM episodes WHERE episode_id=?", (episode_id,)).fetchone()
            return int(row[0]) if row else 0

    def reset_episode(self, episode_id: str) -> None:
        """Delete every row of an episode that is about to run (again)."""
        with self.transaction() as con:
            for table in (*_PER_EPISODE_TABLES, "episodes"):
                con.execute(f"DELETE FROM {table} WHERE episode_id=?", (episode_id,))

    def add_turn(self, row: Mapping[str, Any]) -> None:
        with self.transaction() as con:
            self._insert(con, "turns", row)

    def add_tool_call(self, row: Mapping[str, Any]) -> None:
        with self.transaction() as con:
            self._insert(con, "tool_calls", row)

    def add_kernel_version(self, row: Mapping[str, Any]) -> None:
        with self.transaction() as con:
            self._insert(con, "kernel_versions", row)

    def add_evaluation(self, row: Mapping[str, Any]) -> None:
        with self.transaction() as con:
            self._insert(con, "evaluations", row)

    def finish_episode(self, episode: Mapping[str, Any], *, final_evaluation: Mapping[str, Any] | None = None,
                       workloads: Iterable[Mapping[str, Any]] = ()) -> None:
        """Write an ended episode with its final evaluation and workload rows, all in one transaction."""
        missing = [c for c in EPISODE_COLUMNS if c not in episode]
        if missing:
            raise KeyError(f"episodes: missing columns {missing}")
        with self.transaction() as con:
            if final_evaluation is not None:
                self._insert(con, "evaluations", final_evaluation, replace=True)
            con.execute("DELETE FROM workloads WHERE episode_id=?", (episode["episode_id"],))
            for w in workloads:
                self._insert(con, "workloads", w)
            self._insert(con, "episodes", episode, replace=True)


# ---------------------------------------------------------------------- integrity and the writer's lock


def check_store_file(path: Path) -> None:
    """Raise :class:`RunStoreError` unless ``path`` is a run store this d2kgrade can read; opens it read-only.

    A 0-byte file would otherwise be taken for a new store (a resume would start the run over and overwrite its
    episode folders) and a garbled one would raise sqlite's own error mid-command.
    """
    path = Path(path)
    keep = "; nothing was changed (restore it from a backup, or move the run directory away and use a new one)"
    # Never open() the file itself: closing any descriptor of it drops the POSIX locks that this process's SQLite
    # connections hold on it (a resumed run in the same process would then corrupt the store). stat and SQLite only.
    try:
        st = path.stat()
    except OSError as exc:
        raise RunStoreError(f"{path}: cannot read the run store ({exc.strerror}){keep}") from None
    if not stat_mod.S_ISREG(st.st_mode):
        raise RunStoreError(f"{path}: not a regular file, expected the run store (an SQLite file){keep}")
    if st.st_size == 0:
        raise RunStoreError(f"{path}: is empty (0 bytes), not a run store{keep}")
    try:
        con = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=60)
        try:
            tables = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'")}
            missing = sorted({"meta", "runs", *_TABLE_COLUMNS} - tables)
            if missing:
                raise RunStoreError(f"{path}: an SQLite file but not a run store (no table {', '.join(missing)})"
                                    f"{keep}")
            row = con.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()
        finally:
            con.close()
    except sqlite3.DatabaseError as exc:
        if "not a database" in str(exc):
            raise RunStoreError(f"{path}: is not an SQLite database (garbled, or another kind of file){keep}") \
                from None
        raise RunStoreError(f"{path}: the run store is damaged ({exc}){keep}") from None
    if row is None or not str(row[0]).isdigit() or int(row[0]) != STORE_SCHEMA_VERSION:
        raise RunStoreError(f"{path}: run store schema {row[0] if row else 'unknown'}, this d2kgrade reads "
                            f"{STORE_SCHEMA_VERSION}{keep}")


class RunLock:
    """One writer per run directory: ``RUN_DIR/run.lock``, held with ``flock`` and naming its holder.

    The file holds the holder's PID, host, start time and command (JSON) while it is held and is emptied on
    release; it is never deleted (deleting a lock file lets two processes lock two different files). A file that
    names a holder but is not locked was left by a process that died: :meth:`acquire` takes it over and returns
    a warning saying whose it was. On file systems without ``flock`` the PID is checked instead (on this host;
    a lock of another host is refused, since its holder cannot be checked from here).
    """

    def __init__(self, run_dir: Path) -> None:
        self.run_dir = Path(run_dir)
        self.path = self.run_dir / LOCK_NAME
        self._fd: int | None = None

    @staticmethod
    def _describe(info: dict[str, Any]) -> str:
        cmd = " ".join(str(a) for a in info.get("argv") or [])[:200]
        return (f"PID {info.get('pid', '?')} on host {info.get('host', '?')} (since {info.get('since', '?')}"
                + (f": {cmd}" if cmd else "") + ")")

    def _read(self, fd: int) -> dict[str, Any]:
        os.lseek(fd, 0, os.SEEK_SET)
        raw = os.read(fd, 65536).decode("utf-8", "replace").strip()
        if not raw:
            return {}
        try:
            info = json.loads(raw)
        except json.JSONDecodeError:
            return {"pid": "?", "host": "?", "since": "?", "garbled": raw[:100]}
        return info if isinstance(info, dict) else {}

    def _refuse(self, info: dict[str, Any]) -> RunStoreError:
        return RunStoreError(f"{self.run_dir}: another d2kgrade is writing this run directory: {self._describe(info)}."
                             " One writer per run directory: wait for it to end (then rerun the same command to "
                             "resume), or use another --out")

    def acquire(self) -> str | None:
        """Take the lock; returns a warning when a dead holder's lock was taken over.

        Raises:
            RunStoreError: another live process holds it.
        """
        self.run_dir.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                have_flock = True
            except BlockingIOError:
                raise self._refuse(self._read(fd)) from None
            except OSError as exc:
                if exc.errno not in (errno.ENOLCK, errno.EOPNOTSUPP, errno.ENOSYS):
                    raise
                have_flock = False
            info = self._read(fd)
            warning = None
            if info:
                mine = info.get("host") == socket.gethostname() and isinstance(info.get("pid"), int)
                if not have_flock and not (mine and not pid_alive(info["pid"])):
                    raise self._refuse(info)
                warning = (f"{self.path}: took over a stale lock; its holder, {self._describe(info)}, ended "
                           "without releasing it (killed?)")
            me = {"pid": os.getpid(), "host": socket.gethostname(), "since": now_iso(), "argv": sys.argv[:20]}
            os.ftruncate(fd, 0)
            os.lseek(fd, 0, os.SEEK_SET)
            os.write(fd, (json.dumps(me) + "\n").encode())
            os.fsync(fd)
        except BaseException:
            os.close(fd)
            raise
        self._fd = fd
        return warning

    def release(self) -> None:
        """Empty the file and unlock it (idempotent)."""
        fd, self._fd = self._fd, None
        if fd is None:
            return
        try:
            os.ftruncate(fd, 0)
        finally:
            os.close(fd)  # closing drops the flock

    def __enter__(self) -> RunLock:
        self.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


# ---------------------------------------------------------------------- reading


def load_run(run_dir: Path) -> dict[str, Any]:
    """Load a run directory's store into pandas DataFrames, one per table.

    Returns ``runs``, ``sessions``, ``episodes``, ``workloads``, ``turns``, ``tool_calls``, ``kernel_versions`` and
    ``evaluations``. ``correct``/``ok`` columns are bool; float columns hold NaN where unknown; text columns hold
    None where unknown (``kernel_path`` of an episode without submission).

    Raises:
        FileNotFoundError: if ``run_dir`` holds no ``results.sqlite``.
        RunStoreError: if it is not a readable run store (0 bytes, garbled, another schema).
    """
    import pandas as pd

    path = Path(run_dir) / DB_NAME
    if not (path.exists() or path.is_symlink()):
        raise FileNotFoundError(f"{path}: no run store here (is {run_dir} a run directory?)")
    check_store_file(path)
    con = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=60)
    try:
        out: dict[str, Any] = {}
        for table in ("runs", "sessions", *_TABLE_COLUMNS):
            df = pd.read_sql_query(f"SELECT * FROM {table}", con)
            for col in _BOOL_COLUMNS.get(table, ()):
                df[col] = df[col].astype(bool)
            for col in _FLOAT_COLUMNS.get(table, ()):
                df[col] = pd.to_numeric(df[col], errors="coerce").astype(float)
            for col in df.columns:  # text columns: None where missing (pandas 3 would say NaN), as documented
                if not pd.api.types.is_numeric_dtype(df[col]) and not pd.api.types.is_bool_dtype(df[col]):
                    df[col] = df[col].astype(object).where(df[col].notna(), None)
            out[table] = df
        return out
    finally:
        con.close()


__all__ = ["RunStore", "RunLock", "load_run", "check_store_file", "suite_version", "task_version",
           "EPISODE_STATUSES", "DONE_STATUSES", "UNSCORED_STATUSES", "EPISODE_COLUMNS", "now_iso"]
