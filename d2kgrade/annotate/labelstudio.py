"""Label Studio: the labelling config of one kernel task, its tasks, and reading exports back.

One Label Studio project per kernel task (each task has its own rubric properties): the config shows the file
and, per property, the rubric's question with what counts as met / not met, a single choice
(present / absent / unknown) and a free-text evidence box. Control names are the property ids made safe
(``softmax.L1.online-normalizer`` -> ``softmax__L1__online_normalizer``); every task carries the mapping back in
``data.d2k_properties``, so an export can be read without the config.

Exports read: the JSON export (a list of tasks with ``annotations[].result[]``) and the JSON-MIN export (a list
of flat objects: the task's data fields plus one key per control).
"""

from __future__ import annotations

import math
from typing import Any
from xml.sax.saxutils import quoteattr

from d2kgrade.schema import Rubric

CHOICES = ("present", "absent", "unknown")


def control_name(property_id: str) -> str:
    """A Label Studio control name for a property id (unique within a task: slugs hold no underscores)."""
    return property_id.replace(".", "__").replace("-", "_")


def labeling_config(rubric: Rubric) -> str:
    """The XML labelling config of one kernel task's project."""
    lines = ["<View>",
             "  <Style>.d2k-code { white-space: pre; font-family: monospace; font-size: 12px; overflow-x: auto; }"
             "</Style>",
             '  <Header value="$blind_id"/>',
             '  <View className="d2k-code"><Text name="code" value="$code"/></View>']
    for p in rubric.properties:
        if p.deprecated:
            continue
        name = control_name(p.id)
        lines += [f"  <Header value={quoteattr(f'{p.level} ({p.id}): {p.judge.question}')} size=\"5\"/>",
                  f"  <Header value={quoteattr('Met: ' + p.judge.met)} size=\"6\"/>",
                  f"  <Header value={quoteattr('Not met: ' + p.judge.not_met)} size=\"6\"/>",
                  f"  <Choices name={quoteattr(name)} toName=\"code\" choice=\"single-radio\" showInline=\"true\">",
                  *(f"    <Choice value=\"{c}\"/>" for c in CHOICES),
                  "  </Choices>",
                  f"  <TextArea name={quoteattr(name + '__evidence')} toName=\"code\" rows=\"2\" "
                  "placeholder=\"lines and a short quote that decide it\"/>"]
    lines.append("</View>")
    return "\n".join(lines) + "\n"


def task_data(blind_id: str, annotator: str, rubric: Rubric, kind: str, text: str) -> dict[str, Any]:
    """One Label Studio task (model, arm and episode are never in it)."""
    return {"data": {"blind_id": blind_id, "annotator": annotator, "task": rubric.task, "kind": kind,
                     "code": text,
                     "d2k_properties": {control_name(p.id): p.id for p in rubric.properties if not p.deprecated}}}


def _rater(annotation: dict[str, Any], data: dict[str, Any]) -> str:
    who = annotation.get("completed_by")
    if isinstance(who, dict):
        who = who.get("email") or who.get("id")
    if who not in (None, ""):
        return str(who) if not isinstance(who, int) else f"user-{who}"
    return str(data.get("annotator", ""))


def _first(value: Any) -> Any:
    if isinstance(value, list):
        return value[0] if value else ""
    return value


def read_export(tasks: list[Any], source: str) -> list[dict[str, Any]]:
    """Rows (blind_id, property_id, rater_id, value, evidence) from a Label Studio JSON or JSON-MIN export.

    Raises:
        ValueError: naming the task index and what is missing.
    """
    rows: list[dict[str, Any]] = []
    for i, t in enumerate(tasks):
        if not isinstance(t, dict):
            raise ValueError(f"task {i}: expected an object, got {type(t).__name__}")
        full = "annotations" in t
        data = t.get("data", {}) if full else t
        mapping = data.get("d2k_properties")
        blind = data.get("blind_id")
        if not isinstance(mapping, dict) or not blind:
            raise ValueError(f"task {i}: no blind_id / d2k_properties in its data (not a task of a d2kgrade "
                             "annotation pack)")
        if full:
            for ann in t.get("annotations") or []:
                if ann.get("was_cancelled"):
                    continue
                rater = _rater(ann, data)
                got: dict[str, dict[str, Any]] = {}
                for r in ann.get("result") or []:
                    name, value = str(r.get("from_name", "")), r.get("value") or {}
                    if name in mapping:
                        got.setdefault(name, {})["value"] = _first(value.get("choices"))
                    elif name.endswith("__evidence") and name[: -len("__evidence")] in mapping:
                        text = value.get("text")
                        got.setdefault(name[: -len("__evidence")], {})["evidence"] = (
                            "\n".join(text) if isinstance(text, list) else str(text or ""))
                for name, v in got.items():
                    if "value" in v:
                        rows.append({"blind_id": blind, "property_id": mapping[name], "rater_id": rater,
                                     "value": v["value"], "evidence": v.get("evidence", "")})
        else:
            rater = str(t.get("annotator") or data.get("annotator") or "")
            for name, pid in mapping.items():
                value = _first(t.get(name))
                if value in (None, "") or (isinstance(value, float) and math.isnan(value)):
                    continue
                ev = t.get(f"{name}__evidence", "")
                rows.append({"blind_id": blind, "property_id": pid, "rater_id": rater, "value": value,
                             "evidence": "\n".join(ev) if isinstance(ev, list) else str(ev or "")})
    return rows
