"""The facts of one file: every function, which of them ``kernel(...)`` reaches, launches, CUDA constructs.

:class:`Facts` is what :func:`d2kgrade.static.extract_facts` returns and what every check reads. Checks should
look only at reachable code (:meth:`Facts.kernels`, :meth:`Facts.hosts`): a helper that is defined but never
called, a kernel that is never launched, and a CUDA string that is never handed to ``load_inline`` do not count.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from d2kgrade.static.ir import Call, Function, InlineSource, Launch, SharedBuffer, Token


@dataclass(eq=False)
class Facts:
    """Everything the static checks know about one file."""

    path: str
    """Path of the file (or ``<source>`` for a string)."""
    text: str
    """The file's text."""
    suffix: str
    """``py`` or ``cu`` (``.cuh``/``.cpp`` count as ``cu``)."""
    errors: list[str] = field(default_factory=list)
    """Why the file could not be analysed; non-empty means every verdict is ``unknown``."""
    notes: list[str] = field(default_factory=list)
    """Non-fatal remarks (no ``kernel`` function, an unresolved launch target...)."""
    functions: dict[str, Function] = field(default_factory=dict)
    """Every function of both languages, by key (Python qualified name, ``cu:<name>`` for CUDA)."""
    roots: list[str] = field(default_factory=list)
    """Where reachability starts: ``kernel`` (and module-level code) for Python, launched kernels for ``.cu``."""
    reachable: set[str] = field(default_factory=set)
    """Keys of the functions reachable from the roots."""
    launches: list[Launch] = field(default_factory=list)
    """Launches made by reachable host code, in execution order as far as it is static (calls followed in
    source order)."""
    imports: dict[str, str] = field(default_factory=dict)
    """Python import aliases: local name -> dotted module path."""
    consts: dict[str, Any] = field(default_factory=dict)
    """Module-level (and CUDA ``#define``/``constexpr``) constants with their values."""
    inline_sources: list[InlineSource] = field(default_factory=list)
    """CUDA/C++ sources handed to reachable ``load_inline`` calls."""
    shared: list[SharedBuffer] = field(default_factory=list)
    """CUDA ``__shared__`` buffers (all; filter by ``func`` in :attr:`reachable`)."""
    tokens: list[Token] = field(default_factory=list)
    """CUDA pragmas, includes, inline asm, vector types, reinterpret casts, cooperative groups."""
    foreign_dsl: str = ""
    """Name of an unsupported kernel DSL the file imports (CuTe DSL, TileLang, Numba...), if any."""
    segments: list[tuple[int, int, str]] = field(default_factory=list)
    """Sibling modules of a multi-file submission: (first virtual line, last virtual line, path). Their lines
    follow the graded file's in :attr:`lines` (see :mod:`d2kgrade.static.siblings`)."""
    _lines: list[str] | None = None
    _cache: dict[str, Any] = field(default_factory=dict)

    # ------------------------------------------------------------------------------------------ queries

    @property
    def ok(self) -> bool:
        """True when the file was analysed."""
        return not self.errors

    @property
    def lines(self) -> list[str]:
        """The file's lines (then those of its sibling modules, in the virtual line space of :attr:`segments`)."""
        if self._lines is None:
            self._lines = self.text.splitlines()
        return self._lines

    def extend_lines(self, path: str, lines: list[str], first: int) -> None:
        """Append a sibling module's lines so that its line 1 is virtual line ``first``."""
        own = self.lines
        own.extend([""] * (first - 1 - len(own)))
        own.extend(lines)
        self.segments.append((first, first + max(len(lines), 1) - 1, path))

    def locate(self, line: int) -> tuple[str, int]:
        """(file, line in that file) of a virtual line."""
        for first, last, path in self.segments:
            if first <= line <= last + 1:
                return path, line - first + 1
        return self.path, line

    @property
    def languages(self) -> set[str]:
        """Kernel languages with reachable code: ``triton`` and/or ``cuda``."""
        out = set()
        for key in self.reachable:
            f = self.functions[key]
            if f.kind == "jit":
                out.add("triton")
            elif f.lang == "cuda":
                out.add("cuda")
        return out

    def kernels(self, lang: str | None = None) -> list[Function]:
        """Reachable kernels with their device helpers inlined (see :mod:`d2kgrade.static.inline`): launched
        Triton jit functions (``triton``), CUDA ``__global__`` functions (``cuda``). Helpers are not listed on
        their own; their code is part of the kernels that call them."""
        out = []
        for f in self.functions.values():
            if f.key not in self.reachable or not f.is_device or not f.inlined:
                continue
            if lang == "triton" and f.lang != "py" or lang == "cuda" and f.lang != "cuda":
                continue
            out.append(f)
        return out

    def hosts(self, lang: str | None = None) -> list[Function]:
        """Reachable host code: Python functions (``py``) and host C++ functions (``cuda``)."""
        return [f for f in self.functions.values() if f.key in self.reachable and not f.is_device
                and (lang is None or f.lang == lang)]

    def calls(self, lang: str | None = None, device: bool = True) -> list[tuple[Function, Call]]:
        """Every call site of reachable device (or host) code."""
        funcs = self.kernels(lang) if device else self.hosts(lang)
        return [(f, c) for f in funcs for c in f.calls]

    def snippet(self, line: int, end_line: int, max_lines: int = 8) -> str:
        """The text of lines ``line..end_line`` (1-based, inclusive), trimmed to ``max_lines``."""
        lines = self.lines
        lo = max(line, 1)
        hi = min(end_line, len(lines), lo + max_lines - 1)
        text = "\n".join(lines[lo - 1:hi])
        if end_line > hi:
            text += "\n..."
        return text

    def launched(self) -> list[str]:
        """Keys of the launched kernels, in launch order, without repeats."""
        seen: list[str] = []
        for la in self.launches:
            if la.kernel in self.functions and la.kernel not in seen:
                seen.append(la.kernel)
        return seen

    def reachable_tokens(self, kind: str | None = None) -> list[Token]:
        """CUDA tokens inside reachable functions (file-scope ones, such as includes, count when any CUDA
        code is reachable)."""
        has_cuda = "cuda" in self.languages
        return [t for t in self.tokens if (kind is None or t.kind == kind)
                and (t.func in self.reachable or (not t.func and has_cuda))]

    def memo(self, key: str, compute: Any) -> Any:
        """Per-file cache for derived analyses shared by several checks."""
        if key not in self._cache:
            self._cache[key] = compute()
        return self._cache[key]
