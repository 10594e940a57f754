"""The LLM episode: design note, then tool turns, until the agent stops, a budget runs out, or the API fails.

Endings (the episode's ``status``):

- ``finished``: the agent replied without a tool call after submitting (or, in the ``propose`` arm, gave its
  design note);
- ``no_submission``: the agent replied :data:`MAX_NUDGES` times in a row without a tool call and never submitted;
- ``budget_exhausted``: the turn, wall-clock or token budget ran out (the last submission, if any, still counts);
- ``api_failed``: the API gave no answer after retries, or a non-retryable error (a resume runs it again;
  ``score`` leaves it out and counts it).

Malformed tool arguments, unknown tools and refused paths are tool results the agent reads, not endings.

**What was sent.** Every request is recorded in the transcript before it goes out, as a ``request`` event: the
sampling parameters, whether tools were offered, and its messages as a delta of the previous request (``keep``:
how many leading messages are unchanged, ``messages``: the rest), so :func:`runner.agent.recorder.sent_requests`
rebuilds each request exactly, elisions, merged user messages and the text-tool fallback's instructions included.
The tool specs are recorded once (``tools`` event).
"""

from __future__ import annotations

import math
import os
import time
from pathlib import Path
from typing import Any

from d2kgrade.runstore import now_iso
from d2kgrade.schema import render_task
from runner.agent.context import Conversation, Entry
from runner.agent.episode import EpisodeEnv, EpisodeSpec, Final, Tally, final_evaluation, finish
from runner.agent.evaluation import EvaluatorFault
from runner.agent.llm import ApiFailure, ChatClient, Completion, ToolCall, ToolsUnsupported, parse_text_tool_calls
from runner.agent.prompts import (
    DESIGN_REQUEST,
    EMPTY_DESIGN,
    NUDGE,
    PROPOSE_REQUEST,
    START_CODING,
    hardware_section,
    system_prompt,
    text_tool_instructions,
)
from runner.agent.recorder import EpisodeRecorder
from runner.agent.tools import ToolBox, ToolOutcome, tool_specs
from runner.agent.workspace import Workspace

MAX_NUDGES = 3


class BudgetExhausted(Exception):
    """A budget ran out; the message says which."""


def task_prompt(env: EpisodeEnv, spec: EpisodeSpec) -> str:
    """The first user message: the task as ``tasks show`` renders it for the arm, the hardware, the design ask."""
    ask = PROPOSE_REQUEST if spec.arm == "propose" else DESIGN_REQUEST
    return render_task(env.task, spec.guidance) + "\n" + hardware_section(env.hardware) + "\n" + ask + "\n"


def sampling_params(cfg: Any, spec: EpisodeSpec) -> dict[str, Any]:
    """``temperature``, ``top_p`` and ``seed`` of every request of the episode (None: left to the server).

    The request seed is ``cfg.sampling_seed`` plus the episode's seed index, so seeds 0..N-1 of a (task, arm)
    sample differently and the paired arms of one seed share it.
    """
    seed = None if cfg.sampling_seed is None else cfg.sampling_seed + spec.seed
    return {"temperature": cfg.temperature, "top_p": cfg.top_p, "seed": seed}


def api_key_from_env() -> str | None:
    """``D2KGRADE_API_KEY``, else ``OPENAI_API_KEY``."""
    return os.environ.get("D2KGRADE_API_KEY") or os.environ.get("OPENAI_API_KEY")


class LlmEpisode:
    """State of one LLM episode."""

    def __init__(self, spec: EpisodeSpec, env: EpisodeEnv, rec: EpisodeRecorder, tally: Tally) -> None:
        self.spec, self.env, self.rec, self.tally = spec, env, rec, tally
        cfg = env.config
        self.cfg = cfg
        factory = env.chat_client_factory or ChatClient
        self.sampling = sampling_params(cfg, spec)
        self.client = factory(model=spec.model or "", base_url=cfg.base_url, api_key=env.api_key or "",
                              timeout_s=cfg.request_timeout_s, retries=cfg.api_retries, backoff_s=cfg.backoff_s,
                              backoff_max_s=cfg.backoff_max_s, max_output_tokens=cfg.max_output_tokens,
                              cancel=env.cancel, **self.sampling)
        self.tool_mode = "text" if cfg.tool_mode == "text" else "native"
        self.specs = tool_specs()
        self.conv = Conversation()
        self.workspace = Workspace(env.workspace_dir)
        runner_dir = Path(__file__).resolve().parents[1]
        self.tools = ToolBox(env.task, self.workspace, env.evaluator, rec, output_limit=cfg.max_tool_output_chars,
                             eval_timeout_s=cfg.eval_timeout_s,
                             scrub_paths=[env.suite_root.resolve(), runner_dir, runner_dir.parent])
        self.warned = False
        self._sent: list[dict[str, Any]] = []

    def record_request(self, turn: int, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None) -> None:
        """The request about to be sent, as a delta of the previous one (see the module docstring)."""
        keep = 0
        for old, new in zip(self._sent, messages):
            if old != new:
                break
            keep += 1
        self.rec.transcript({"event": "request", "turn": turn, "tool_mode": self.tool_mode, "tools": bool(tools),
                             "params": {"model": self.spec.model, **{k: v for k, v in self.sampling.items()
                                                                     if v is not None},
                                        **({"max_tokens": self.cfg.max_output_tokens}
                                           if self.cfg.max_output_tokens is not None else {})},
                             "n_messages": len(messages), "keep": keep, "messages": messages[keep:]})
        self._sent = [dict(m) for m in messages]

    # ------------------------------------------------------------------ budgets

    def check_budget(self) -> None:
        cfg, t = self.cfg, self.tally
        if t.turns >= cfg.max_turns:
            raise BudgetExhausted(f"turn budget of {cfg.max_turns} model calls used")
        if cfg.max_tokens is not None and t.tokens_in + t.tokens_out >= cfg.max_tokens:
            raise BudgetExhausted(f"token budget of {cfg.max_tokens} used ({t.tokens_in} in + {t.tokens_out} out)")
        if cfg.max_wall_min is not None and t.wall_s() >= cfg.max_wall_min * 60:
            raise BudgetExhausted(f"wall-clock budget of {cfg.max_wall_min:g} min used")

    def budget_note(self) -> str | None:
        left = self.cfg.max_turns - self.tally.turns
        if self.warned or left > max(3, self.cfg.max_turns // 20):
            return None
        self.warned = True
        return (f"[budget: {left} model turn(s) left. Submit your best correct kernel now if you have not; the last "
                "submission counts.]")

    # ------------------------------------------------------------------ model calls

    def _cost(self, c: Completion) -> float:
        pin, pout = self.cfg.price_in_per_mtok, self.cfg.price_out_per_mtok
        if pin is None and pout is None:
            return math.nan
        return (c.tokens_in * (pin or 0.0) + c.tokens_out * (pout or 0.0)) / 1e6

    def call(self, *, offer_tools: bool) -> Completion:
        """One model call (a turn), recorded. Falls back to text tool calls when the server refuses tools."""
        self.check_budget()
        while True:
            messages, n_elided, _ = self.conv.view(keep_recent=self.cfg.keep_recent_results,
                                                   max_chars=self.cfg.max_context_chars)
            tools = self.specs if offer_tools and self.tool_mode == "native" else None
            started_at, t0 = now_iso(), time.monotonic()
            self.tally.turns += 1
            turn = self.tally.turns
            row: dict[str, Any] = {"turn": turn, "started_at": started_at, "tool_mode": self.tool_mode,
                                   "context_chars": sum(len(str(m.get("content") or "")) for m in messages),
                                   "elided_results": n_elided, "tokens_in": 0, "tokens_out": 0, "n_tool_calls": 0,
                                   "content_chars": 0, "api_attempts": 0}
            self.record_request(turn, messages, tools)
            try:
                c = self.client.complete(messages, tools)
            except ToolsUnsupported as exc:
                self._record_failed_turn(row, t0, exc)
                if self.cfg.tool_mode != "auto":
                    raise
                self.tool_mode = "text"
                note = ("This server does not accept function calling, so call tools with text blocks instead.\n\n"
                        + text_tool_instructions(self.specs))
                self.rec.transcript({"event": "tool_mode", "mode": "text", "reason": str(exc), "turn": turn})
                self.add(Entry("user", note, kind="pinned"))
                self.check_budget()
                continue
            except ApiFailure as exc:
                self._record_failed_turn(row, t0, exc)
                raise
            cost = self._cost(c)
            self.tally.tokens_in += c.tokens_in
            self.tally.tokens_out += c.tokens_out
            self.tally.add_cost(cost)
            row.update(wall_s=time.monotonic() - t0, tokens_in=c.tokens_in, tokens_out=c.tokens_out, cost_usd=cost,
                       finish_reason=c.finish_reason, n_tool_calls=len(c.tool_calls), api_attempts=c.attempts,
                       content_chars=len(c.content), error=None if c.usage_known else "usage missing")
            self.rec.turn(row)
            return c

    def _record_failed_turn(self, row: dict[str, Any], t0: float, exc: ApiFailure) -> None:
        row.update(wall_s=time.monotonic() - t0, api_attempts=exc.attempts, error=str(exc)[:2000])
        self.rec.turn(row)
        self.rec.transcript({"event": "api_error", "turn": row["turn"], "error": str(exc)})

    # ------------------------------------------------------------------ the episode

    def add(self, entry: Entry, **extra: Any) -> None:
        self.conv.add(entry)
        msg = Conversation.render(entry)
        self.rec.transcript({"turn": self.tally.turns, **msg, **extra})

    def design(self) -> str:
        """The design turn (no tools offered); asks once more if the note is empty."""
        note = ""
        for _ in range(2):
            c = self.call(offer_tools=False)
            self.add(Entry("assistant", c.content, kind="pinned"))
            note = c.content.strip()
            if note:
                break
            self.add(Entry("user", EMPTY_DESIGN, kind="pinned"))
        return note

    def tool_turns(self) -> tuple[str, str]:
        """Tool turns until the agent is done; returns ``(status, message)``."""
        nudges = 0
        while True:
            c = self.call(offer_tools=True)
            calls: list[ToolCall] = list(c.tool_calls)
            prose = c.content
            if not calls:
                calls, prose = parse_text_tool_calls(c.content, start_index=self.tally.tool_calls)
                if not calls:
                    prose = c.content
            self.add(Entry("assistant", prose, calls=calls), finish_reason=c.finish_reason)
            if not calls:
                if self.tools.submission is not None:
                    return "finished", "the agent ended the episode after submitting"
                nudges += 1
                if nudges >= MAX_NUDGES:
                    return "no_submission", f"the agent replied {nudges} times in a row without calling a tool"
                self.add(Entry("user", NUDGE))
                continue
            nudges = 0
            for i, call in enumerate(calls):
                self.check_budget_wall()
                out = self.run_call(call)
                self.tally.tool_calls += 1
                self.rec.tool_call({"turn": self.tally.turns, "idx": i, "call_id": call.id, "name": call.name,
                                    "arguments": _trim_args(call.arguments), "ok": out.ok, "error": out.error,
                                    "output_chars": len(out.text), "wall_s": out.wall_s,
                                    "kernel_version": out.kernel_version, "eval_id": out.eval_id})
                self.add(Entry("tool" if call.source == "native" else "user", out.text, tool_call_id=call.id,
                               tool_name=call.name, native=call.source == "native"), ok=out.ok)
            self.tally.submissions = self.tools.submissions
            note = self.budget_note()
            if note:
                self.add(Entry("user", note))

    def check_budget_wall(self) -> None:
        cfg = self.cfg
        if cfg.max_wall_min is not None and self.tally.wall_s() >= cfg.max_wall_min * 60:
            raise BudgetExhausted(f"wall-clock budget of {cfg.max_wall_min:g} min used")

    def run_call(self, call: ToolCall) -> ToolOutcome:
        if call.name == "(unparsable)":
            msg = f"tool block not understood: {call.arguments}"
            return ToolOutcome(f"error: {msg}", ok=False, error=msg)
        return self.tools.run(call.name, call.arguments, turn=self.tally.turns)


def _trim_args(args: Any, limit: int = 2000) -> str:
    import json

    text = args if isinstance(args, str) else json.dumps(args, ensure_ascii=False)
    return text if len(text) <= limit else text[:limit] + f"... <{len(text) - limit} more characters>"


def run_llm_episode(spec: EpisodeSpec, env: EpisodeEnv, rec: EpisodeRecorder, tally: Tally) -> dict[str, Any]:
    """Run an LLM episode end to end and write it."""
    ep = LlmEpisode(spec, env, rec, tally)
    cfg = env.config
    rec.transcript({"event": "tools", "tools": ep.specs, "sampling": ep.sampling})
    ep.add(Entry("system", system_prompt(max_turns=cfg.max_turns, max_wall_min=cfg.max_wall_min,
                                         max_tokens=cfg.max_tokens, tool_mode=ep.tool_mode, tools=ep.specs),
                 kind="pinned"))
    ep.add(Entry("user", task_prompt(env, spec), kind="pinned"))
    status, message, design_path = "failed", "", None
    try:
        note = ep.design()
        if note:
            design_path = rec.save_file("design_note.md", note + "\n")
        if spec.arm == "propose":
            status, message = ("finished", "design note given") if note else ("no_submission", "empty design note")
        else:
            ep.add(Entry("user", START_CODING, kind="pinned"))
            status, message = ep.tool_turns()
    except BudgetExhausted as exc:
        status, message = "budget_exhausted", str(exc)
    except ApiFailure as exc:
        status, message = "api_failed", f"API: {exc}"
    tally.submissions = ep.tools.submissions
    final, kernel_path = Final(), None
    sub = ep.tools.submission
    if sub is not None:
        kernel_path = ep.tools.version_files.get(sub.version)
        try:
            final = final_evaluation(env, spec, source=sub.source, filename=sub.path, version=sub.version,
                                     eval_id=ep.tools.next_eval_id(), turn=tally.turns)
        except EvaluatorFault as exc:
            status, message = "failed", f"final evaluation: evaluator fault: {exc}"
    if sub is not None and final.evaluation is not None and not final.correct:
        message += f"; final evaluation: {final.status}: {final.message}"
    rec.transcript({"event": "end", "status": status, "message": message, "final_status": final.status,
                    "correct": final.correct})
    return finish(env, spec, rec, tally, status=status, final=final, message=message,
                  design_note_path=design_path, kernel_path=kernel_path)
