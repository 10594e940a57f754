"""Inlining of device helpers into the kernels that call them, so every check sees a kernel whole.

Expert kernels factor their loops into helpers (``_chunk_stats(src, ...)`` for one sweep, ``_attn_block_range``
for the online-softmax mainloop, ``merge(m, s, ...)`` for a warp merge). A check written over one function would
miss a sweep that sits in a helper, or a running sum carried through a helper's loop. After extraction, each entry
kernel (a launched jit function, a reachable ``__global__``) is replaced in ``Facts.functions`` by a copy in which
every call to a device helper defined in the file is expanded in place:

- the helper's parameters become locals ``p@helperN`` assigned from the call's arguments (a CUDA reference
  parameter ``float& m`` becomes the caller's variable itself);
- the helper's locals are renamed the same way, its loops get fresh ids nested in the call's loops, and its
  statements take the call's loops and ``if`` conditions as context;
- the call expression in the caller is replaced by the helper's return value (an element of it for
  ``a, b = helper(...)``).

Line numbers stay those of the helper (evidence points at the code that does the work); execution order is kept
in ``order``/``end_order``, placing the helper's statements at its call site. Helpers are inlined up to
:data:`MAX_DEPTH` levels deep and never recursively.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from d2kgrade.static.facts import Facts
from d2kgrade.static.ir import Assign, Call, Expr, Function, Loop

MAX_DEPTH = 4


def entry_kernels(facts: Facts) -> list[str]:
    """Keys of the reachable kernels that are entered from the host: launched jit functions and ``__global__``s
    (a reachable jit function that nobody launches but another jit function calls is a helper)."""
    launched = {la.kernel for la in facts.launches}
    out = []
    for key in sorted(facts.reachable):
        f = facts.functions.get(key)
        if f is None:
            continue
        if (f.kind == "jit" and key in launched) or f.kind == "global":
            out.append(key)
    called = set()
    for key in facts.reachable:
        f = facts.functions[key]
        if f.kind == "jit":
            called.update(c.name for c in f.calls)
    for key in sorted(facts.reachable):  # jit functions reachable only through module-level aliases
        f = facts.functions[key]
        if f.kind == "jit" and key not in out and f.name not in called:
            out.append(key)
    return out


def fresh_loops(src: Function, counter: list[int], ctx_loops: tuple[int, ...]
                ) -> tuple[dict[int, int], Callable[[tuple[int, ...]], tuple[int, ...]]]:
    """New ids for the loops of a function copied into another (``counter`` holds the last id given), and a map
    from a statement's loop ids in ``src`` to its loop ids in the copy, nested inside ``ctx_loops``."""
    loop_map: dict[int, int] = {}
    for lp in src.loops:
        counter[0] += 1
        loop_map[lp.id] = counter[0]

    def loops_of(ids: tuple[int, ...]) -> tuple[int, ...]:
        return ctx_loops + tuple(loop_map.get(i, i) for i in ids)

    return loop_map, loops_of


class Inliner:
    """Builds the inlined copy of one kernel."""

    def __init__(self, facts: Facts) -> None:
        self.facts = facts
        self.counter = 0
        self.loop_ids = facts.memo("inline_loop_ids", lambda: [1_000_000])

    def callee(self, name: str, caller: Function) -> Function | None:
        funcs = self.facts.functions
        if caller.lang == "cuda":
            f = funcs.get("cu:" + name.split("::")[-1])
        else:
            f = None
            parts = caller.key.split(".")
            while parts and f is None:
                f = funcs.get(".".join(parts) + "." + name)
                parts.pop()
            f = f or funcs.get(name)
        if f is None or not f.is_device or f.kind == "global":
            return None
        return f

    def kernel(self, f: Function) -> Function:
        new = replace(f, assigns=[], calls=[], loops=[], returns=[], inlined=True)
        new._defs = None
        returns = self.emit(f, new, {}, {}, (), (), 0.0, 1.0, 0, (f.key,))
        new.returns = returns
        return new

    # ------------------------------------------------------------------------------------------ copying

    def emit(self, src: Function, dst: Function, rename: dict[str, str], memo: dict[int, Expr],
             ctx_loops: tuple[int, ...], ctx_guards: tuple[Expr, ...], base: float, width: float, depth: int,
             stack: tuple[str, ...]) -> list[Expr]:
        """Copy ``src``'s statements into ``dst``; returns ``src``'s return expressions, copied."""
        lo, hi = src.line, max(src.end_line, src.line)
        span = hi - lo + 2

        def at(line: int) -> float:
            if depth == 0:
                return 0.0
            return base + width * (min(max(line, lo), hi) - lo + 1) / span

        loop_map, loops_of = fresh_loops(src, self.loop_ids, ctx_loops)

        # helper calls first: their return values replace the call expressions in what follows
        inlined: dict[int, Expr] = {}
        after: dict[int, float] = {}  # inlined call -> a position just after its helper's body
        for c in src.calls:
            callee = self.callee(c.name, src) if c.expr.recv is None else None
            if callee is None or callee.key in stack or depth >= MAX_DEPTH or not (callee.assigns or callee.calls):
                continue
            self.counter += 1
            tag = f"@{callee.name}{self.counter}"
            sub: dict[str, str] = {}
            params = []
            for i, p in enumerate(callee.params):
                arg = c.expr.kw(p, i)
                root = arg
                while root is not None and root.kind == "sub" and root.args and callee.lang == "cuda":
                    root = root.args[0]  # f(dt[r]) with float (&v)[N]: a row of the caller's array dt
                if p in callee.ref_params and root is not None and root.kind == "name":
                    sub[p] = rename.get(root.op, root.op)  # by reference: the caller's variable itself
                else:
                    sub[p] = p + tag
                    if arg is not None:
                        params.append((p, arg))
            for name in callee.defs():
                sub.setdefault(name, name + tag)
            c_loops = loops_of(c.loops)
            c_guards = ctx_guards + tuple(self.copy(g, rename, memo, inlined) for g in c.guards)
            c_pos = at(c.line) if depth else float(c.line)
            for p, arg in params:
                dst.assigns.append(Assign((sub[p],), self.copy(arg, rename, memo, inlined), c.line, c.end_line,
                                          c_loops, c_guards, order=c_pos))
            inner_width = (width / span) if depth else 0.999
            rets = self.emit(callee, dst, sub, {}, c_loops, c_guards, c_pos, inner_width, depth + 1,
                             stack + (callee.key,))
            if rets:
                inlined[id(c.expr)] = rets[-1] if len(rets) == 1 else Expr(
                    "other", "returns", tuple(rets), line=rets[-1].line, end_line=rets[-1].end_line)
                if src.lang == "py":  # CUDA keeps the call's own position (see _after)
                    after[id(c.expr)] = c_pos + inner_width * 0.9999
        for lp in src.loops:
            parent = loop_map.get(lp.parent) if lp.parent is not None else (ctx_loops[-1] if ctx_loops else None)
            cp = Loop(loop_map[lp.id], dst.key, lp.kind, rename.get(lp.var, lp.var) if lp.var else None,
                      self.copy(lp.start, rename, memo, inlined), self.copy(lp.stop, rename, memo, inlined),
                      self.copy(lp.step, rename, memo, inlined),
                      {k: self.copy(v, rename, memo, inlined) for k, v in lp.options.items()}, lp.line, lp.end_line,
                      parent, lp.unroll, ctx_guards + tuple(self.copy(g, rename, memo, inlined) for g in lp.guards),
                      order=at(lp.line), end_order=at(lp.end_line))
            dst.loops.append(cp)
        for a in src.assigns:
            value = a.value
            if a.index is not None and id(value) in inlined:
                ret = inlined[id(value)]
                if ret.kind == "tuple" and a.index < len(ret.args):
                    new_value = ret.args[a.index]
                    index = None
                else:
                    new_value, index = ret, a.index
            else:
                new_value, index = self.copy(value, rename, memo, inlined), a.index
            dst.assigns.append(Assign(tuple(rename.get(t, t) for t in a.targets), new_value, a.line, a.end_line,
                                      loops_of(a.loops),
                                      ctx_guards + tuple(self.copy(g, rename, memo, inlined) for g in a.guards),
                                      index, a.aug, order=_after(value, after, at(a.line))))
        for c in src.calls:
            if id(c.expr) in inlined:
                continue
            dst.calls.append(Call(c.name, self.copy(c.expr, rename, memo, inlined), loops_of(c.loops),
                                  ctx_guards + tuple(self.copy(g, rename, memo, inlined) for g in c.guards),
                                  order=_after(c.expr, after, at(c.line))))
        return [self.copy(r, rename, memo, inlined) for r in src.returns]

    def copy(self, e: Expr | None, rename: dict[str, str], memo: dict[int, Expr], inlined: dict[int, Expr]) -> Expr:
        """``e`` with names renamed and inlined calls replaced; a node copied twice is the same copy (calls and
        the assignments holding them keep sharing nodes). A subtree with nothing to rename or replace is shared,
        not copied (expressions are never mutated after lowering): most of a kernel's own code is such."""
        if e is None:
            return None  # type: ignore[return-value]
        key = id(e)
        hit = memo.get(key)
        if hit is not None:
            return hit
        hit = inlined.get(key)
        if hit is not None:
            return hit
        if e.kind == "name":
            new = rename.get(e.op)
            out = e if new is None else Expr("name", new, (), None, None, e.value, e.line, e.end_line)
        elif not rename and not inlined:
            out = e
        else:
            cp = self.copy
            args = e.args
            new_args = tuple([cp(a, rename, memo, inlined) for a in args]) if args else args
            kwargs = e.kwargs
            new_kwargs = {k: cp(v, rename, memo, inlined) for k, v in kwargs.items()} if kwargs else None
            recv = e.recv
            new_recv = cp(recv, rename, memo, inlined) if recv is not None else None
            if (new_recv is recv and (kwargs is None or (new_kwargs is not None and all(
                    new_kwargs[k] is v for k, v in kwargs.items()))) and all(a is b for a, b in zip(new_args, args))):
                out = e
            else:
                out = Expr(e.kind, e.op, new_args, new_kwargs, new_recv, e.value, e.line, e.end_line)
        memo[key] = out
        return out


def _after(e: Expr, after: dict[int, float], default: float) -> float:
    """The execution position of a statement whose expression ``e`` holds inlined helper calls: just after the
    last of their bodies (the helper runs before the statement that uses its value), else ``default``.

    Only Triton helpers are placed this way: before, a value returned by a helper outside any loop did not reach
    its use, so ``q = _quantize(x, ...); tl.store(q_ptr, q)`` did not count as storing data derived from ``x``.
    CUDA helpers keep the old placement, because the checks read a value returned by a block reduction helper
    (shuffles, then a shared-memory read) as element-wise in the shared load, which the old placement hid."""
    if not after:
        return default
    best = None
    stack = [e]
    while stack:
        x = stack.pop()
        p = after.get(id(x))
        if p is not None:
            best = p if best is None else max(best, p)
            continue
        stack.extend(x.args)
        if x.kwargs:
            stack.extend(x.kwargs.values())
        if x.recv is not None:
            stack.append(x.recv)
    return default if best is None else max(best, default)


def inline_kernels(facts: Facts) -> None:
    """Replace every entry kernel of ``facts`` by its inlined copy (in place)."""
    inl = Inliner(facts)
    for key in entry_kernels(facts):
        f = facts.functions[key]
        if any(inl.callee(c.name, f) is not None for c in f.calls if c.expr.recv is None):
            facts.functions[key] = inl.kernel(f)
            if f.lang == "cuda":
                _register_arrays(facts, facts.functions[key])
        else:
            f.inlined = True


def _register_arrays(facts: Facts, fn: Function) -> None:
    """A CUDA helper that takes a pointer into the caller's register array (``unpack(v, vals + i * 4)``) writes and
    reads registers, not memory: once inlined, its stores through that pointer become writes of the array (so the
    array's value carries what was stored) and its loads stop counting as global loads."""
    arrays = {t.text.split("[", 1)[0].split()[-1] for t in facts.tokens if t.kind == "array" and t.func == fn.key}
    if not arrays:
        return
    defs = fn.defs()

    def array_of(e: Expr, depth: int = 0) -> str | None:
        if depth > 6:
            return None
        if e.kind == "name":
            if e.op in arrays:
                return e.op
            d = defs.get(e.op, [])
            return array_of(d[0].value, depth + 1) if len(d) == 1 else None
        if e.kind == "bin" and e.op in ("+", "-") and e.args:
            return array_of(e.args[0], depth + 1)
        if e.kind == "unary" and e.op == "&" and e.args and e.args[0].kind == "sub" and e.args[0].args:
            return array_of(e.args[0].args[0], depth + 1)
        return None

    kept: list[Call] = []
    for c in fn.calls:
        ptr = c.expr.args[0] if c.name in ("load", "store") and c.expr.args else None
        arr = array_of(ptr) if ptr is not None else None
        if arr is None:
            kept.append(c)
        elif c.name == "store" and len(c.expr.args) == 2:
            fn.assigns.append(Assign((arr,), Expr("other", "item-write", (ptr, c.expr.args[1]), line=c.line,
                                                  end_line=c.end_line), c.line, c.end_line, c.loops, c.guards,
                                     order=c.order))
    fn.calls = kept
    fn._defs = None
