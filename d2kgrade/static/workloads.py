"""Host paths judged per workload: which launches, and which constexpr modes of a kernel, each catalog workload
reaches.

The flattened entry (:mod:`d2kgrade.static.host`) keeps every host alternative: a launch under ``if N > 65536:``,
a kernel picked by ``k_a if small else k_b``, a constexpr ``MODE=0 if x.dtype == torch.float32 else 1`` that
selects a branch of the kernel. Without the task's sizes each is a path, and a property counts when any of them
has it. Here the entry's parameters are bound to each workload's inputs (shape and dtype from the task's
``inputs`` and the workload's ``params``; scalars from ``scalar_args``), host values are evaluated where that is
static (``x.shape[1]``, ``M, N = x.shape``, ``x.numel()``, ``x.dtype == torch.float16``,
``triton.next_power_of_2(N)``, ``triton.cdiv``, ``min``/``max``, ternaries, dict lookups by a computed key), and
each launch gets the workloads it serves: its ``if`` conditions and its target evaluate true, false, or cannot be
decided. A launch false for every workload of a set is not a path of that set; a condition that cannot be decided
keeps the launch. The C++ host functions of a ``load_inline`` source are bound through their calls
(``mod.f(x, y)`` from the entry, ``launch<T>(x, y)`` from another host function), so their launches get the
same. Inside a Triton kernel, a statement under ``if MODE == 0:`` is dropped when every live launch, for every
workload of the set, passes a ``MODE`` that makes a condition above it false.

:meth:`WorkloadPaths.view` returns facts restricted to the paths that serve a set of workloads (the same object
when nothing is dropped), so the checks run unchanged on them.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from d2kgrade.static.hosteval import UNKNOWN, Evaluator, Fn, Tensor
from d2kgrade.static.ir import Call, Expr, Function, Launch

if TYPE_CHECKING:
    from d2kgrade.schema import Task
    from d2kgrade.static.facts import Facts


ENTRY = "kernel"


@dataclass(frozen=True)
class WorkloadEnv:
    """What ``kernel(...)`` receives on one workload: the inputs in call order, then the scalar keywords."""

    name: str
    inputs: tuple[Tensor, ...]
    scalars: tuple[tuple[str, Any], ...] = ()


def workload_envs(task: Task) -> tuple[WorkloadEnv, ...]:
    """Each catalog workload of ``task`` as the arguments ``kernel(*inputs, **scalars)`` gets (a workload whose
    shapes cannot be computed is left out, so no path is judged against it)."""
    out = []
    for w in task.workloads:
        try:
            shapes, dtypes = task.shapes(w), task.tensor_dtypes(w)
        except (ValueError, KeyError, ArithmeticError, TypeError):
            continue
        inputs = tuple(Tensor(tuple(int(d) for d in shapes[t.name]), dtypes[t.name]) for t in task.inputs)
        scalars = tuple((k, w.params[k]) for k in task.scalar_args if k in w.params)
        out.append(WorkloadEnv(w.name, inputs, scalars))
    return tuple(out)


# ---------------------------------------------------------------------------------------------- paths


@dataclass
class LaunchPath:
    """One launch of the flattened entry (one target kernel) and the workloads it serves."""

    launch: Launch
    call: Call | None
    """The launch's call in the flattened entry (its ``if`` conditions), None for a launch outside it."""
    serves: dict[str, bool | None]
    """Workload name -> does this launch run on it (True), not (False), or cannot tell (None)."""
    why: str = ""
    """What decides, as code, for the evidence: ``false: N > 65536``, ``_PATHS[path] names another kernel
    there``."""

    def live(self, names: tuple[str, ...]) -> bool:
        """Does the launch serve (or may it serve) one of ``names``?"""
        return any(self.serves.get(n, None) is not False for n in names)


class WorkloadPaths:
    """The launches of one file and the workloads each serves, for one task's catalog."""

    def __init__(self, facts: Facts, envs: tuple[WorkloadEnv, ...]) -> None:
        self.facts = facts
        self.envs = envs
        self.names = tuple(w.name for w in envs)
        self.entry = facts.functions.get(ENTRY)
        self.evals: dict[str, Evaluator] = {}
        self.paths: list[LaunchPath] = []
        self._views: dict[tuple[str, ...], tuple[Facts, list[str]]] = {}
        flat = self.entry if self.entry is not None and self.entry.inlined else None
        calls = {id(c.expr.args): c for c in flat.calls if c.name == "launch"} if flat is not None else {}
        for w in envs:
            if flat is not None:
                self.evals[w.name] = Evaluator(facts, flat, self._bind(flat, w))
        self._cpp: dict[tuple[str, str], tuple[list[tuple[Evaluator, bool | None]], bool]] = {}
        for la in facts.launches:
            caller = facts.functions.get(la.caller)
            serves: dict[str, bool | None] = {}
            retargeted = False
            if caller is not None and caller.lang == "cuda" and caller.kind == "cpp" and flat is not None:
                call = next((c for c in caller.calls if c.name == "launch" and c.expr.args is la.args), None)
                for w in envs:
                    serves[w.name] = self._cpp_serves(caller, call, w.name) if call is not None else None
                self.paths.append(LaunchPath(la, call, serves, "false: " + " and ".join(
                    _code(facts, g) for g in call.guards) if call is not None else ""))
                continue
            call = calls.get(id(la.args)) if la.caller == ENTRY else None
            for w in envs:
                if call is None:
                    serves[w.name] = None
                    continue
                ev = self.evals[w.name]
                t = ev.truth(call.guards)
                if t is not False and la.target is not None:
                    target = ev.value(la.target)
                    if self._other_kernel(target, la.kernel):
                        t, retargeted = False, True
                serves[w.name] = t
            if call is None:
                why = ""
            elif retargeted:
                why = f"{_target_text(la.target)} names another kernel there"
            else:
                why = "false: " + " and ".join(_code(facts, g) for g in call.guards)
            self.paths.append(LaunchPath(la, call, serves, why))

    # -------------------------------------------------------------------------------------------- CUDA host code

    def _cpp_serves(self, fn: Function, call: Call, w: str) -> bool | None:
        """Does the launch ``call`` of the C++ host function ``fn`` run on workload ``w``: True when some call of
        ``fn`` surely runs with arguments that make its conditions true, False when every call of ``fn`` makes
        them false (and every call was found), else None."""
        runs, complete = self._cpp_evals(fn, w, 0)
        truths = [(ev.truth(call.guards), sure) for ev, sure in runs]
        if any(t is True and sure is True for t, sure in truths):
            return True
        return False if runs and complete and all(t is False for t, _ in truths) else None

    def _cpp_evals(self, fn: Function, w: str, depth: int) -> tuple[list[tuple[Evaluator, bool | None]], bool]:
        """One evaluator of ``fn`` per call that may run on ``w`` (its parameters bound to that call's arguments),
        with whether the call surely runs: from the flattened entry (``mod.f(x, y)`` of a ``load_inline``
        module) and from other C++ host functions (``launch<T>(x, y)``). The flag says whether every call was
        read (not when one sits in module code run at import, past the depth limit, or in a recursion)."""
        key = (fn.key, w)
        hit = self._cpp.get(key)
        if hit is not None:
            return hit
        self._cpp[key] = ([], False)  # a recursive call finds no binding, and says so
        out: list[tuple[Evaluator, bool | None]] = []
        complete = True
        entry_ev = self.evals.get(w)
        sites: list[tuple[Call, Evaluator, bool | None]] = []

        def calls_it(c: Call) -> bool:
            return "." in c.name and c.name.rsplit(".", 1)[-1] == fn.name and c.name != "launch"

        module = self.facts.functions.get("<module>")
        if module is not None and any(calls_it(c) for c in module.calls):
            complete = False
        if entry_ev is not None and self.entry is not None:
            sites += [(c, entry_ev, True) for c in self.entry.calls if calls_it(c)]
        for g in self.facts.functions.values():
            if g.lang != "cuda" or g.kind != "cpp" or g is fn or g.key not in self.facts.reachable:
                continue
            named = [c for c in g.calls if c.expr.recv is None and c.name != "launch"
                     and c.name in (fn.key[3:], fn.name)]
            if not named:
                continue
            if depth >= 4:
                complete = False
                continue
            runs, done = self._cpp_evals(g, w, depth + 1)
            complete = complete and done
            for gev, gsure in runs:
                sites += [(c, gev, gsure) for c in named]
        for c, ev, sure in sites:
            t = ev.truth(c.guards)
            if t is False:
                continue
            args = list(c.expr.args)
            bound = {p: ev.value(a) for p, a in zip(fn.params, args)} if len(args) <= len(fn.params) else {}
            known = {k: v for k, v in bound.items() if v is not UNKNOWN}
            out.append((Evaluator(self.facts, fn, known, set(fn.params) - set(known)),
                        True if t is True and sure is True else None))
        if len(out) > 16:
            out, complete = out[:16], False
        self._cpp[key] = (out, complete)
        return self._cpp[key]

    def _other_kernel(self, target: Any, kernel: str) -> bool:
        """Is ``target`` (a launch target's value) a jit function of the file other than ``kernel``?"""
        funcs = self.facts.functions
        if not isinstance(target, Fn) or target.key not in funcs or kernel not in funcs:
            return False
        return funcs[target.key] is not funcs[kernel] and funcs[target.key].kind == "jit"

    def _bind(self, flat: Function, w: WorkloadEnv) -> dict[str, Any]:
        """The entry's parameters on ``w``: ``kernel(*inputs, **scalars)``, the rest at their defaults."""
        bound: dict[str, Any] = {}
        params = list(flat.params)
        for p, t in zip(params, w.inputs):
            bound[p] = t
        if flat.vararg and len(w.inputs) > len(params):
            bound[flat.vararg] = tuple(w.inputs[len(params):])
        scalars = dict(w.scalars)
        for p in params[len(w.inputs):]:
            if p in scalars:
                bound[p] = scalars[p]
            elif p in flat.defaults:
                bound[p] = Evaluator(self.facts, _no_defs(flat), {}).value(flat.defaults[p])
        return bound

    # -------------------------------------------------------------------------------------------- views

    def select(self, names: list[str] | None) -> tuple[str, ...]:
        """The workloads a property concerns (all of the catalog when it names none)."""
        return self.names if not names else tuple(n for n in self.names if n in names)

    def view(self, names: tuple[str, ...]) -> Facts:
        """The facts with only the paths that serve one of ``names``: launches that serve none dropped (and the
        kernels only they launched), and kernel statements under a constexpr condition that no live launch of
        those workloads makes true. The same facts when nothing is dropped."""
        return self._view(names)[0]

    def dropped(self, names: tuple[str, ...]) -> list[str]:
        """What :meth:`view` dropped, one phrase each (for the evidence)."""
        return self._view(names)[1]

    def _view(self, names: tuple[str, ...]) -> tuple[Facts, list[str]]:
        hit = self._views.get(names)
        if hit is not None:
            return hit
        facts = self.facts
        notes: list[str] = []
        live = [p for p in self.paths if p.live(names)]
        dead = [p for p in self.paths if not p.live(names)]
        live_kernels = {p.launch.kernel for p in live}
        gone = {p.launch.kernel for p in dead} - live_kernels
        who = "no catalog workload" if names == self.names else "none of " + ", ".join(names)
        for p in dead:
            notes.append(f"launch of {p.launch.kernel} at line {facts.locate(p.launch.line)[1]} serves {who}"
                         + (f" ({p.why})" if p.why else ""))
        functions = dict(facts.functions)
        # one launch site with two possible targets is two paths: its call goes only when both are dead
        dead_args = {id(p.launch.args) for p in dead} - {id(p.launch.args) for p in live}
        callers = {p.launch.caller for p in dead}
        if dead:
            for key in list(functions):
                f = functions[key]
                if f.is_device or key not in facts.reachable or f.lang != "py" and key not in callers:
                    continue
                # the dead launch sites of the entry and of C++ host code; in a Python helper also flattened into
                # the entry, the launches of the kernels that only dead paths launch
                drop = [la for la in f.launches if (id(la.args) in dead_args if key == ENTRY or f.lang == "cuda"
                                                    else la.kernel in gone)]
                if drop:
                    ids = {id(la.args) for la in drop}
                    functions[key] = _copy(f, calls=[c for c in f.calls if not (c.name == "launch" and id(c.expr.args)
                                                                                 in ids)],
                                           launches=[la for la in f.launches if id(la.args) not in ids])
        for key in sorted(live_kernels - gone):
            kfn = functions.get(key)
            if kfn is None or not kfn.is_device or kfn.lang != "py" or not kfn.inlined:
                continue
            pruned, dropped = self._modes(kfn, [p for p in live if p.launch.kernel == key], names)
            if pruned is not None:
                functions[key] = pruned
                notes.append(f"{key}: {dropped} statement(s) under a constexpr condition that no launch makes true "
                             f"on {'the catalog' if names == self.names else ', '.join(names)}")
        if not dead and len(functions) == len(facts.functions) and all(
                functions[k] is facts.functions[k] for k in functions):
            out = (facts, notes)
        else:
            view = dataclasses.replace(facts, functions=functions, reachable=facts.reachable - gone,
                                       launches=[p.launch for p in live],
                                       _cache={})
            view._lines = facts.lines
            out = (view, notes)
        self._views[names] = out
        return out

    def _modes(self, kfn: Function, live: list[LaunchPath], names: tuple[str, ...]) -> tuple[Function | None, int]:
        """``kfn`` without the statements that no binding of its branch constexprs (one per live launch and
        workload) can reach, or None when every statement may run."""
        from d2kgrade.static.patterns.host import branch_params

        params = branch_params(kfn)
        if not params:
            return None, 0
        opaque = frozenset(kfn.params) | frozenset(kfn.defs()) | {lp.var for lp in kfn.loops if lp.var}
        bindings: list[dict[str, Any]] = []
        for p in live:
            for n in names:
                if p.serves.get(n, None) is False:
                    continue
                ev = self.evals.get(n)
                b: dict[str, Any] = {}
                for name in params:
                    arg = _passed(p.launch, kfn, name) if p.call is not None else UNKNOWN
                    if arg is None and name in kfn.defaults and not _tuned(kfn, name):
                        val = Evaluator(self.facts, _no_defs(kfn), {}, opaque).value(kfn.defaults[name])
                    elif isinstance(arg, Expr) and ev is not None:
                        val = ev.value(arg)
                    else:
                        val = UNKNOWN
                    if val is not UNKNOWN:
                        b[name] = val
                bindings.append(b)
        if not bindings or all(not b for b in bindings):
            return None, 0
        evs = [Evaluator(self.facts, _no_defs(kfn), b, opaque - set(b)) for b in bindings]

        def dead(guards: tuple[Expr, ...]) -> bool:
            return bool(guards) and all(ev.truth(guards) is False for ev in evs)

        assigns = [a for a in kfn.assigns if not dead(a.guards)]
        calls = [c for c in kfn.calls if not dead(c.guards)]
        loops = [lp for lp in kfn.loops if not dead(lp.guards)]
        n = len(kfn.assigns) - len(assigns) + len(kfn.calls) - len(calls) + len(kfn.loops) - len(loops)
        if not n:
            return None, 0
        return _copy(kfn, assigns=assigns, calls=calls, loops=loops), n


def _passed(la: Launch, kfn: Function, name: str) -> Expr | None | Any:
    """What a launch passes for constexpr ``name``: the expression, None when it is left to its default, or
    :data:`UNKNOWN` when a ``*args``/``**meta`` the flattening could not splice may carry it."""
    kwargs = la.kwargs or {}
    if name in kwargs:
        return kwargs[name]
    if any(k.startswith("**") for k in kwargs):
        return UNKNOWN
    i = kfn.params.index(name) if name in kfn.params else len(la.args)
    for j, a in enumerate(la.args):
        if a.kind == "other" and a.op == "*":
            return UNKNOWN
        if j == i:
            return a
    return None


def _tuned(kfn: Function, name: str) -> bool:
    """May an autotune config or a heuristic set ``name`` when a launch leaves it out (then its default is not
    what runs)?"""
    at = kfn.autotune
    return name in kfn.heuristics or at is not None and (at.generated or any(name in c.kwargs for c in at.configs))


def _no_defs(kfn: Function) -> Function:
    """A stand-in for a kernel whose names, other than the bound constexprs, are not read (a kernel's locals
    are run-time values)."""
    return Function(kfn.key, kfn.name, kfn.lang, kfn.kind, [], kfn.line, kfn.end_line)


def _copy(f: Function, **changes: Any) -> Function:
    out = dataclasses.replace(f, **changes)
    out._defs = None
    return out


_PRECEDENCE = {"or": 1, "||": 1, "and": 2, "&&": 2, "cmp": 4, "+": 5, "-": 5, "*": 6, "/": 6, "//": 6, "%": 6}


def _render(e: Expr, depth: int = 0) -> str | None:
    """A condition written out from its record (``N > 65536``, ``not (n <= 1024)``), names in their source
    spelling; None for a form not written here."""
    if depth > 8:
        return None
    sub = [_render(a, depth + 1) for a in e.args]
    if any(x is None for x in sub):
        return None
    parts: list[str] = sub  # type: ignore[assignment]
    if e.kind == "name":
        return e.op.split("@")[0]
    if e.kind == "const":
        return e.op if len(e.op) <= 24 else None
    if e.kind == "unary" and len(parts) == 1:
        return f"not ({parts[0]})" if e.op in ("not", "!") else f"{e.op}{parts[0]}"
    if e.kind in ("bin", "cmp") and len(parts) >= 2:
        if e.kind == "cmp" and e.op not in ("and", "or", "&&", "||") and len(parts) != 2:
            return None
        mine = _PRECEDENCE.get(e.op, 4 if e.kind == "cmp" else 3)
        wrapped = [f"({t})" if a.kind in ("bin", "cmp") and _PRECEDENCE.get(
            a.op, 4 if a.kind == "cmp" else 3) < mine else t for a, t in zip(e.args, parts)]
        return f" {e.op} ".join(wrapped)
    if e.kind == "call" and e.recv is not None and e.op.startswith("."):
        recv = _render(e.recv, depth + 1)
        return None if recv is None else f"{recv}{e.op}({', '.join(parts)})"
    if e.kind == "attr" and e.recv is not None:
        recv = _render(e.recv, depth + 1)
        return None if recv is None else f"{recv}.{e.op}"
    if e.kind == "sub" and len(parts) == 2:
        return f"{parts[0]}[{parts[1]}]"
    return None


def _code(facts: Facts, g: Expr) -> str:
    """An ``if`` condition as code: written out from its record, else as its source line shows it (``N > 65536``;
    C's ``} else if (n <= 16384) {`` too)."""
    text = _render(g)
    if text is not None and len(text) <= 80:
        return text
    text = facts.snippet(g.line, g.end_line, 1).strip().lstrip("}").strip()
    for prefix in ("else ", "if ", "elif ", "if(", "else if("):
        if text.startswith(prefix):
            text = text[len(prefix) - (1 if prefix.endswith("(") else 0):].strip()
    text = text.rstrip("{").rstrip().rstrip(":").strip()
    if text.startswith("(") and text.endswith(")") and text.count("(") == 1:
        text = text[1:-1].strip()
    if g.kind == "unary" and g.op in ("not", "!"):
        return f"not ({text})" if len(text) <= 60 else f"not ({text[:57]}...)"
    return text if len(text) <= 60 else text[:57] + "..."


def _target_text(e: Expr | None) -> str:
    """``_PATHS[path]`` for a launch target (flattened names back to their source spelling), else 'its target'."""
    def name(x: Expr) -> str | None:
        return x.op.split("@")[0] if x.kind == "name" else repr(x.value) if x.kind == "const" else None

    if e is not None and e.kind == "name":
        return name(e) or "its target"
    if e is not None and e.kind == "sub" and len(e.args) == 2 and name(e.args[0]) and name(e.args[1]):
        return f"{name(e.args[0])}[{name(e.args[1])}]"
    return "its target"


def workload_paths(facts: Facts, task: Task) -> WorkloadPaths:
    """The (cached) :class:`WorkloadPaths` of ``facts`` for ``task``'s catalog."""
    envs = workload_envs(task)
    try:
        key = f"workload_paths:{hash(envs)}"
    except TypeError:  # a parameter value that is not hashable: not cached
        return WorkloadPaths(facts, envs)
    return facts.memo(key, lambda: WorkloadPaths(facts, envs))


__all__ = ["LaunchPath", "WorkloadEnv", "WorkloadPaths", "workload_envs", "workload_paths"]
