"""The conversation of an episode and the context policy that keeps 350 turns inside a model's context.

The transcript keeps everything in full; only the *request* sent each turn is shortened, by this policy:

1. The opening (system prompt, task prompt, design note, the start message) is always sent in full.
2. The outputs of the last ``keep_recent`` tool calls are sent in full. Older outputs are replaced by their first
   line (every tool's first line is a status summary, e.g. ``test kernel.py (kernel version 3): incorrect ...``)
   followed by ``[output elided ...; call the tool again to see it]``.
3. In turns whose outputs are all elided, ``write_file`` contents in the assistant's own calls are replaced by a
   placeholder (the file itself is in the workspace), and assistant prose over 3000 characters keeps its head
   and tail.
4. If the request is still over ``max_context_chars`` (about 4 characters per token), whole turns (an assistant
   message with its results) are dropped oldest first, and a note after the opening says how many.

Dropping and eliding work on whole turns, so a native ``tool`` message always follows the assistant message that
made its call. Consecutive user messages (text-mode results, notes) are merged into one.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from runner.agent.llm import ToolCall, render_text_call

ELIDED_RESULT = "[output elided by the context policy to save context; call the tool again to see it]"
OLD_PROSE_CHARS = 3000


@dataclass
class Entry:
    """One message of the conversation, with what the policy needs to shorten it."""

    role: str
    content: str
    kind: str = "body"  # "pinned" | "body"
    calls: list[ToolCall] = field(default_factory=list)
    tool_call_id: str | None = None
    tool_name: str | None = None
    native: bool = True  # a native tool message (role "tool") or, in text mode, a user message


def _args_obj(call: ToolCall) -> Any:
    if isinstance(call.arguments, str):
        try:
            return json.loads(call.arguments)
        except json.JSONDecodeError:
            return call.arguments
    return call.arguments


def _elide_call(call: ToolCall) -> ToolCall:
    args = _args_obj(call)
    if isinstance(args, dict) and isinstance(args.get("content"), str) and len(args["content"]) > 200:
        args = {**args, "content": f"<{len(args['content'])} characters elided by the context policy; read_file "
                                   "shows the file as it is now>"}
    elif isinstance(args, str) and len(args) > 500:
        args = args[:300] + f"... <{len(args) - 300} characters elided>"
    else:
        return call
    raw = json.dumps(args, ensure_ascii=False) if call.source == "native" and not isinstance(args, str) else args
    return ToolCall(call.id, call.name, raw, call.source)


class Conversation:
    """The messages of one episode."""

    def __init__(self) -> None:
        self.entries: list[Entry] = []

    def add(self, entry: Entry) -> None:
        self.entries.append(entry)

    # ------------------------------------------------------------------ rendering

    @staticmethod
    def render(e: Entry, *, elide: bool = False) -> dict[str, Any]:
        """One entry as a chat message, shortened when ``elide``."""
        if e.role == "assistant":
            calls = [_elide_call(c) for c in e.calls] if elide else e.calls
            prose = e.content
            if elide and len(prose) > OLD_PROSE_CHARS:
                prose = f"{prose[:1500]}\n[... {len(prose) - 2000} characters elided ...]\n{prose[-500:]}"
            native = [c for c in calls if c.source == "native"]
            text_calls = [c for c in calls if c.source != "native"]
            content = "\n\n".join([prose] * bool(prose) + [render_text_call(c) for c in text_calls])
            msg: dict[str, Any] = {"role": "assistant", "content": content or None}
            if native:
                msg["tool_calls"] = [{"id": c.id, "type": "function", "function": {
                    "name": c.name, "arguments": c.arguments if isinstance(c.arguments, str)
                    else json.dumps(c.arguments, ensure_ascii=False)}} for c in native]
            return msg
        if e.tool_call_id is not None:
            text = e.content
            if elide:
                first = text.splitlines()[0][:300] if text.strip() else ""
                text = f"{first}\n{ELIDED_RESULT}"
            if e.native:
                return {"role": "tool", "tool_call_id": e.tool_call_id, "content": text}
            return {"role": "user", "content": f"[tool result: {e.tool_name} (call {e.tool_call_id})]\n{text}"}
        return {"role": e.role, "content": e.content}

    def full(self) -> list[dict[str, Any]]:
        """Every message in full (what the transcript holds)."""
        return _merge_users([self.render(e) for e in self.entries])

    def view(self, *, keep_recent: int, max_chars: int) -> tuple[list[dict[str, Any]], int, int]:
        """The request to send: ``(messages, results elided, turns dropped)``."""
        pinned = [e for e in self.entries if e.kind == "pinned"]
        body = [e for e in self.entries if e.kind != "pinned"]
        groups: list[list[Entry]] = []
        for e in body:
            if e.role == "assistant" or not groups:
                groups.append([e])
            else:
                groups[-1].append(e)
        result_pos = [(gi, id(e)) for gi, g in enumerate(groups) for e in g if e.tool_call_id is not None]
        kept = {eid for _, eid in result_pos[-keep_recent:]}
        first_kept_group = min((gi for gi, eid in result_pos if eid in kept), default=len(groups))
        n_elided = len(result_pos) - len(kept)
        rendered: list[list[dict[str, Any]]] = []
        for gi, g in enumerate(groups):
            old = gi < first_kept_group and any(e.tool_call_id is not None for e in g)
            rendered.append([self.render(e, elide=(e.tool_call_id is not None and id(e) not in kept)
                                         or (e.role == "assistant" and old)) for e in g])
        head = [self.render(e) for e in pinned]
        dropped = 0

        def size(msgs: list[dict[str, Any]]) -> int:
            return sum(len(json.dumps(m, ensure_ascii=False)) for m in msgs)

        total = size(head) + sum(size(g) for g in rendered)
        while total > max_chars and len(rendered) > 1:
            total -= size(rendered.pop(0))
            dropped += 1
        note = []
        if dropped:
            note = [{"role": "user", "content": f"[{dropped} earlier turn(s) were dropped from this conversation to "
                     "fit the context window; your workspace files are unchanged: list_files and read_file show "
                     "them]"}]
        messages = head + note + [m for g in rendered for m in g]
        return _merge_users(messages), n_elided, dropped


def _merge_users(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for m in messages:
        if out and m["role"] == "user" and out[-1]["role"] == "user":
            out[-1] = {"role": "user", "content": f"{out[-1]['content']}\n\n{m['content']}"}
        else:
            out.append(dict(m))
    return out
