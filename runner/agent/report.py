"""What the agent reads back from ``test``, ``benchmark`` and ``sanitize``: results as compact text.

The first line is always a one-line summary (the context policy keeps only that line of old results). Failure
detail: per output, elements out of tolerance, max abs/rel error, the first mismatching index with the value got
and expected; the evaluator's message and the kernel's log trimmed (head and tail). Paths of the harness are
replaced by ``<harness>`` so the agent learns nothing of where the evaluator or the suite lives.
"""

from __future__ import annotations

import math
import re
import tempfile
from pathlib import Path
from typing import Any

from d2kgrade.records import EvalResult, WorkloadResult

CPU_TIMING_NOTE = ("timing unavailable: kernels are evaluated on CPU under the Triton interpreter here "
                   "(correctness only); speed is measured only on a GPU")


# the private folders submissions are written to (d2kgrade.io.private_tempdir): their names say nothing useful
_TMP_RE = re.compile("(?:/tmp|" + re.escape(tempfile.gettempdir()) + r")/d2k-[a-z]+-[A-Za-z0-9_-]+/")


def trim(text: str, limit: int, *, what: str = "output") -> str:
    """``text`` cut to about ``limit`` characters: head (2/3) and tail (1/3) with a marker in between."""
    if len(text) <= limit:
        return text
    head, tail = (limit * 2) // 3, limit // 3
    return f"{text[:head]}\n[... {len(text) - head - tail} characters of {what} trimmed ...]\n{text[-tail:]}"


def scrub(text: str, paths: list[Path]) -> str:
    """Replace every occurrence of the given harness paths with ``<harness>``."""
    for p in sorted({str(p) for p in paths if str(p) not in ("", "/", ".")}, key=len, reverse=True):
        text = text.replace(p, "<harness>")
    return _TMP_RE.sub("", text)


def _params(w: WorkloadResult) -> str:
    return ", ".join(f"{k}={v}" for k, v in w.params.items())


def _fmt_ms(v: float | None) -> str:
    return "-" if v is None or (isinstance(v, float) and math.isnan(v)) else f"{v:.4g}"


def _workload_lines(w: WorkloadResult, limit: int) -> list[str]:
    head = f"- {w.name}" + (f" ({_params(w)})" if w.params else "") + f": {w.status}"
    if w.trials:
        head += f", {w.trials} input draw(s)"
    lines = [head]
    for e in w.errors:
        if e.ok:
            lines.append(f"    {e.name}: ok (max abs err {e.max_abs_err:.3g}, max rel err {e.max_rel_err:.3g})")
            continue
        detail = e.reason or "out of tolerance"
        lines.append(f"    {e.name}: {detail}")
        if e.n_total:
            lines.append(f"      {e.n_bad} of {e.n_total} elements bad; max abs err {e.max_abs_err:.3g}, "
                         f"max rel err {e.max_rel_err:.3g}"
                         + (f"; first bad index {e.first_bad_index}" if e.first_bad_index is not None else ""))
    if w.message and w.status != "passed":
        lines.append("    " + trim(w.message, limit, what="message").replace("\n", "\n    "))
    return lines


def format_test(result: EvalResult, *, header: str, limit: int) -> str:
    """The ``test`` tool's answer."""
    ok = sum(1 for w in result.workloads if w.status == "passed")
    lines = [f"{header}: {result.status} ({ok} of {len(result.workloads)} workloads passed)"]
    if result.message:
        lines.append(trim(result.message, limit // 3, what="message"))
    for w in result.workloads:
        lines += _workload_lines(w, limit // 3)
    lines += _flags(result)
    if result.log.strip() and not result.correct:
        lines += ["kernel output / compile log:", trim(result.log.strip(), limit // 3, what="log")]
    return "\n".join(lines)


def _flags(result: EvalResult) -> list[str]:
    return [f"flag {f.code} ({f.severity})" + (f" line {f.line}" if f.line else "") + f": {f.message}"
            for f in result.flags]


def format_benchmark(result: EvalResult, *, header: str, limit: int) -> str:
    """The ``benchmark`` tool's answer: a table of times, speedups and fractions of roofline."""
    timed = [w for w in result.workloads if w.time is not None]
    lines = [f"{header}: {result.status}" + ("" if timed else f"; {CPU_TIMING_NOTE}")]
    if timed:
        lines += ["| workload | time ms | eager ms | compiled ms | x eager | x compiled | roofline fraction |",
                  "|---|---|---|---|---|---|---|"]
        for w in result.workloads:
            t = w.time.median_ms if w.time else None
            lines.append(f"| {w.name} | {_fmt_ms(t)} | {_fmt_ms(w.eager.median_ms if w.eager else None)} | "
                         f"{_fmt_ms(w.compiled.median_ms if w.compiled else None)} | {_fmt_ms(w.speedup_eager)} | "
                         f"{_fmt_ms(w.speedup_compiled)} | {_fmt_ms(w.roofline_fraction)} |")
    failing = [w for w in result.workloads if w.status != "passed"]
    for w in failing:
        lines += _workload_lines(w, limit // 3)
    if not timed and not failing:
        lines.append("correctness: " + ", ".join(f"{w.name} {w.status}" for w in result.workloads))
    lines += _flags(result)
    if result.log.strip() and not result.correct:
        lines += ["kernel output / compile log:", trim(result.log.strip(), limit // 3, what="log")]
    return "\n".join(lines)


def format_sanitize(out: dict[str, Any], *, rel: str, version: int) -> str:
    """A ``runner.sanitize.sanitize`` answer: the first line says available or not and how many errors."""
    if not out.get("available"):
        reason = str(out.get("reason") or "no reason given").removeprefix("not available: ")
        return f"sanitize unavailable: {reason}"
    n = int(out.get("errors") or 0)
    found = ("no error count in its output (read the report)" if n < 0 else
             f"{n} error(s) found" if n else "no errors found")
    head = f"sanitize {out.get('tool')} {rel} (kernel version {version}): {found}"
    report = str(out.get("report") or "").strip()
    return head + (f"\n{report}" if report else "")
