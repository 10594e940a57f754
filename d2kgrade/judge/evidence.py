"""Checking the judge's quotes against the graded file.

A quote is verified when, ignoring whitespace, it occurs inside the lines the judge says it spans. Whitespace is
ignored entirely (models re-indent and re-wrap quotes); everything else must match character for character.
Tolerated, because models do it without inventing anything: the listing's ``  12 | `` prefixes copied along,
the word joiners :func:`d2kgrade.judge.prompts.neutralize` inserted, and an elision ``...`` between fragments that
each occur, in order, inside the range (each fragment at least :data:`MIN_FRAGMENT_CHARS` characters, so
``x ... y`` proves nothing). A quote shorter than :data:`MIN_QUOTE_CHARS` characters is not evidence.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from d2kgrade.grades import Evidence
from d2kgrade.judge.answer import Quote
from d2kgrade.judge.prompts import WORD_JOINER

MIN_QUOTE_CHARS = 4
MIN_FRAGMENT_CHARS = 6
MAX_EVIDENCE_LINES = 30
_PREFIX = re.compile(r"^\s*\d+\s*\|\s?")
_ELLIPSIS = re.compile(r"\.\.\.|\u2026")
_WS = re.compile(r"\s+")


def squash(text: str) -> str:
    """``text`` with all whitespace and word joiners removed: the form quotes are compared in."""
    return _WS.sub("", text.replace(WORD_JOINER, ""))


def strip_listing_prefixes(quote: str) -> str:
    """Drop ``<n> | `` prefixes when every non-empty line of the quote has one (copied from the listing)."""
    lines = quote.split("\n")
    nonempty = [ln for ln in lines if ln.strip()]
    if nonempty and all(_PREFIX.match(ln) for ln in nonempty):
        return "\n".join(_PREFIX.sub("", ln, count=1) for ln in lines)
    return quote


@dataclass(frozen=True)
class QuoteCheck:
    """The outcome of checking one quote."""

    ok: bool
    """The quote occurs inside its stated line range."""
    start_line: int
    """First line the quote really covers (the stated one when not found)."""
    end_line: int
    """Last line the quote really covers."""
    problem: str = ""
    """Why it is not verified."""


class Document:
    """A graded file's lines, with a whitespace-free index for locating quotes."""

    def __init__(self, path: str, text: str) -> None:
        self.path = path
        self.lines = text.split("\n") if text else []
        chars: list[str] = []
        owner: list[int] = []  # owner[i]: 1-based line of the i-th non-whitespace character
        for n, line in enumerate(self.lines, 1):
            s = squash(line)
            chars.append(s)
            owner.extend([n] * len(s))
        self._flat = "".join(chars)
        self._owner = owner
        self._line_start: list[int] = []  # offset in _flat where each line starts
        pos = 0
        for s in chars:
            self._line_start.append(pos)
            pos += len(s)
        self._line_start.append(pos)

    def _find_in(self, needles: list[str], lo: int, hi: int) -> tuple[int, int] | None:
        """Offsets (first, last) spanned by ``needles`` found in order within flat offsets [lo, hi)."""
        pos, first, last = lo, -1, -1
        for needle in needles:
            i = self._flat.find(needle, pos, hi)
            if i < 0:
                return None
            first = i if first < 0 else first
            last = i + len(needle) - 1
            pos = i + len(needle)
        return first, last

    def check(self, quote: Quote) -> QuoteCheck:
        """Verify one quote against its stated line range."""
        text = strip_listing_prefixes(quote.quote)
        whole = squash(text)
        start, end = quote.start_line, quote.end_line
        if len(whole) < MIN_QUOTE_CHARS:
            return QuoteCheck(False, start, end, f"quote {quote.quote!r} is too short to be evidence")
        if end < start:
            return QuoteCheck(False, start, end, f"line range {start}-{end} is reversed")
        if start > len(self.lines):
            return QuoteCheck(False, start, end, f"line {start} is past the end of the file ({len(self.lines)} lines)")
        variants = [[whole]]
        if _ELLIPSIS.search(text):
            frags = [squash(f) for f in _ELLIPSIS.split(text)]
            frags = [f for f in frags if f]
            if frags and all(len(f) >= MIN_FRAGMENT_CHARS for f in frags):
                variants.append(frags)
        lo, hi = self._line_start[start - 1], self._line_start[min(end, len(self.lines))]
        for needles in variants:
            span = self._find_in(needles, lo, hi)
            if span:
                return QuoteCheck(True, self._owner[span[0]], self._owner[span[1]])
        for needles in variants:
            span = self._find_in(needles, 0, len(self._flat))
            if span:
                a, b = self._owner[span[0]], self._owner[span[1]]
                return QuoteCheck(False, start, end, f"quote is at lines {a}-{b}, not in the stated {start}-{end}")
        return QuoteCheck(False, start, end, "quote does not occur in the file")

    def evidence(self, check: QuoteCheck, note: str) -> Evidence:
        """The :class:`Evidence` of a verified quote: the file's lines it covers, verbatim (capped)."""
        a, b = check.start_line, check.end_line
        code_lines = self.lines[a - 1: min(b, a - 1 + MAX_EVIDENCE_LINES)]
        code = "\n".join(code_lines) + ("\n..." if b - a + 1 > MAX_EVIDENCE_LINES else "")
        return Evidence(file=self.path, start_line=a, end_line=b, code=code, note=note)
