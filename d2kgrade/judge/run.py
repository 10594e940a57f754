"""One judge run: files in, one :class:`FileResult` per file out (static, LLM and combined grades).

Work is split into units (a property, or a level's properties with ``batch="level"``, times K samples). Cached
units are answered at once; units that make the same request as one already queued (the same code in two
episodes: requests are blind to where a file comes from) wait for that one's answer; the rest go to a thread pool
of ``concurrency`` workers. Each answer is committed to
the cache as it arrives, and each file's grades are appended to ``out`` (JSONL, one FileGrade per line, flushed
and fsynced) as soon as its last unit is in, so an interrupted run keeps everything it judged: run it again and
the cached answers cost nothing.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from d2kgrade.errors import UserError
from d2kgrade.grades import FileGrade, PropertyGrade, file_grade
from d2kgrade.judge.answer import Answer, AnswerError, parse_answers, response_format
from d2kgrade.judge.cache import JudgeCache, cache_key, text_hash
from d2kgrade.judge.client import ChatClient, RequestFailed
from d2kgrade.judge.evidence import Document
from d2kgrade.judge.fusion import FUSION_RULE_VERSION, fuse_file
from d2kgrade.judge.prompts import (
    TEMPLATE_VERSION,
    Kind,
    build_prompt,
    facts_to_text,
    normalize_document,
    reask_message,
    template_hash,
)
from d2kgrade.judge.settings import JudgeConfig
from d2kgrade.judge.usage import PriceTable, Usage, UsageReport
from d2kgrade.judge.vote import SampleVerdict, failed_sample, llm_property_grade, sample_verdict
from d2kgrade.schema import LEVELS, Property, Rubric, Task

log = logging.getLogger(__name__)
Mode = Literal["llm", "combined"]
StaticGrader = Callable[..., FileGrade]
FactsExtractor = Callable[[Any], Any]
MAX_RAW_CHARS = 4000


@dataclass(frozen=True)
class JudgeItem:
    """One file to judge."""

    path: Path
    """Where it is."""
    kind: Kind = "code"
    """A kernel (``code``) or a design note (``proposal``)."""
    item: str = ""
    """Id of the graded item (an episode id), carried into the grades."""
    display: str = ""
    """The path as recorded in grades (default: ``str(path)``)."""


@dataclass
class FileResult:
    """All grades of one file."""

    item: JudgeItem
    """What was judged."""
    llm: FileGrade
    """The judge's grades."""
    static: FileGrade | None = None
    """Static analysis' grades (code in combined mode)."""
    combined: FileGrade | None = None
    """The fused grades (combined mode)."""

    def grades(self) -> list[FileGrade]:
        """The FileGrades that exist, static first."""
        return [g for g in (self.static, self.llm, self.combined) if g is not None]

    def to_json(self) -> dict[str, Any]:
        """Per property the static, judge and combined verdicts with their evidence; plus the three FileGrades."""
        by = {name: ({g.property_id: g for g in fg.properties} if fg else {})
              for name, fg in (("static", self.static), ("judge", self.llm), ("combined", self.combined))}

        def side(g: PropertyGrade | None) -> dict[str, Any] | None:
            if g is None:
                return None
            out = {"verdict": g.verdict, "confidence": g.confidence, "reason": g.reason,
                   "evidence": [e.model_dump() for e in g.evidence]}
            for k in ("unstable", "votes", "flags", "agreement", "winner"):
                if k in g.details:
                    out[k] = g.details[k]
            return out

        props = [{"id": g.property_id, "level": g.level, "static": side(by["static"].get(g.property_id)),
                  "judge": side(g), "combined": side(by["combined"].get(g.property_id))}
                 for g in self.llm.properties]
        return {"file": self.llm.file, "item": self.llm.item, "kind": self.llm.kind, "task": self.llm.task,
                "scores": {"static": self.static.score if self.static else None, "judge": self.llm.score,
                           "combined": self.combined.score if self.combined else None},
                "error": self.llm.error, "properties": props,
                "grades": {k: (fg.model_dump(mode="json") if fg else None)
                           for k, fg in (("static", self.static), ("llm", self.llm), ("combined", self.combined))}}


@dataclass
class JudgeRun:
    """The outcome of :func:`judge_files`."""

    results: list[FileResult]
    """One per item, in input order."""
    usage: UsageReport
    """Requests, cache hits, tokens, cost."""
    config: dict[str, Any] = field(default_factory=dict)
    """The settings used (no key)."""

    def to_json(self) -> dict[str, Any]:
        """Everything as data, for ``--json``."""
        return {"judge": self.config, "template_version": TEMPLATE_VERSION, "template_hash": template_hash(),
                "fusion_rule_version": FUSION_RULE_VERSION, "usage": self.usage.model_dump(),
                "results": [r.to_json() for r in self.results]}


def open_jsonl_for_append(path: Path) -> Any:
    """Open a JSONL file for appending; a last line cut short by a killed run is ended first, so the next
    record starts on its own line (readers skip the one broken line, not the good one after it)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.is_file() and path.stat().st_size:
        with open(path, "rb") as fh:
            fh.seek(-1, os.SEEK_END)
            cut = fh.read(1) != b"\n"
    else:
        cut = False
    fh = open(path, "a", encoding="utf-8")
    if cut:
        fh.write("\n")
    return fh


def static_backend() -> tuple[StaticGrader | None, FactsExtractor | None]:
    """``d2kgrade.static.grade_file`` and ``extract_facts`` where this build has them (None otherwise)."""
    try:
        from d2kgrade import static as st
    except ImportError:
        return None, None
    return getattr(st, "grade_file", None), getattr(st, "extract_facts", None)


def read_document(path: Path, limit: int) -> tuple[str | None, str]:
    """(normalized text, '') or (None, why it cannot be judged). Only regular files are read, and never more
    than 4 bytes per allowed character (a FIFO, a device or a huge file is refused before it is read)."""
    from d2kgrade.static.extract import read_source

    data, why = read_source(path, 4 * limit)
    if data is None:
        return None, why
    if b"\x00" in data:
        return None, "binary file (holds NUL bytes)"
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        return None, f"not valid UTF-8 (byte {exc.start})"
    text = normalize_document(text)
    if not text.strip():
        return None, "empty file"
    if len(text) > limit:
        return None, f"{len(text)} characters, more than the judge's limit of {limit}"
    return text, ""


@dataclass
class _Unit:
    doc: int
    props: list[Property]
    sample: int
    key: str


@dataclass
class _Doc:
    item: JudgeItem
    text: str | None
    error: str
    facts_text: str | None = None
    static: FileGrade | None = None
    pending: int = 0
    outcomes: dict[tuple[str, int], dict[str, Any]] = field(default_factory=dict)
    cached: set[tuple[str, int]] = field(default_factory=set)


def _spec_hash(props: list[Property]) -> str:
    blob = json.dumps([[p.id, p.level, p.judge.model_dump()] for p in props], sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def _ask(client: ChatClient, config: JudgeConfig, rubric: Rubric, doc: _Doc, unit: _Unit) -> dict[str, Any]:
    """One sample of one unit: ask, re-ask on invalid answers, return the outcome record (cached as is)."""
    batch = config.batch == "level"
    ids = [p.id for p in unit.props]
    assert doc.text is not None
    prompt = build_prompt(rubric, unit.props, kind=doc.item.kind, document=doc.text, facts_text=doc.facts_text,
                          batch=batch)
    messages = list(prompt.messages)
    seed = None if config.seed is None else config.seed + unit.sample
    fmt = response_format(ids if batch else None)
    problems: list[str] = []
    raw = ""
    for attempt in range(config.max_reasks + 1):
        try:
            reply = client.complete(messages, schema_format=fmt, seed=seed)
        except RequestFailed as exc:
            client.usage.add(failures=1)
            return {"status": "failed", "problems": problems + [str(exc)]}
        raw = reply.content or ""
        try:
            answers = parse_answers(reply.content, ids, batch=batch, finish_reason=reply.finish_reason)
        except AnswerError as exc:
            problems.append(str(exc))
            if attempt < config.max_reasks:
                client.usage.add(reasks=1)
                messages += [{"role": "assistant", "content": raw}, reask_message(str(exc))]
            continue
        return {"status": "ok", "answers": {k: a.model_dump() for k, a in answers.items()},
                "problems": problems, "requests": attempt + 1, "format": client.format_level}
    return {"status": "invalid", "problems": problems, "raw": raw[:MAX_RAW_CHARS],
            "requests": config.max_reasks + 1, "format": client.format_level}


def _samples_for(doc: _Doc, document: Document, prop: Property, unit_of: dict[str, str],
                 samples: int) -> list[SampleVerdict]:
    out: list[SampleVerdict] = []
    for k in range(samples):
        ukey = (unit_of[prop.id], k)
        outcome = doc.outcomes.get(ukey, {"status": "failed", "problems": ["no answer"]})
        cached = ukey in doc.cached
        if outcome["status"] == "ok":
            sv = sample_verdict(Answer.model_validate(outcome["answers"][prop.id]), document, k)
            sv.cached = cached
        elif outcome["status"] == "invalid":
            sv = failed_sample("unparseable", "; ".join(outcome.get("problems", []))[-600:], cached=cached)
        else:
            sv = failed_sample("request_failed", "; ".join(outcome.get("problems", []))[-600:], cached=cached)
        out.append(sv)
    return out


def _unknown_grades(rubric: Rubric, rater: Any, why: str) -> list[PropertyGrade]:
    return [PropertyGrade(property_id=p.id, level=p.level, verdict="unknown", confidence=0.0, rater=rater,
                          reason=why) for p in rubric.properties if not p.deprecated]


def _groups(rubric: Rubric, config: JudgeConfig) -> list[list[Property]]:
    props = [p for p in rubric.properties if not p.deprecated]
    if config.batch == "property":
        return [[p] for p in props]
    return [g for g in ([p for p in props if p.level == lv] for lv in LEVELS) if g]


def judge_files(rubric: Rubric, items: list[JudgeItem], config: JudgeConfig, *, mode: Mode = "llm",
                task: Task | None = None, gating: bool = False, cache: JudgeCache | None = None,
                prices: PriceTable | None = None, out: Path | None = None,
                static_grader: StaticGrader | None = None, facts_extractor: FactsExtractor | None = None,
                use_static_backend: bool = True, static_weight: float = 0.5,
                progress: Callable[[int, int], None] | None = None,
                client: ChatClient | None = None,
                out_filter: Callable[[FileGrade], bool] | None = None) -> JudgeRun:
    """Judge ``items`` against ``rubric``.

    Args:
        rubric: the rubric.
        items: files to judge (kernels and design notes).
        config: the judge's settings (model, samples, concurrency...).
        mode: ``llm`` (the judge alone) or ``combined`` (static + judge, fused; code needs static analysis).
        task: the task, for dependency gating.
        gating: count a property only when what it depends on is present.
        cache: the answer cache (None: no caching).
        prices: price table for the cost.
        out: JSONL file to append each file's FileGrades to as soon as it is done.
        static_grader, facts_extractor: override :func:`static_backend` (tests; other analysers).
        use_static_backend: look up :mod:`d2kgrade.static` when no override is given.
        static_weight: weight of static analysis in the fusion rule.
        progress: called with (units done, units total) after each unit.
        client: an existing client (its usage counters are reported).
        out_filter: write to ``out`` only the grades it accepts (a run directory skips grades it already has).

    Raises:
        UserError: missing files, combined mode without static analysis, a refused key or unknown model.
    """
    if use_static_backend:
        backend_grader, backend_facts = static_backend()
        static_grader = static_grader or backend_grader
        facts_extractor = facts_extractor or backend_facts
    for it in items:
        if not it.path.exists() or it.path.is_dir():
            raise UserError(f"{it.path}: no such file")
    if mode == "combined" and static_grader is None and any(it.kind == "code" for it in items):
        raise UserError("--judge combined needs static analysis (d2kgrade.static.grade_file), which this build "
                        "lacks; use --judge llm")
    if gating and task is None:
        raise UserError("dependency gating needs the task (pass --task, or a rubric whose task is in the suite)")
    usage = client.usage if client is not None else Usage()
    own_client = client is None
    client = client or ChatClient(config, usage)
    groups = _groups(rubric, config)
    base_info = {"model": config.model, "base_url": config.base_url, "samples": config.samples,
                 "template_version": TEMPLATE_VERSION, "template_hash": template_hash(), **config.decoding()}

    docs: list[_Doc] = []
    units: list[_Unit] = []
    for idx, it in enumerate(items):
        text, error = read_document(it.path, config.max_document_chars)
        doc = _Doc(item=it, text=text, error=error)
        if it.kind == "code" and mode == "combined" and static_grader is not None:
            doc.static = static_grader(rubric, it.path, task=task, gating=gating).model_copy(
                update={"item": it.item, "file": it.display or str(it.path)})
        if text is not None and it.kind == "code" and config.facts:
            if facts_extractor is None:
                doc.facts_text = facts_to_text(None)
            else:
                try:
                    doc.facts_text = facts_to_text(facts_extractor(it.path))
                except Exception as exc:  # the facts are optional context: a bug there must not stop judging
                    log.warning("%s: static facts unavailable (%s)", it.path, exc)
                    doc.facts_text = f"(static facts unavailable: {type(exc).__name__})"
        docs.append(doc)
        if text is None:
            continue
        for group in groups:
            for k in range(config.samples):
                key = cache_key({
                    "task": rubric.task, "rubric_version": rubric.version, "properties": [p.id for p in group],
                    "spec": _spec_hash(group), "kind": it.kind, "template": template_hash(),
                    "document": text_hash(text), "facts": text_hash(doc.facts_text or ""), "model": config.model,
                    "base_url": config.base_url or "", "decoding": config.decoding(), "sample": k})
                units.append(_Unit(idx, group, k, key))
                doc.pending += 1

    total, done = len(units), 0
    out_fh = open_jsonl_for_append(out) if out is not None else None
    results: dict[int, FileResult] = {}

    def finish(idx: int) -> None:
        results[idx] = _assemble(rubric, docs[idx], groups, config, mode, task, gating, static_weight, base_info)
        if out_fh is not None:
            for fg in results[idx].grades():
                if out_filter is None or out_filter(fg):
                    out_fh.write(fg.model_dump_json() + "\n")
            out_fh.flush()
            os.fsync(out_fh.fileno())

    def record(unit: _Unit, outcome: dict[str, Any], cached: bool) -> None:
        nonlocal done
        doc = docs[unit.doc]
        ukey = (unit.props[0].id, unit.sample)
        doc.outcomes[ukey] = outcome
        if cached:
            doc.cached.add(ukey)
        doc.pending -= 1
        done += 1
        if progress:
            progress(done, total)
        if doc.pending == 0:
            finish(unit.doc)

    pool = ThreadPoolExecutor(max_workers=config.concurrency, thread_name_prefix="d2k-judge")
    try:
        for idx, doc in enumerate(docs):
            if doc.pending == 0:
                finish(idx)
        todo: dict[Future[dict[str, Any]], list[_Unit]] = {}
        by_key: dict[str, Future[dict[str, Any]]] = {}
        for unit in units:
            hit = cache.get(unit.key) if cache is not None else None
            if hit is not None and hit.get("status") in ("ok", "invalid"):
                usage.add(cache_hits=1)
                record(unit, hit, cached=True)
            elif unit.key in by_key:  # the same request for another file (the same code in another episode)
                todo[by_key[unit.key]].append(unit)
            else:
                fut = pool.submit(_run_unit, client, config, rubric, docs[unit.doc], unit, cache)
                by_key[unit.key] = fut
                todo[fut] = [unit]
        for fut in as_completed(todo):
            first, *same = todo[fut]
            outcome = fut.result()
            record(first, outcome, cached=False)
            for unit in same:  # answered by the one request, as a cache hit would be
                answered = outcome.get("status") in ("ok", "invalid")
                if answered:
                    usage.add(cache_hits=1)
                record(unit, outcome, cached=answered)
    except BaseException:
        # Stop what has not started; answers in flight still land in the cache when they arrive.
        client.stop()
        pool.shutdown(wait=False, cancel_futures=True)
        raise
    else:
        pool.shutdown(wait=True)
        if own_client:
            client.close()
    finally:
        if out_fh is not None:
            out_fh.close()
    return JudgeRun(results=[results[i] for i in range(len(docs))], usage=usage.report(config.model, prices),
                    config={**config.public(), "mode": mode, "gating": gating, "template_hash": template_hash()})


def _run_unit(client: ChatClient, config: JudgeConfig, rubric: Rubric, doc: _Doc, unit: _Unit,
              cache: JudgeCache | None) -> dict[str, Any]:
    outcome = _ask(client, config, rubric, doc, unit)
    if cache is not None and outcome["status"] in ("ok", "invalid"):
        cache.put(unit.key, outcome, model=config.model, unit=",".join(p.id for p in unit.props),
                  sample=unit.sample)
    return outcome


def _assemble(rubric: Rubric, doc: _Doc, groups: list[list[Property]], config: JudgeConfig, mode: Mode,
              task: Task | None, gating: bool, static_weight: float, base_info: dict[str, Any]) -> FileResult:
    it = doc.item
    display = it.display or str(it.path)
    if doc.text is None:
        grades = _unknown_grades(rubric, "llm", f"not judged: {doc.error}")
    else:
        document = Document(display, doc.text)
        unit_of = {p.id: g[0].id for g in groups for p in g}
        grades = [llm_property_grade(p, _samples_for(doc, document, p, unit_of, config.samples))
                  for p in rubric.properties if not p.deprecated]
    llm = file_grade(rubric, display, "llm", grades, kind=it.kind, task=task, gating=gating, error=doc.error,
                     item=it.item).model_copy(update={"rater_info": dict(base_info)})
    result = FileResult(item=it, llm=llm, static=doc.static)
    if mode == "combined":
        result.combined = fuse_file(rubric, doc.static, llm, task=task, gating=gating, static_weight=static_weight)
    return result
