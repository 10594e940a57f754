"""Fuzzing: corpus files mutated at random (fixed seed) never make grade_file raise, and no check crashes."""

from __future__ import annotations

import random
from pathlib import Path

from d2kgrade.static import grade_file
from d2kgrade.suite import Suite

ROOT = Path(__file__).resolve().parents[2]
CORPUS = Path(__file__).resolve().parent / "corpus"
N_MUTATIONS = 200


def mutate(data: bytes, rng: random.Random) -> bytes:
    lines = data.split(b"\n")
    op = rng.randrange(7)
    if op == 0:  # truncate
        return data[: rng.randrange(len(data) + 1)]
    if op == 1 and len(lines) > 1:  # delete lines
        i = rng.randrange(len(lines))
        del lines[i: i + rng.randint(1, 5)]
    elif op == 2:  # duplicate lines
        i = rng.randrange(len(lines))
        lines[i:i] = lines[i: i + rng.randint(1, 6)]
    elif op == 3:  # flip bytes
        b = bytearray(data)
        for _ in range(rng.randint(1, 8)):
            if b:
                b[rng.randrange(len(b))] ^= 1 << rng.randrange(8)
        return bytes(b)
    elif op == 4:  # insert noise
        noise = bytes(rng.randrange(256) for _ in range(rng.randint(1, 64)))
        pos = rng.randrange(len(data) + 1)
        return data[:pos] + noise + data[pos:]
    elif op == 5:  # swap two lines (often legal code with broken data flow)
        if len(lines) > 2:
            i, j = rng.randrange(len(lines)), rng.randrange(len(lines))
            lines[i], lines[j] = lines[j], lines[i]
    else:  # shuffle indentation of a block
        i = rng.randrange(len(lines))
        lines[i] = b"    " + lines[i] if rng.random() < 0.5 else lines[i].lstrip()
    return b"\n".join(lines)


def test_mutated_corpus_never_raises(tmp_path):
    rng = random.Random(20240611)
    suite = Suite(ROOT)
    files = sorted(p for p in CORPUS.rglob("*") if p.suffix in (".py", ".cu"))
    rubrics = {t: suite.load_rubric(t) for t in {p.parent.name for p in files}}
    outcomes = {"graded": 0, "unknown": 0}
    crashed_checks = []
    for i in range(N_MUTATIONS):
        src = rng.choice(files)
        out = tmp_path / f"m{i}{src.suffix}"
        out.write_bytes(mutate(src.read_bytes(), rng))
        fg = grade_file(rubrics[src.parent.name], out)
        outcomes["unknown" if fg.error else "graded"] += 1
        for pg in fg.properties:
            for c in pg.details.get("checks", []):
                if c["passed"] is None and "raised" in c["reason"]:
                    crashed_checks.append((src.name, c["check"], c["reason"]))
    assert not crashed_checks, crashed_checks[:5]
    # the mutations exercise both paths: files that still parse, and files that do not
    assert outcomes["graded"] > 20 and outcomes["unknown"] > 20, outcomes
