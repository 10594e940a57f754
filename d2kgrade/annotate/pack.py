"""``d2kgrade annotate export``: a blind annotation pack for people who grade kernels and design notes by hand.

Blinding: every file gets a random id (``x3f9a0c1e.py``); model, arm, guidance, seed and episode id appear
nowhere in an annotator's folder, and each annotator sees their items in their own random order. The file's
content is copied as is, so a comment the agent wrote ("following the guidance...") can still give an arm
away; read the files before sending them when that matters.

Assignment: a share ``overlap`` of the items (rounded, at least two when there are two raters or more) goes to
every annotator, for agreement; the rest is dealt round-robin so each is rated once.

Layout of ``OUT``::

    key.json                  blind id -> run, episode, file, model, arm...  (keep it; never send it)
    README.md                 what to send to whom
    annotator-01/             send this folder to annotator 1, and so on
        instructions.md
        ratings_template.csv  one row per (file, property): fill value (present/absent/unknown) and evidence
        files/<blind id>.py|.md
        labelstudio/<task>/config.xml, tasks.json   one Label Studio project per kernel task
"""

from __future__ import annotations

import csv
import io
import json
import logging
import random
import secrets
import shutil
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from d2kgrade.agreement.ratings import item_key
from d2kgrade.annotate import labelstudio
from d2kgrade.errors import UserError
from d2kgrade.io import atomic_write_text, write_json
from d2kgrade.schema import Rubric

log = logging.getLogger(__name__)

KEY_VERSION = 1
TEMPLATE_COLUMNS = ("annotator", "order", "blind_id", "file", "task", "kind", "property_id", "level", "question",
                    "met_looks_like", "not_met_looks_like", "value", "evidence", "comment")
INSTRUCTIONS = """# Grading instructions

You grade GPU kernels (`.py`) and design notes (`.md`) for design properties. For each file in `files/`, answer
each question of its task in `ratings_template.csv` (or in the Label Studio projects under `labelstudio/`):

- `value`: `present` when the code (or the note, for `.md` files) does what the question asks, as described
  under `met_looks_like`; `absent` when it does not, or only claims to (names, comments, dead code); `unknown`
  when you cannot tell. Leave it empty only for a question you did not look at.
- `evidence`: the line numbers and a short quote that decided it.

Grade each file on its own. Do not try to find out which model or setup wrote it.
"""


@dataclass(frozen=True)
class Item:
    """One file to rate."""

    run_dir: str
    run: str
    episode_id: str
    kind: str
    path: Path
    task: str
    model: str
    arm: str
    guidance: str
    seed: int


def collect_items(run_dirs: list[Path], kinds: tuple[str, ...]) -> list[Item]:
    """Kernels and/or design notes of the runs' agent episodes (reference episodes are not rated)."""
    from d2kgrade.metrics.tables import load_run_dir, run_label

    items = []
    for d in run_dirs:
        run = load_run_dir(d)
        label = run_label(d) or d.name
        e = run.episodes[run.episodes["agent"] != "reference"]
        for r in e.to_dict("records"):
            for kind in kinds:
                rel = r["kernel_path"] if kind == "code" else r["design_note_path"]
                if not rel:
                    continue
                path = d / rel
                if not path.is_file():
                    log.warning("%s: %s of episode %s is missing; skipped", d, rel, r["episode_id"])
                    continue
                items.append(Item(str(d), label, str(r["episode_id"]), kind, path, str(r["task"]), str(r["model"]),
                                  str(r["arm"]), str(r["guidance"]), int(r["seed"])))
    if not items:
        raise UserError(f"no {' or '.join(kinds)} files in {', '.join(str(d) for d in run_dirs)} to annotate")
    return items


def assign(n_items: int, raters: int, overlap: float, rng: random.Random) -> tuple[list[int], list[list[int]]]:
    """(overlap item indices, per-rater item indices in that rater's random order)."""
    order = list(range(n_items))
    rng.shuffle(order)
    n_overlap = round(overlap * n_items) if raters > 1 else 0
    if raters > 1 and overlap > 0:
        n_overlap = min(n_items, max(n_overlap, 2))
    shared, rest = order[:n_overlap], order[n_overlap:]
    per = [list(shared) + rest[r::raters] for r in range(raters)]
    for lst in per:
        rng.shuffle(lst)
    return sorted(shared), per


def export_pack(run_dirs: list[Path], out: Path, rubrics: dict[str, Rubric] | None, *, raters: int,
                overlap: float = 0.25, seed: int | None = None, kinds: tuple[str, ...] = ("code",),
                rubric_loader=None) -> Path:
    """Write the pack (module docstring); returns the key's path.

    Args:
        rubrics: rubric per task id; tasks not in it are loaded with ``rubric_loader(task_id)``.
    """
    if raters < 1:
        raise UserError(f"--raters must be at least 1, got {raters}")
    if not 0 <= overlap <= 1:
        raise UserError(f"--overlap must be between 0 and 1, got {overlap}")
    if out.exists() and any(out.iterdir()):
        raise UserError(f"{out}: exists and is not empty; choose a new folder (a pack is never overwritten)")
    items = collect_items(run_dirs, kinds)
    rubrics = dict(rubrics or {})
    for task in sorted({i.task for i in items}):
        if task not in rubrics:
            if rubric_loader is None:
                raise UserError(f"no rubric for task {task!r}")
            rubrics[task] = rubric_loader(task)
    seed = secrets.randbits(32) if seed is None else seed
    rng = random.Random(seed)
    ids: set[str] = set()
    blind = []
    for _ in items:
        while (b := f"x{rng.getrandbits(32):08x}") in ids:
            pass
        ids.add(b)
        blind.append(b)
    shared, per = assign(len(items), raters, overlap, rng)
    names = [f"annotator-{r + 1:02d}" for r in range(raters)]
    out.mkdir(parents=True, exist_ok=True)
    for name, idxs in zip(names, per):
        _write_annotator(out / name, name, [(blind[i], items[i]) for i in idxs], rubrics)
    key = {"schema_version": KEY_VERSION, "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
           "seed": seed, "raters": raters, "overlap": overlap, "kinds": list(kinds),
           "run_dirs": [str(d) for d in run_dirs],
           "items": {blind[i]: {"item_id": item_key(it.episode_id, it.kind, it.run), "run_dir": it.run_dir,
                                "run": it.run, "episode_id": it.episode_id, "kind": it.kind,
                                "file": str(it.path), "task": it.task, "model": it.model, "arm": it.arm,
                                "guidance": it.guidance, "seed": it.seed} for i, it in enumerate(items)},
           "overlap_items": [blind[i] for i in shared],
           "assignments": {name: [blind[i] for i in idxs] for name, idxs in zip(names, per)}}
    key_path = out / "key.json"
    write_json(key_path, key)
    atomic_write_text(out / "README.md", (
        f"# Annotation pack ({len(items)} files, {raters} annotator(s), {len(shared)} rated by all)\n\n"
        "Send each `annotator-NN/` folder to one person. **Never send `key.json`**: it maps blind ids back to "
        "models and arms.\n\nCollect `ratings_template.csv` (or the Label Studio exports) and run:\n\n"
        "    d2kgrade annotate import annotator-*/ratings_template.csv --key key.json --out ratings.csv\n"
        "    d2kgrade agree ratings.csv RUN_DIR/grades.jsonl\n"))
    return key_path


def _write_annotator(folder: Path, name: str, entries: list[tuple[str, Item]], rubrics: dict[str, Rubric]) -> None:
    files = folder / "files"
    files.mkdir(parents=True)
    atomic_write_text(folder / "instructions.md", INSTRUCTIONS)
    buf = io.StringIO()
    w = csv.writer(buf)
    w.writerow(TEMPLATE_COLUMNS)
    ls_tasks: dict[str, list[dict]] = {}
    for order, (b, it) in enumerate(entries, start=1):
        suffix = ".py" if it.kind == "code" else ".md"
        shutil.copyfile(it.path, files / f"{b}{suffix}")
        rubric = rubrics[it.task]
        text = it.path.read_text(encoding="utf-8", errors="replace")
        ls_tasks.setdefault(it.task, []).append(labelstudio.task_data(b, name, rubric, it.kind, text))
        for p in rubric.properties:
            if p.deprecated:
                continue
            w.writerow([name, order, b, f"files/{b}{suffix}", it.task, it.kind, p.id, p.level, p.judge.question,
                        p.judge.met, p.judge.not_met, "", "", ""])
    atomic_write_text(folder / "ratings_template.csv", buf.getvalue())
    for task, tasks in ls_tasks.items():
        d = folder / "labelstudio" / task
        atomic_write_text(d / "config.xml", labelstudio.labeling_config(rubrics[task]))
        atomic_write_text(d / "tasks.json", json.dumps(tasks, indent=1) + "\n")
