"""Where an episode's records go: the run store rows, the transcript and the kept files.

An episode talks to an :class:`EpisodeRecorder`, which adds ``run_id``/``episode_id`` and hands everything to a
:class:`Sink`. :class:`LocalSink` writes the run directory directly (the local executor's threads share it);
the Ray executor wraps the same LocalSink in an actor on the driver's node, so remote episodes write the same
records in the same place.

Files of an episode live under ``RUN_DIR/episodes/<episode_id>/``; paths stored in the rows are relative to RUN_DIR.
"""

from __future__ import annotations

import json
import shutil
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol

from d2kgrade.io import atomic_write_text
from d2kgrade.runstore import RunStore

EPISODES_DIR = "episodes"
TRANSCRIPT = "transcript.jsonl"


def episode_dir_rel(episode_id: str) -> str:
    return f"{EPISODES_DIR}/{episode_id}"


class Sink(Protocol):
    """Receives an episode's records (all paths relative to RUN_DIR)."""

    def write_text(self, rel: str, text: str) -> None: ...

    def append_jsonl(self, rel: str, obj: dict[str, Any]) -> None: ...

    def add(self, table: str, row: dict[str, Any]) -> None: ...

    def finish_episode(self, episode: dict[str, Any], final_evaluation: dict[str, Any] | None,
                       workloads: list[dict[str, Any]]) -> None: ...


class LocalSink:
    """Writes into a run directory on this machine (thread-safe: the store serializes its transactions)."""

    def __init__(self, store: RunStore, on_turn: Callable[[str, int, dict[str, Any]], None] | None = None) -> None:
        self.store = store
        self.run_dir = store.run_dir
        self.on_turn = on_turn
        self._lock = threading.Lock()
        self.last_turn: dict[str, int] = {}

    def write_text(self, rel: str, text: str) -> None:
        atomic_write_text(self.run_dir / rel, text)

    def append_jsonl(self, rel: str, obj: dict[str, Any]) -> None:
        path = self.run_dir / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        line = json.dumps(obj, default=str, ensure_ascii=False) + "\n"
        with self._lock, path.open("a", encoding="utf-8") as fh:
            fh.write(line)
            fh.flush()

    def add(self, table: str, row: dict[str, Any]) -> None:
        getattr(self.store, {"turns": "add_turn", "tool_calls": "add_tool_call",
                             "kernel_versions": "add_kernel_version", "evaluations": "add_evaluation"}[table])(row)
        if table == "turns":
            self.last_turn[row["episode_id"]] = int(row["turn"])
            if self.on_turn is not None:
                self.on_turn(row["episode_id"], int(row["turn"]), row)

    def finish_episode(self, episode: dict[str, Any], final_evaluation: dict[str, Any] | None,
                       workloads: list[dict[str, Any]]) -> None:
        self.store.finish_episode(episode, final_evaluation=final_evaluation, workloads=workloads)
        self.last_turn.pop(episode["episode_id"], None)

    def progress(self) -> dict[str, int]:
        """``episode_id -> last recorded turn`` of episodes in flight (the Ray driver polls it)."""
        return dict(self.last_turn)

    def reset_episode(self, episode_id: str) -> None:
        """Forget an episode that did not end: its rows and its folder."""
        self.store.reset_episode(episode_id)
        shutil.rmtree(self.run_dir / episode_dir_rel(episode_id), ignore_errors=True)


class EpisodeRecorder:
    """One episode's view of a sink."""

    def __init__(self, sink: Sink, run_id: str, episode_id: str) -> None:
        self.sink = sink
        self.run_id = run_id
        self.episode_id = episode_id
        self.dir = episode_dir_rel(episode_id)
        self.transcript_path = f"{self.dir}/{TRANSCRIPT}"
        self._t0 = time.time()

    def _row(self, row: Mapping[str, Any]) -> dict[str, Any]:
        return {"run_id": self.run_id, "episode_id": self.episode_id, **row}

    def save_file(self, name: str, text: str) -> str:
        """Keep a file of this episode; returns its path relative to RUN_DIR."""
        rel = f"{self.dir}/{name}"
        self.sink.write_text(rel, text)
        return rel

    def transcript(self, entry: Mapping[str, Any]) -> None:
        """Append one entry (a message, a tool result, an event) to the episode's JSONL transcript, in full."""
        self.sink.append_jsonl(self.transcript_path, {"t": round(time.time() - self._t0, 3), **entry})

    def turn(self, row: Mapping[str, Any]) -> None:
        self.sink.add("turns", self._row(row))

    def tool_call(self, row: Mapping[str, Any]) -> None:
        self.sink.add("tool_calls", self._row(row))

    def kernel_version(self, row: Mapping[str, Any]) -> None:
        self.sink.add("kernel_versions", self._row(row))

    def evaluation(self, row: Mapping[str, Any]) -> None:
        self.sink.add("evaluations", self._row(row))

    def finish(self, episode: Mapping[str, Any], final_evaluation: Mapping[str, Any] | None,
               workloads: Sequence[Mapping[str, Any]]) -> None:
        """Write the ended episode (one transaction with its final evaluation and workload rows)."""
        self.sink.finish_episode(self._row(episode), self._row(final_evaluation) if final_evaluation else None,
                                 [self._row(w) for w in workloads])


def sent_requests(transcript: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Every request of an episode, rebuilt from its transcript's ``request`` events: ``{"turn", "tool_mode",
    "tools" (the tool specs, or None), "params", "messages"}``, exactly as sent."""
    specs: Any = None
    messages: list[dict[str, Any]] = []
    out = []
    for entry in transcript:
        if entry.get("event") == "tools":
            specs = entry["tools"]
        elif entry.get("event") == "request":
            messages = messages[:entry["keep"]] + list(entry["messages"])
            if len(messages) != entry["n_messages"]:
                raise ValueError(f"transcript request of turn {entry['turn']}: {len(messages)} messages rebuilt, "
                                 f"{entry['n_messages']} sent (a request event is missing)")
            out.append({"turn": entry["turn"], "tool_mode": entry["tool_mode"],
                        "tools": specs if entry["tools"] else None, "params": entry["params"],
                        "messages": [dict(m) for m in messages]})
    return out
