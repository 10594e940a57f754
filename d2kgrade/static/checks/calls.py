"""Call and launch checks: a call is made (``uses_call``), how many kernels (or constexpr modes) are launched, inline
asm contents."""

from __future__ import annotations

import builtins

from d2kgrade.static.checkutil import as_list, code, matches, span
from d2kgrade.static.facts import Facts
from d2kgrade.static.registry import CheckResult, check, found, missing


@check("uses_call")
def uses_call(facts: Facts, lang: str, *, name: str | list[str], in_loop: bool | None = None, min_count: int = 1,
              host: bool = False) -> CheckResult:
    """Reachable code calls ``name`` (one name or a list; ``tl.exp2``, ``__shfl_xor_sync``, ``wmma::mma_sync``,
    ``prefix*``). ``in_loop``: only calls inside (True) or outside (False) a loop. ``host``: look at host code
    instead of device code. Passes with at least ``min_count`` call sites."""
    names = as_list(name)
    funcs = facts.hosts(None if lang == "any" else ("py" if lang == "triton" else "cuda")) if host else code(facts, lang)
    hits = [(f, c) for f in funcs for c in f.calls if matches(c.name, names)
            and (in_loop is None or bool(c.loops) == in_loop)]
    where = " inside a loop" if in_loop else " outside loops" if in_loop is False else ""
    if len(hits) >= min_count:
        return found(f"calls {hits[0][1].name}{where} ({len(hits)} site(s))",
                     [span(c, f"{c.name} in {f.name}") for f, c in hits[:4]], 0.95)
    return missing(f"no call to {' / '.join(names)}{where} in reachable code"
                   + (f" ({len(hits)} < {min_count})" if hits else ""), confidence=0.9)


@check("num_kernels")
def num_kernels(facts: Facts, lang: str, *, min: int = 1, max: int | None = None,
                launches: bool = False, modes: bool = False) -> CheckResult:
    """The number of distinct kernels launched from ``kernel(...)`` is within ``[min, max]`` (a ``.cu`` file without
    host code counts its ``__global__`` functions). ``launches: true`` counts launch sites instead (one kernel
    launched per bin of rows counts once per site). ``modes: true`` counts each constexpr mode the launcher picks
    between (``MODE=0 if small else 1`` tested by ``if MODE == 0:`` in the kernel) as a kernel of its own: the
    paths of a design, whether they are separate kernels or specialisations of one."""
    launched = facts.launched()
    if modes:
        from d2kgrade.static.dataflow import flow
        from d2kgrade.static.patterns.host import constexpr_modes

        fl = flow(facts)
        expanded: list[str] = []
        for k in launched:
            n_modes = 1
            for vals in constexpr_modes(fl, facts.functions[k]).values():
                n_modes *= len(vals)
            expanded.extend([k] * builtins.min(n_modes, 16))
        launched = expanded
    if launches:
        sites = {(la.kernel, la.line) for la in facts.launches if la.kernel in facts.functions}
        launched = [k for k, _ in sorted(sites, key=lambda s: s[1])]
    if lang != "any":
        want = "py" if lang == "triton" else "cuda"
        launched = [k for k in launched if facts.functions[k].lang == want]
    names = ", ".join(dict.fromkeys(facts.functions[k].name for k in launched))
    if not launched and facts.suffix == "cu":
        launched = [f.key for f in facts.kernels("cuda") if f.kind == "global"]
    n = len(launched)
    spans = [span(la, f"launch of {facts.functions[la.kernel].name}") for la in facts.launches
             if la.kernel in launched][:4]
    ok = n >= min and (max is None or n <= max)
    names = names or ", ".join(facts.functions[k].name for k in launched)
    bounds = f"[{min}, {max if max is not None else 'inf'}]"
    if ok:
        return found(f"{n} {'launch(es)' if launches else 'kernel(s)'} ({names}), within {bounds}", spans, 0.9)
    return missing(f"{n} {'launch(es)' if launches else 'kernel(s)'} ({names or 'none'}), outside {bounds}", spans, 0.9)


@check("asm_contains")
def asm_contains(facts: Facts, lang: str, *, pattern: str | list[str]) -> CheckResult:
    """Inline PTX (``asm volatile(...)``) in reachable CUDA code contains one of ``pattern`` (``mma.sync``,
    ``wgmma``, ``cp.async``, ``ex2.approx``...)."""
    pats = as_list(pattern)
    hits = [t for t in facts.reachable_tokens("asm") if any(p in t.text for p in pats)]
    if hits:
        return found(f"inline asm with {' / '.join(p for p in pats if any(p in t.text for t in hits))}",
                     [span(t, "asm") for t in hits[:4]], 0.95)  # type: ignore[arg-type]
    return missing(f"no inline asm containing {' / '.join(pats)} in reachable code", confidence=0.9)
