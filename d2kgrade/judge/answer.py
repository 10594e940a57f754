"""The judge's answer format: a JSON Schema for ``response_format`` and a parser that validates what came back.

An answer carries its evidence first (verbatim quotes with line ranges), then its reasoning, then the verdict, in
that key order, so a model that writes left to right commits to evidence before it decides. Servers that enforce
``json_schema`` return valid objects; for the others (or a model that wraps its JSON in prose or fences),
:func:`parse_answers` extracts and validates the object and raises :class:`AnswerError` with a message short
enough to send back to the model in a re-ask.
"""

from __future__ import annotations

import json
import re
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

JudgeVerdict = Literal["met", "not_met", "not_applicable"]
JUDGE_VERDICTS: tuple[str, ...] = ("met", "not_met", "not_applicable")


class AnswerError(ValueError):
    """The model's reply is not a valid answer; the message says why, for a re-ask."""


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)


class Quote(_Model):
    """One verbatim quote from the graded document."""

    quote: str
    """Text copied from the document, without the listing's line-number prefix."""
    start_line: int = Field(ge=1)
    """First line of the quote, 1-based."""
    end_line: int = Field(ge=1)
    """Last line of the quote, inclusive."""


class Answer(_Model):
    """The judge's answer on one property."""

    evidence: list[Quote]
    """Quotes that support the verdict (at least one for ``met``; checked against the file)."""
    reasoning: str
    """Why the evidence supports the verdict."""
    verdict: JudgeVerdict
    """``met``, ``not_met`` or ``not_applicable``."""


class BatchItem(Answer):
    """The judge's answer on one property of a batch."""

    property_id: str
    """The property answered."""


def _quote_schema() -> dict[str, Any]:
    return {"type": "object", "additionalProperties": False, "required": ["quote", "start_line", "end_line"],
            "properties": {"quote": {"type": "string"}, "start_line": {"type": "integer"},
                           "end_line": {"type": "integer"}}}


def _answer_props() -> dict[str, Any]:
    return {"evidence": {"type": "array", "items": _quote_schema()},
            "reasoning": {"type": "string"},
            "verdict": {"type": "string", "enum": list(JUDGE_VERDICTS)}}


def answer_schema(property_ids: list[str] | None = None) -> dict[str, Any]:
    """The JSON Schema of an answer: one property (``property_ids`` None) or a batch over ``property_ids``.

    Written by hand rather than generated so that it stays inside what strict structured-output modes accept
    (every key required, no additional properties, no numeric bounds).
    """
    if property_ids is None:
        return {"type": "object", "additionalProperties": False, "required": ["evidence", "reasoning", "verdict"],
                "properties": _answer_props()}
    item = {"type": "object", "additionalProperties": False,
            "required": ["property_id", "evidence", "reasoning", "verdict"],
            "properties": {"property_id": {"type": "string", "enum": list(property_ids)}, **_answer_props()}}
    return {"type": "object", "additionalProperties": False, "required": ["answers"],
            "properties": {"answers": {"type": "array", "items": item}}}


def response_format(property_ids: list[str] | None = None) -> dict[str, Any]:
    """The ``response_format`` argument of a chat completion that asks for :func:`answer_schema`."""
    name = "property_verdict" if property_ids is None else "property_verdicts"
    return {"type": "json_schema", "json_schema": {"name": name, "strict": True,
                                                   "schema": answer_schema(property_ids)}}


_FENCE = re.compile(r"```(?:json|JSON)?\s*\n?(.*?)```", re.DOTALL)


def extract_json(content: str) -> Any:
    """The JSON object in ``content``: the whole reply, a fenced block, or the span from the first ``{`` to the
    last ``}`` (models that ignore "JSON only" still tend to produce one of these)."""
    text = content.strip()
    candidates = [text]
    candidates += [m.group(1).strip() for m in _FENCE.finditer(text)]
    if "{" in text and "}" in text:
        candidates.append(text[text.index("{"): text.rindex("}") + 1])
    last: json.JSONDecodeError | None = None
    for cand in candidates:
        try:
            return json.loads(cand)
        except json.JSONDecodeError as exc:
            last = exc
    raise AnswerError(f"the reply is not valid JSON ({last.msg if last else 'empty'} at char "
                      f"{last.pos if last else 0})")


def _normalize_verdict(obj: Any) -> None:
    # "Met", "not met", "not-applicable": the meaning is unambiguous, so spare the re-ask.
    if isinstance(obj, dict) and isinstance(obj.get("verdict"), str):
        v = re.sub(r"[\s\-]+", "_", obj["verdict"].strip().lower())
        if v in JUDGE_VERDICTS:
            obj["verdict"] = v


def _describe(exc: ValidationError) -> str:
    parts = []
    for err in exc.errors()[:4]:
        loc = ".".join(str(x) for x in err.get("loc", ())) or "(top level)"
        parts.append(f"{loc}: {err.get('msg', 'invalid')}")
    more = len(exc.errors()) - 4
    return "; ".join(parts) + (f"; and {more} more" if more > 0 else "")


def parse_answers(content: str | None, property_ids: list[str], *, batch: bool,
                  finish_reason: str | None = None) -> dict[str, Answer]:
    """Validate a reply into one :class:`Answer` per property id.

    Args:
        content: the message content of the reply.
        property_ids: the properties asked about (one, unless ``batch``).
        batch: the reply is a batch (``{"answers": [...]}``) rather than one answer.
        finish_reason: the completion's finish reason; ``length`` means the reply was cut off.

    Raises:
        AnswerError: with a short description of what is wrong.
    """
    if finish_reason == "length":
        raise AnswerError("the reply was cut off at the token limit; answer more briefly")
    if content is None or not content.strip():
        raise AnswerError("the reply is empty")
    data = extract_json(content)
    if not isinstance(data, dict):
        raise AnswerError(f"expected a JSON object, got a JSON {type(data).__name__}")
    if not batch:
        _normalize_verdict(data)
        try:
            return {property_ids[0]: Answer.model_validate(data)}
        except ValidationError as exc:
            raise AnswerError(f"the JSON does not match the schema: {_describe(exc)}") from None
    items = data.get("answers")
    if not isinstance(items, list):
        raise AnswerError("expected a key 'answers' holding a list with one answer per property")
    for item in items:
        _normalize_verdict(item)
    try:
        parsed = [BatchItem.model_validate(item) for item in items]
    except ValidationError as exc:
        raise AnswerError(f"the JSON does not match the schema: {_describe(exc)}") from None
    out: dict[str, Answer] = {}
    for item in parsed:
        if item.property_id not in property_ids:
            raise AnswerError(f"'answers' names {item.property_id!r}, which was not asked about")
        if item.property_id in out:
            raise AnswerError(f"'answers' holds {item.property_id!r} twice")
        out[item.property_id] = Answer(evidence=item.evidence, reasoning=item.reasoning, verdict=item.verdict)
    missing = [p for p in property_ids if p not in out]
    if missing:
        raise AnswerError(f"'answers' lacks the properties {missing}")
    return out
