"""The context policy of long episodes, and the text-fallback parser."""

from __future__ import annotations

import json

from runner.agent.context import ELIDED_RESULT, Conversation, Entry
from runner.agent.llm import ToolCall, parse_text_tool_calls


def _long_conversation(n_turns: int, *, native: bool = True, size: int = 5000) -> Conversation:
    conv = Conversation()
    conv.add(Entry("system", "SYSTEM", kind="pinned"))
    conv.add(Entry("user", "TASK", kind="pinned"))
    conv.add(Entry("assistant", "DESIGN NOTE", kind="pinned"))
    conv.add(Entry("user", "GO", kind="pinned"))
    for i in range(n_turns):
        src = "native" if native else "text"
        call = ToolCall(f"c{i}", "write_file", json.dumps({"path": "kernel.py", "content": f"# v{i}\n" + "x" * size}),
                        src)
        conv.add(Entry("assistant", f"turn {i}", calls=[call]))
        conv.add(Entry("tool" if native else "user", f"wrote kernel.py (turn {i})\n" + "y" * size,
                       tool_call_id=f"c{i}", tool_name="write_file", native=native))
    return conv


def _valid_native(messages: list[dict]) -> bool:
    """Every tool message answers a call of the assistant message just before its run of tool messages."""
    open_ids: set[str] = set()
    for m in messages:
        if m["role"] == "assistant":
            open_ids = {c["id"] for c in m.get("tool_calls", [])}
        elif m["role"] == "tool":
            if m["tool_call_id"] not in open_ids:
                return False
        else:
            open_ids = set()
    return True


def test_old_results_are_elided_to_their_first_line_and_recent_ones_kept():
    conv = _long_conversation(30)
    msgs, n_elided, dropped = conv.view(keep_recent=8, max_chars=10_000_000)
    assert (n_elided, dropped) == (22, 0)
    tools = [m for m in msgs if m["role"] == "tool"]
    assert tools[0]["content"] == f"wrote kernel.py (turn 0)\n{ELIDED_RESULT}"
    assert all(len(t["content"]) > 5000 for t in tools[-8:])
    # the agent's own old file contents are elided too, and the arguments stay valid JSON
    first_call = json.loads(msgs[4]["tool_calls"][0]["function"]["arguments"])
    assert first_call["path"] == "kernel.py" and "elided" in first_call["content"]
    last_call = json.loads(msgs[-2]["tool_calls"][0]["function"]["arguments"])
    assert last_call["content"].startswith("# v29")
    assert [m["content"] for m in msgs[:4]] == ["SYSTEM", "TASK", "DESIGN NOTE", "GO"]
    assert _valid_native(msgs)
    # the full conversation (the transcript's view) is untouched
    assert sum(len(m["content"] or "") for m in conv.full()) > 30 * 5000


def test_a_350_turn_episode_fits_the_budget_by_dropping_whole_old_turns():
    conv = _long_conversation(350, size=3000)
    msgs, n_elided, dropped = conv.view(keep_recent=8, max_chars=60_000)
    size = sum(len(json.dumps(m)) for m in msgs)
    assert size <= 60_000 and dropped > 0 and n_elided == 342
    assert [m["content"] for m in msgs[:3]] == ["SYSTEM", "TASK", "DESIGN NOTE"]
    assert msgs[3]["role"] == "user" and msgs[3]["content"].startswith("GO\n\n[")
    assert f"[{dropped} earlier turn(s) were dropped" in msgs[3]["content"] and msgs[4]["role"] == "assistant"
    assert msgs[-1]["role"] == "tool" and "turn 349" in msgs[-1]["content"]
    assert _valid_native(msgs)


def test_text_mode_results_are_merged_user_messages_and_calls_rerendered():
    conv = _long_conversation(12, native=False)
    msgs, n_elided, _ = conv.view(keep_recent=2, max_chars=10_000_000)
    assert n_elided == 10
    roles = [m["role"] for m in msgs]
    assert all(a != b or a != "user" for a, b in zip(roles, roles[1:], strict=False))  # no two user messages in a row
    assert "```tool" in msgs[4]["content"] and "elided" in msgs[4]["content"]
    calls, prose = parse_text_tool_calls(msgs[-2]["content"])
    assert prose == "turn 11" and calls[0].name == "write_file" and calls[0].arguments["content"].startswith("# v11")


def test_text_tool_block_parsing():
    text = ("Plan.\n```tool\n{\"name\": \"test\", \"arguments\": {\"workloads\": [\"smoke\"]}}\n```\n"
            "```tool\n{\"name\": \"submit\"\n```\n```python\nprint('not a tool')\n```\n"
            "```tool\n[1, 2]\n```")
    calls, prose = parse_text_tool_calls(text)
    assert [c.name for c in calls] == ["test", "(unparsable)", "(unparsable)"]
    assert calls[0].arguments == {"workloads": ["smoke"]}
    assert "not valid JSON" in calls[1].arguments and "name" in calls[2].arguments
    assert "print('not a tool')" in prose and "```tool" not in prose
