"""Annotation packs: blind export, synthetic answers through every format, import, and compare with the truth."""

from __future__ import annotations

import csv
import hashlib
import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pandas as pd
import pytest
from typer.testing import CliRunner

from d2kgrade.agreement.ratings import item_key
from d2kgrade.agreement.results import AgreementConfig
from d2kgrade.agreement.study import agreement_study
from d2kgrade.annotate.importer import import_ratings
from d2kgrade.annotate.labelstudio import control_name
from d2kgrade.annotate.pack import assign, export_pack
from d2kgrade.cli import app
from d2kgrade.errors import UserError
from d2kgrade.suite import Suite
from tests.metrics.synthetic import make_run

ROOT = Path(__file__).resolve().parents[2]
TASKS = ("softmax", "gemm_bf16", "rmsnorm_residual")
MODELS = ("secretmodelA", "secretmodelB")


def truth(episode: str, kind: str, pid: str) -> str:
    return "present" if hashlib.sha256(f"{episode}|{kind}|{pid}".encode()).digest()[0] % 2 else "absent"


@pytest.fixture
def pack(tmp_path):
    run = make_run(tmp_path / "run", models=MODELS, tasks=TASKS, with_files=True, with_grades=False, seed=2)
    out = tmp_path / "pack"
    export_pack([run], out, None, raters=3, overlap=0.4, seed=7, kinds=("code", "proposal"),
                rubric_loader=Suite(ROOT).load_rubric)
    return run, out, json.loads((out / "key.json").read_text())


def test_pack_is_blind_and_assigned_with_overlap(pack):
    run, out, key = pack
    items = key["items"]
    assert len(items) == len(MODELS) * len(TASKS) * 2 * 2  # two arms, kernel + note
    folders = sorted(p for p in out.iterdir() if p.is_dir())
    assert [f.name for f in folders] == ["annotator-01", "annotator-02", "annotator-03"]
    # nothing that identifies model, arm or episode in any annotator's file; the key is outside their folders
    secrets = set(MODELS) | {m["episode_id"] for m in items.values()} | {"unguided", str(run)}
    for f in (p for folder in folders for p in folder.rglob("*") if p.is_file()):
        text = f.read_text()
        assert not any(s in text for s in secrets), f
        assert f.name != "key.json"
    assigned = key["assignments"]
    shared = set(key["overlap_items"])
    assert len(shared) == round(0.4 * len(items))
    for name, ids in assigned.items():
        assert shared <= set(ids)
        assert sorted(p.stem for p in (out / name / "files").iterdir()) == sorted(ids)
    rest = [b for ids in assigned.values() for b in ids if b not in shared]
    assert sorted(rest) == sorted(set(items) - shared)  # every other item exactly once
    orders = [[b for b in ids if b in shared] for ids in assigned.values()]
    assert len({tuple(o) for o in orders}) > 1  # each annotator has their own order
    # the Label Studio config parses, and names a control per property with three choices
    rub = Suite(ROOT).load_rubric("softmax")
    cfg = ET.parse(out / "annotator-01" / "labelstudio" / "softmax" / "config.xml").getroot()
    choices = {c.get("name"): [x.get("value") for x in c] for c in cfg.iter("Choices")}
    assert choices == {control_name(p.id): ["present", "absent", "unknown"] for p in rub.properties}


def _fill(out: Path, key: dict) -> None:
    """Annotator 1 answers in Label Studio (JSON export), 2 in Label Studio (JSON-MIN), 3 in the CSV."""
    items = key["items"]
    full = []
    for tasks_json in sorted((out / "annotator-01" / "labelstudio").glob("*/tasks.json")):
        for i, t in enumerate(json.loads(tasks_json.read_text())):
            meta = items[t["data"]["blind_id"]]
            result = []
            for name, pid in t["data"]["d2k_properties"].items():
                result.append({"from_name": name, "to_name": "code", "type": "choices",
                               "value": {"choices": [truth(meta["episode_id"], meta["kind"], pid)]}})
                result.append({"from_name": f"{name}__evidence", "to_name": "code", "type": "textarea",
                               "value": {"text": [f"line {i + 1}"]}})
            full.append({"id": i, "data": t["data"], "annotations": [
                {"id": 1, "completed_by": {"id": 3, "email": "ann1@lab.org"}, "was_cancelled": False,
                 "result": result},
                {"id": 2, "completed_by": 9, "was_cancelled": True, "result": result}]})
    (out / "ann1_export.json").write_text(json.dumps(full))
    mini = []
    for tasks_json in sorted((out / "annotator-02" / "labelstudio").glob("*/tasks.json")):
        for t in json.loads(tasks_json.read_text()):
            meta = items[t["data"]["blind_id"]]
            row = dict(t["data"], annotator="ann2@lab.org", id=1)
            for name, pid in t["data"]["d2k_properties"].items():
                row[name] = truth(meta["episode_id"], meta["kind"], pid)
            mini.append(row)
    (out / "ann2_min.json").write_text(json.dumps(mini))
    path = out / "annotator-03" / "ratings_template.csv"
    rows = list(csv.DictReader(path.open()))
    for n, r in enumerate(rows):
        meta = items[r["blind_id"]]
        r["value"] = "" if n == 0 else truth(meta["episode_id"], meta["kind"], r["property_id"])  # one skipped
        r["evidence"] = "L3: tl.max"
    with path.open("w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)


def test_round_trip_export_fill_import_compare(pack):
    run, out, key = pack
    _fill(out, key)
    files = [out / "ann1_export.json", out / "ann2_min.json", out / "annotator-03" / "ratings_template.csv"]
    df = import_ratings(files, out / "key.json")
    assert sorted(set(df["rater_id"])) == ["ann1@lab.org", "ann2@lab.org", "annotator-03"]
    by_episode = {m["item_id"]: m for m in key["items"].values()}
    assert all(i == item_key(m["episode_id"], m["kind"], "r0") for i, m in by_episode.items())
    suite = Suite(ROOT)
    n_props = {t: len(suite.load_rubric(t).properties) for t in TASKS}
    expected = {r: sum(n_props[key["items"][b]["task"]] for b in ids)
                for r, ids in zip(["ann1@lab.org", "ann2@lab.org", "annotator-03"], key["assignments"].values())}
    expected["annotator-03"] -= 1  # the unanswered row is left out, not read as absent
    assert df.groupby("rater_id").size().to_dict() == expected
    for r in df.itertuples():
        meta = by_episode[r.item_id]
        assert r.value == (1.0 if truth(meta["episode_id"], meta["kind"], r.property_id) == "present" else 0.0)
        assert r.task == meta["task"] and r.rater_kind == "human"
        assert r.level == r.property_id.split(".")[1]
    assert set(df.loc[df["rater_id"] == "ann1@lab.org", "evidence"]) >= {"line 1"}
    # the imported table is what `agree` reads: all three agree perfectly on the shared items
    res = agreement_study(df, AgreementConfig(resamples=0))
    pooled = next(b for b in res.binary if b.scope == "all")
    assert len(pooled.raters) == 3 and pooled.krippendorff_alpha.value == pytest.approx(1.0)
    assert pooled.n_units == sum(n_props[key["items"][b]["task"]] for b in key["overlap_items"])
    # without the key, items keep their blind ids
    blind = import_ratings(files[:1])
    assert set(blind["item_id"]) <= set(key["items"])


def test_import_and_export_errors(pack, tmp_path):
    run, out, key = pack
    _fill(out, key)
    other = tmp_path / "otherkey.json"
    other.write_text(json.dumps({"items": {"xdeadbeef": {}}}))
    with pytest.raises(UserError, match="is not in the key"):
        import_ratings([out / "ann1_export.json"], other)
    bad = tmp_path / "bad.csv"
    pd.DataFrame([{"annotator": "a", "blind_id": "x1", "property_id": "softmax.L1.x", "value": "maybe"}]).to_csv(
        bad, index=False)
    with pytest.raises(Exception, match=r"bad.csv: row 1, column value: expected present/absent/unknown"):
        import_ratings([bad])
    with pytest.raises(UserError, match="exists and is not empty"):
        export_pack([run], out, None, raters=2, rubric_loader=Suite(ROOT).load_rubric)


def test_assignment_edge_cases():
    import random

    shared, per = assign(10, 1, 0.5, random.Random(0))
    assert shared == [] and sorted(per[0]) == list(range(10))
    shared, per = assign(10, 2, 0.0, random.Random(0))
    assert shared == [] and sorted(per[0] + per[1]) == list(range(10))
    shared, per = assign(3, 4, 0.1, random.Random(0))
    assert len(shared) == 2 and all(set(shared) <= set(p) for p in per)


def test_annotate_cli_round_trip(tmp_path):
    run = make_run(tmp_path / "run", models=MODELS, tasks=("softmax",), with_files=True, with_grades=False)
    out = tmp_path / "pack"
    r = CliRunner().invoke(app, ["annotate", "export", str(run), "--raters", "2", "--overlap", "1", "--seed", "3",
                                 "--out", str(out)], catch_exceptions=False)
    assert r.exit_code == 0, r.output
    key = json.loads((out / "key.json").read_text())
    assert key["seed"] == 3 and len(key["overlap_items"]) == len(key["items"]) == 4
    tmpl = out / "annotator-01" / "ratings_template.csv"
    df = pd.read_csv(tmpl, dtype=str, keep_default_na=False)
    df["value"] = "present"
    df.to_csv(tmpl, index=False)
    r = CliRunner().invoke(app, ["annotate", "import", str(tmpl), "--key", str(out / "key.json"), "--out",
                                 str(tmp_path / "ratings.csv")], catch_exceptions=False)
    assert r.exit_code == 0, r.output
    got = pd.read_csv(tmp_path / "ratings.csv")
    assert len(got) == len(df) and set(got["value"]) == {1.0}
    assert set(got["item_id"]) == {f"r0/{m['episode_id']}" for m in key["items"].values()}


def test_runs_with_the_same_episode_ids_stay_apart(tmp_path):
    """One run per model: episode ids repeat across runs, item ids carry the run."""
    import pandas as pd

    from d2kgrade.agreement.ratings import read_ratings

    runs = []
    for name in ("qwen", "llama"):
        run = make_run(tmp_path / name, models=(name,), tasks=("softmax",), with_files=True, seed=1)
        for table in ("episodes", "workloads"):  # the runner's ids: no model in them
            df = pd.read_csv(run / f"{table}.csv")
            df["episode_id"] = df["episode_id"].str.replace(f"{name}-", "", regex=False)
            if table == "episodes":
                df["run_id"] = f"run-{name}"
            df.to_csv(run / f"{table}.csv", index=False)
        (run / "grades.jsonl").write_text((run / "grades.jsonl").read_text().replace(f'"{name}-', '"'))
        runs.append(run)
    df = read_ratings(runs)  # run directories: their grades.jsonl
    assert {i.split("/")[0] for i in df["item_id"]} == {"run-qwen", "run-llama"}
    assert set(df["rater_id"]) == {"combined", "static", "llm"}  # one judge over both runs, no clash
    out = tmp_path / "pack"
    export_pack(runs, out, None, raters=1, seed=0, rubric_loader=Suite(ROOT).load_rubric)
    ids = [m["item_id"] for m in json.loads((out / "key.json").read_text())["items"].values()]
    assert len(ids) == len(set(ids)) == 4 and set(ids) <= set(df["item_id"])
