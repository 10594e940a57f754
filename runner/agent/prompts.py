"""The words an agent reads. Identical in every arm except for the task text, which ``render_task`` renders with
the arm's guidance levels (exactly as ``d2kgrade tasks show --guidance ...``).

The conversation of an episode:

1. system: :func:`system_prompt` (role, workspace, tools, budgets; the text-fallback protocol in text mode);
2. user: the rendered task, the hardware section (:func:`hardware_section`), then :data:`DESIGN_REQUEST`
   (:data:`PROPOSE_REQUEST` in the ``propose`` arm);
3. assistant: the design note (no tools are offered for this turn; the note is kept as ``design_note.md``);
4. user: :data:`START_CODING`; then tool turns until the agent replies without a tool call after submitting.
"""

from __future__ import annotations

import json
from typing import Any

# Datasheet ceilings (dense, no sparsity) of GPUs the study runs on; measured ceilings are the evaluator's.
# Keys are matched as substrings of torch.cuda.get_device_name(), most specific first.
GPU_CEILINGS: list[tuple[str, dict[str, Any]]] = [
    ("H200", {"SMs": 132, "HBM bandwidth": "4.8 TB/s", "BF16 tensor": "989 TFLOP/s", "FP32": "67 TFLOP/s",
              "L2": "50 MB", "shared memory per SM": "228 KB"}),
    ("H100 PCIe", {"SMs": 114, "HBM bandwidth": "2.0 TB/s", "BF16 tensor": "756 TFLOP/s", "FP32": "51 TFLOP/s",
                   "L2": "50 MB", "shared memory per SM": "228 KB"}),
    ("H100", {"SMs": 132, "HBM bandwidth": "3.35 TB/s", "BF16 tensor": "989 TFLOP/s", "FP32": "67 TFLOP/s",
              "L2": "50 MB", "shared memory per SM": "228 KB"}),
    ("A100", {"SMs": 108, "HBM bandwidth": "2.0 TB/s", "BF16 tensor": "312 TFLOP/s", "FP32": "19.5 TFLOP/s",
              "L2": "40 MB", "shared memory per SM": "164 KB"}),
    ("L40S", {"SMs": 142, "GDDR bandwidth": "864 GB/s", "BF16 tensor": "362 TFLOP/s", "FP32": "91.6 TFLOP/s",
              "L2": "96 MB", "shared memory per SM": "100 KB"}),
]


def gpu_ceilings(gpu_name: str | None) -> dict[str, Any] | None:
    """Datasheet ceilings of a GPU, or None when unknown."""
    if not gpu_name:
        return None
    for key, ceilings in GPU_CEILINGS:
        if key.lower() in gpu_name.lower():
            return ceilings
    return None


def hardware_section(hardware: dict[str, Any]) -> str:
    """``## Hardware``: the GPU and its ceilings when known, or the CPU-interpreter note."""
    if hardware.get("device") != "cuda":
        return ("## Hardware\n\nThis run has no GPU: kernels are evaluated on CPU under the Triton interpreter "
                "(`TRITON_INTERPRET=1`) on the small `smoke` workload, for correctness only; `benchmark` reports that "
                "timing is unavailable, and `profile` and `sanitize` are unavailable. Write the kernel you would run "
                "on a GPU.\n")
    lines = ["## Hardware", "", f"GPU: {hardware.get('gpu') or 'unknown NVIDIA GPU'}."]
    ceilings = hardware.get("ceilings")
    if ceilings:
        lines += ["", "Ceilings (datasheet, dense): " + "; ".join(f"{k} {v}" for k, v in ceilings.items()) + "."]
    return "\n".join(lines) + "\n"


DESIGN_REQUEST = """## First: your design

Before writing any code, state your design as a short note in prose: the algorithm; how the work is split across \
programs (or thread blocks) and what one program computes; what data stays on chip and what moves to and from \
memory, with the bytes per element; the block sizes or tiling you intend and why; the low-level techniques you \
plan; and what you expect to limit performance. Reply with the design note only: no tool calls and no full code \
yet (you get the tools in the next turn)."""

PROPOSE_REQUEST = """## Your task: a design

State the design you would implement, as a note in prose: the algorithm; how the work is split across programs \
(or thread blocks) and what one program computes; what data stays on chip and what moves to and from memory, \
with the bytes per element; the block sizes or tiling you would use and why; the low-level techniques you would \
apply; and what you expect to limit performance. This episode asks only for the design: reply with the note, \
no code."""

START_CODING = """Now implement your design. Write `kernel.py` with `write_file`, check it with `test`, measure it \
with `benchmark` (and `profile` and `sanitize` where available), improve it, and `submit` it. You may submit again after further \
improvements; the last submission counts. When you are done, reply without a tool call."""

NUDGE = ("Your reply called no tool. Use the tools to write, test and submit `kernel.py`; reply without a tool "
         "call only once you have submitted and are done.")

EMPTY_DESIGN = "Your reply was empty. Please state your design note in prose (no code, no tool calls)."


def system_prompt(*, max_turns: int, max_wall_min: float | None, max_tokens: int | None, tool_mode: str,
                  tools: list[dict[str, Any]]) -> str:
    """The system message, the same in every arm."""
    budget = [f"at most {max_turns} model turns"]
    if max_wall_min:
        budget.append(f"{max_wall_min:g} minutes of wall-clock time")
    if max_tokens:
        budget.append(f"{max_tokens} tokens (prompt plus completion, summed over turns)")
    text = f"""You are an expert GPU kernel engineer. You write one self-contained Python file, `kernel.py`, that \
defines `kernel(...)` exactly as the task specifies, implemented with Triton (or with CUDA C++ loaded through \
`torch.utils.cpp_extension.load_inline`). Your own kernels must do the work: calling the task's PyTorch operator \
or a library that computes it is rejected.

You work in a private workspace through tools: `write_file`, `read_file`, `list_files`, `test` (correctness on \
chosen workloads, with where the first mismatch is and the error sizes), `benchmark` (time against PyTorch eager \
and torch.compile, fraction of the roofline), `profile` (Nsight Compute summary, where available), `sanitize` \
(NVIDIA compute-sanitizer: memcheck for out-of-bounds accesses, racecheck for shared-memory races, where available) \
and `submit`. \
Your submission is checked on every listed workload and on a hidden one of a size you are not told, with several \
input draws; outputs must be within the task's tolerances everywhere.

Budget: {", ".join(budget)}. Old tool outputs are shortened to their first line as the conversation grows; call \
a tool again to see its full output. Near the end of the budget, submit your best correct kernel: an episode \
without a submission scores nothing."""
    if tool_mode == "text":
        text += "\n\n" + text_tool_instructions(tools)
    return text


def text_tool_instructions(tools: list[dict[str, Any]]) -> str:
    """The text-fallback protocol and the tool list, for servers without function calling."""
    lines = ["## Calling tools", "",
             "Call a tool by writing a fenced block with the info string `tool` that holds one JSON object with "
             "`name` and `arguments`, for example:", "",
             "```tool",
             json.dumps({"name": "write_file", "arguments": {"path": "kernel.py", "content": "import triton\n..."}}),
             "```", "",
             "Several blocks in one reply are run in order. Each result comes back in a message that starts with "
             "`[tool result: NAME (call ID)]`. The tools and their JSON Schema arguments:", ""]
    for t in tools:
        f = t["function"]
        lines.append(f"- `{f['name']}`: {f['description']} Arguments: `{json.dumps(f['parameters'])}`")
    return "\n".join(lines)
