"""The judge cache: one SQLite row per (request, sample), committed as soon as the answer arrives.

The key is a hash of everything that could change an answer (:func:`cache_key`): rubric task and version, the
property ids and the text of their judge specs, the answer kind, the prompt template hash, the normalized
document, the static facts shown, the model, the base URL, the decoding settings and the sample index. Judging
the same files again therefore makes no API call, and a run killed half way keeps every answer it received.

Answers that could not be parsed after the re-asks are cached too (re-asking the same prompt at temperature 0
would reproduce them); transport failures (timeouts, 5xx after all retries) are not, so a later run retries them.
"""

from __future__ import annotations

import hashlib
import json
import logging
import sqlite3
import threading
import time
from pathlib import Path
from typing import Any

from d2kgrade.errors import UserError

log = logging.getLogger(__name__)
CACHE_KEY_VERSION = 1

_SCHEMA = """
CREATE TABLE IF NOT EXISTS answers (
    key TEXT PRIMARY KEY,
    created REAL NOT NULL,
    model TEXT NOT NULL,
    unit TEXT NOT NULL,
    sample INTEGER NOT NULL,
    outcome TEXT NOT NULL
)
"""


def cache_key(parts: dict[str, Any]) -> str:
    """SHA-256 of the canonical JSON of ``parts`` (plus :data:`CACHE_KEY_VERSION`)."""
    blob = json.dumps({"cache_key_version": CACHE_KEY_VERSION, **parts}, sort_keys=True, separators=(",", ":"),
                      default=str)
    return hashlib.sha256(blob.encode()).hexdigest()


def text_hash(text: str) -> str:
    """SHA-256 of a text, for keys."""
    return hashlib.sha256(text.encode()).hexdigest()


class JudgeCache:
    """A SQLite file shared by the worker threads of one run (one connection behind a lock; WAL so that
    several processes may share the file)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            self._db = sqlite3.connect(str(path), check_same_thread=False, timeout=30.0)
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute(_SCHEMA)
            self._db.commit()
        except sqlite3.DatabaseError as exc:
            raise UserError(f"{path}: cannot open the judge cache ({exc}); pass another --cache or delete it") from None
        except OSError as exc:
            raise UserError(f"{path}: cannot create the judge cache ({exc.strerror})") from None
        self._lock = threading.Lock()

    def get(self, key: str) -> dict[str, Any] | None:
        """The stored outcome for ``key``, or None."""
        with self._lock:
            row = self._db.execute("SELECT outcome FROM answers WHERE key = ?", (key,)).fetchone()
        if row is None:
            return None
        try:
            return json.loads(row[0])
        except json.JSONDecodeError:
            log.warning("judge cache %s: unreadable entry %s ignored", self.path, key[:12])
            return None

    def put(self, key: str, outcome: dict[str, Any], *, model: str, unit: str, sample: int) -> None:
        """Store one outcome and commit at once (a crash loses at most the answers in flight)."""
        blob = json.dumps(outcome, default=str)
        with self._lock:
            self._db.execute("INSERT OR REPLACE INTO answers (key, created, model, unit, sample, outcome) "
                             "VALUES (?, ?, ?, ?, ?, ?)", (key, time.time(), model, unit, sample, blob))
            self._db.commit()

    def __len__(self) -> int:
        with self._lock:
            return int(self._db.execute("SELECT COUNT(*) FROM answers").fetchone()[0])

    def close(self) -> None:
        """Close the connection."""
        with self._lock:
            self._db.close()
