"""Facts from CUDA C++ (tree-sitter, CUDA grammar): ``.cu`` files and sources handed to ``load_inline``.

Lowers ``__global__``/``__device__``/host functions to :mod:`d2kgrade.static.ir` records and collects CUDA
constructs as :class:`~d2kgrade.static.ir.Token` s: ``#pragma``, ``#include``, inline ``asm`` bodies, vector
types (``float4``, ``uint4``, ``half2``, ``__nv_bfloat162``...), ``reinterpret_cast`` targets, and
``__shared__`` buffers. Reads through pointers become ``load`` calls and writes through them ``store`` calls.
``#if 0`` blocks, ``if (0)`` branches and statements after ``return``/``break``/``continue`` are dead code.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable
from functools import cache
from typing import TYPE_CHECKING

from d2kgrade.static.cudaexpr import _SCALAR_DTYPES, VECTOR_TYPES, CudaExprMixin, _num
from d2kgrade.static.facts import Facts
from d2kgrade.static.ir import LAUNCH_ALIAS, Assign, Call, Expr, Function, Loop, SharedBuffer, Token

log = logging.getLogger(__name__)

if TYPE_CHECKING:
    import tree_sitter as ts


@cache
def _parser() -> ts.Parser:
    """The CUDA parser, built on first use: a file without CUDA code never imports tree-sitter."""
    import tree_sitter as ts
    import tree_sitter_cuda as tsc

    return ts.Parser(ts.Language(tsc.language()))

def _first_error(node: ts.Node) -> ts.Node | None:
    stack = [node]
    while stack:
        n = stack.pop()
        if n.type == "ERROR" or n.is_missing:
            return n
        if n.has_error:
            stack.extend(reversed(n.children))
    return None


class CudaLowerer(CudaExprMixin):
    """Lowers one CUDA source (a file, or one ``load_inline`` string at ``offset`` lines into the file)."""

    def __init__(self, facts: Facts, src: bytes, offset: int, source: int, next_loop_id: list[int]) -> None:
        self.facts = facts
        self.src = src
        self.off = offset
        self.source = source
        self.loop_ids = next_loop_id
        self.ns_alias: dict[str, str] = {}
        self.f: Function | None = None
        self.loops: tuple[int, ...] = ()
        self.guards: tuple[Expr, ...] = ()
        self.pointers: set[str] = set()
        self.arrays: set[str] = set()
        self.views: dict[str, str] = {}
        """Pointers into a local's registers (``h2 = reinterpret_cast<half2*>(&v)``) -> that local."""
        self.scopes: list[dict[str, str]] = [{}]
        """Block scopes of the current function: a name declared again in another block (``unsigned key`` in two
        loops) is a different variable, renamed ``key@<line>``."""
        self.declared: set[str] = set()
        self.pending_unroll = False
        self.unroll_rows: dict[int, tuple[str, int]] = {}
        """Row of a loop -> (text, row) of a ``#pragma`` blanked before it by :func:`_blank_body_pragmas`."""

    def text(self, n: ts.Node) -> str:
        return self.src[n.start_byte:n.end_byte].decode("utf-8", "replace")

    def scoped(self, name: str) -> str:
        """The variable a name refers to here (innermost block first)."""
        for sc in reversed(self.scopes):
            if name in sc:
                return sc[name]
        return name

    def declare(self, name: str, line: int) -> str:
        """Declare ``name`` in the current block; a second declaration in the function gets its own name."""
        new = name if name not in self.declared else f"{name}@{line}"
        self.declared.add(name)
        self.scopes[-1][name] = new
        return new

    def lines(self, n: ts.Node) -> tuple[int, int]:
        return n.start_point[0] + 1 + self.off, n.end_point[0] + 1 + self.off

    def token(self, kind: str, text: str, n: ts.Node) -> None:
        a, b = self.lines(n)
        self.facts.tokens.append(Token(kind, text, self.f.key if self.f else "", a, b))

    # ------------------------------------------------------------------------------------------ top level

    def unit(self, node: ts.Node) -> None:
        for c in node.children:
            self.top(c)

    def top(self, n: ts.Node) -> None:
        t = n.type
        if t == "function_definition":
            self.function(n, [])
        elif t == "template_declaration":
            params = []
            plist = n.child_by_field_name("parameters")
            for p in (plist.children if plist is not None else []):
                ident = [c for c in p.children if c.type in ("identifier", "type_identifier")]
                if ident:
                    params.append(self.text(ident[-1]))
            for c in n.children:
                if c.type == "function_definition":
                    self.function(c, params)
                elif c.type in ("declaration", "struct_specifier", "class_specifier"):
                    self.top(c)
        elif t in ("namespace_definition", "linkage_specification"):
            body = n.child_by_field_name("body")
            if body is not None:
                self.unit(body)
        elif t in ("struct_specifier", "class_specifier"):
            body = n.child_by_field_name("body")
            for c in (body.children if body is not None else []):
                if c.type in ("function_definition", "template_declaration"):
                    self.top(c)
        elif t == "preproc_include":
            path = n.child_by_field_name("path")
            self.token("include", self.text(path).strip("<>\"") if path is not None else "", n)
        elif t == "preproc_def":
            name, value = n.child_by_field_name("name"), n.child_by_field_name("value")
            if name is not None and value is not None:
                v = _num(self.text(value).strip().strip("()"))
                if v is not None:
                    self.facts.consts[self.text(name)] = v
        elif t == "preproc_call":
            self.token("pragma" if self.text(n).lstrip().startswith("#pragma") else "preproc", self.text(n), n)
        elif t in ("preproc_if", "preproc_ifdef", "preproc_else", "preproc_elif"):
            if self._dead_preproc(n):
                alt = n.child_by_field_name("alternative")
                if alt is not None:
                    self.top(alt)
                return
            for c in n.children:
                if c.type not in ("identifier",) and n.field_name_for_child(n.children.index(c)) != "condition":
                    self.top(c)
        elif t == "namespace_alias_definition":
            ids = [self.text(c) for c in n.children if c.type in ("namespace_identifier", "nested_namespace_specifier",
                                                                   "qualified_identifier")]
            if len(ids) == 2:
                self.ns_alias[ids[0]] = ids[1]
            if "cooperative_groups" in self.text(n):
                self.token("cg", self.text(n), n)
        elif t == "declaration":
            self.declaration(n)
        elif t in ("using_declaration", "alias_declaration", "type_definition"):
            if "cooperative_groups" in self.text(n):
                self.token("cg", self.text(n), n)

    def _dead_preproc(self, n: ts.Node) -> bool:
        cond = n.child_by_field_name("condition")
        return n.type == "preproc_if" and cond is not None and self.text(cond).strip() in ("0", "false")

    def function(self, n: ts.Node, template_params: list[str]) -> None:
        decl = n.child_by_field_name("declarator")
        while decl is not None and decl.type in ("pointer_declarator", "reference_declarator"):
            decl = decl.child_by_field_name("declarator") or (decl.children[-1] if decl.children else None)
        if decl is None or decl.type != "function_declarator":
            return
        name_node = decl.child_by_field_name("declarator")
        name = self.text(name_node).split("::")[-1].strip() if name_node is not None else "?"
        quals = {self.text(c) for c in n.children if c.type in ("__global__", "__device__", "__host__")}
        qual_text = " ".join(self.text(c) for c in n.children if c.type not in ("compound_statement",
                                                                                  "function_declarator"))
        quals |= {q for q in ("__global__", "__device__", "__host__") if q in qual_text}
        kind = "global" if "__global__" in quals else "device" if "__device__" in quals else "cpp"
        params, pointers, refs, vectors = self.parameters(decl.child_by_field_name("parameters"))
        a, b = self.lines(n)
        key = "cu:" + (LAUNCH_ALIAS if name == "launch" else name)
        if key in self.facts.functions and self.facts.functions[key].lang == "cuda":
            if n.child_by_field_name("body") is None:
                return
            prev = self.facts.functions[key]
            if prev.assigns or prev.calls:  # overloads: keep the first definition, note the rest
                key = f"cu:{name}@{a}"
        f = Function(key, name, "cuda", kind, params, a, b, constexprs=set(template_params),  # type: ignore[arg-type]
                     pointer_params=pointers, ref_params=refs, source=self.source, vector_params=vectors)
        lb = [c for c in n.children if c.type == "launch_bounds"]
        if lb:
            nums = [c for c in lb[0].children if c.type not in ("(", ")", ",", "__launch_bounds__")]
            f.launch_bounds = self.expr(nums[0]) if nums else None
            self.token("launch_bounds", self.text(lb[0]), lb[0])
        body = n.child_by_field_name("body")
        if body is None:
            return
        self.facts.functions[key] = f
        saved = (self.f, self.pointers, self.arrays, self.loops, self.guards, self.scopes, self.declared)
        self.f, self.pointers, self.arrays, self.loops, self.guards = f, set(pointers), set(), (), ()
        self.scopes, self.declared = [{p: p for p in params}], set(params)
        self.block(body)
        self.f, self.pointers, self.arrays, self.loops, self.guards, self.scopes, self.declared = saved

    def parameters(self, plist: ts.Node | None) -> tuple[list[str], set[str], set[str], set[str]]:
        """Names of a parameter list; which are pointers, references, and pointers to a vector type."""
        params: list[str] = []
        pointers: set[str] = set()
        refs: set[str] = set()
        vectors: set[str] = set()
        for p in (plist.children if plist is not None else []):
            if p.type not in ("parameter_declaration", "optional_parameter_declaration"):
                continue
            d = p.child_by_field_name("declarator")
            is_ptr = is_ref = False
            while d is not None and d.type not in ("identifier",):
                if d.type in ("pointer_declarator", "array_declarator"):
                    is_ptr = True
                if d.type == "reference_declarator":
                    is_ref = True
                nxt = d.child_by_field_name("declarator")
                if nxt is None:
                    ids = [c for c in d.children if c.type == "identifier"]
                    # ``float (&acc)[8]``: the name sits in a parenthesized reference declarator
                    ids = ids or [c for c in d.children if c.type.endswith("_declarator")]
                    nxt = ids[0] if ids else None
                d = nxt
            if d is not None:
                pname = self.text(d)
                params.append(pname)
                if is_ptr and not is_ref:  # a reference to an array is the caller's array, not memory
                    pointers.add(pname)
                    ty = p.child_by_field_name("type")
                    vec = self.vector_type(self.text(ty)) if ty is not None else None
                    if vec is not None:  # const uint4* __restrict__ x: 128-bit accesses through x
                        vectors.add(pname)
                        self.token("type", vec, p)
                if is_ref:
                    refs.add(pname)
        return params, pointers, refs, vectors

    def lambda_function(self, name: str, node: ts.Node) -> None:
        """``auto step = [&](int s, int k0) { ... };`` inside a function: a device helper named ``step`` whose body
        sees the enclosing function's variables (captures), inlined where it is called like any helper."""
        assert self.f is not None
        decl = next((c for c in node.children if c.type == "lambda_declarator"), None)
        plist = decl.child_by_field_name("parameters") if decl is not None else None
        params, pointers, refs, vectors = self.parameters(plist)
        body = node.child_by_field_name("body") or next((c for c in node.children if c.type == "compound_statement"),
                                                          None)
        if body is None:
            return
        a, b = self.lines(node)
        key = "cu:" + name if "cu:" + name not in self.facts.functions else f"cu:{name}@{a}"
        outer = self.f
        kind = "device" if outer.is_device else "cpp"
        f = Function(key, name, "cuda", kind, params, a, b, constexprs=set(outer.constexprs),  # type: ignore[arg-type]
                     pointer_params=pointers | outer.pointer_params, ref_params=refs | set(params) - set(params),
                     source=self.source, vector_params=vectors | outer.vector_params)
        self.facts.functions[key] = f
        saved = (self.f, self.pointers, self.arrays, self.loops, self.guards, self.scopes, self.declared)
        self.f, self.pointers, self.loops, self.guards = f, self.pointers | pointers, (), ()
        self.scopes = self.scopes + [{p: p for p in params}]
        self.declared = set(self.declared) | set(params)
        self.block(body)
        self.f, self.pointers, self.arrays, self.loops, self.guards, self.scopes, self.declared = saved

    def declaration(self, n: ts.Node) -> None:
        type_node = n.child_by_field_name("type")
        type_text = self.text(type_node) if type_node is not None else ""
        qual_text = " ".join(self.text(c) for c in n.children if c.type in ("type_qualifier", "storage_class_specifier"))
        shared = "__shared__" in qual_text
        if type_text.split("::")[-1] in VECTOR_TYPES:
            self.token("type", type_text.split("::")[-1], n)
        if "cooperative_groups" in type_text or type_text.startswith(("cg::", "thread_block")):
            self.token("cg", type_text, n)
        is_const = "constexpr" in qual_text or ("const" in qual_text.split() and self.f is None)
        for d in n.children_by_field_name("declarator"):
            value = None
            if d.type == "function_declarator" and self.f is not None:
                ctor = self._vexing_ctor(type_text, d)  # dim3 grid(B * H, S); parsed as a function declaration
                if ctor is not None:
                    a, b = self.lines(n)
                    self.f.assigns.append(Assign((ctor[0],), ctor[1], a, b, self.loops, self.guards))
                    continue
            if d.type == "init_declarator":
                value = d.child_by_field_name("value")
                d = d.child_by_field_name("declarator")
            is_ptr, dims = False, []
            while d is not None and d.type != "identifier":
                if d.type == "pointer_declarator":
                    is_ptr = True
                if d.type == "array_declarator":
                    size = d.child_by_field_name("size")
                    dims.append(self.text(size) if size is not None else "")
                nxt = d.child_by_field_name("declarator")
                if nxt is None:
                    ids = [c for c in d.children if c.type in ("identifier", "field_identifier")]
                    nxt = ids[0] if ids else None
                    if nxt is not None and nxt.type == "field_identifier":
                        break
                d = nxt
            if d is None:
                continue
            a, b = self.lines(n)
            name = self.declare(self.text(d), a) if self.f is not None else self.text(d)
            if shared:
                self.facts.shared.append(SharedBuffer(name, type_text, list(reversed(dims)),
                                                      self.f.key if self.f else "", a))
                self.arrays.add(name)
            elif dims:
                self.arrays.add(name)
                if self.f is not None:
                    self.token("array", f"{type_text} {name}[{']['.join(reversed(dims))}]", n)
            if is_ptr:
                self.pointers.add(name)
            if is_ptr and self.f is not None and (vec := self.vector_type(type_text)) is not None:
                self.f.vector_params.add(name)  # const Vec<T>* xr = x + row * nvec
                self.token("type", vec, n)
            elif not is_ptr and (vec := self.vector_type(type_text)) is not None and vec != type_text:
                self.token("type", vec, n)  # Vec<T> raw = __ldcs(...): a vector value behind an alias
            if value is not None and value.type == "lambda_expression" and self.f is not None:
                self.lambda_function(name, value)
                continue
            if value is not None:
                if value.type == "initializer_list":
                    val = Expr("tuple", "", tuple(self.expr(c) for c in value.named_children), line=a, end_line=b)
                else:
                    val = self.expr(value)
                    dt = _SCALAR_DTYPES.get(type_text.split("::")[-1]) if not is_ptr and not dims else None
                    if dt and val.kind not in ("const", "cast"):
                        val = Expr("cast", dt, (val,), line=val.line, end_line=val.end_line)
                if val.kind == "call" and val.op == "reinterpret_cast":
                    self.pointers.add(name)
                if is_ptr and self.register_view(val):  # h = reinterpret_cast<const bf162*>(&v): v's registers
                    self.pointers.discard(name)
                    self.arrays.add(name)
                    self.views[name] = next(x.args[0].op for x in val.walk() if x.kind == "unary" and x.op == "&")
                if self.f is not None:
                    self.f.assigns.append(Assign((name,), val, a, b, self.loops, self.guards))
                    if "constexpr" in qual_text or ("const" in qual_text.split() and val.kind == "const"
                                                    and not is_ptr and not dims):
                        self.f.constexprs.add(name)  # constexpr int V = Traits<T>::N; const int G = 8: compile-time
                elif is_const and val.kind == "const" and isinstance(val.value, (int, float)):
                    self.facts.consts[name] = val.value
                elif is_const and (v := _fold_const(val, self.facts.consts)) is not None:
                    self.facts.consts[name] = v  # constexpr float C = 2.0f * 0.79788f * LOG2E;
                if is_const and val.kind == "const" and isinstance(val.value, (int, float)) and self.f is not None:
                    self.facts.consts.setdefault(name, val.value)

    def _vexing_ctor(self, type_text: str, d: ts.Node) -> tuple[str, Expr] | None:
        """``dim3 grid(B * H, S);`` inside a function: tree-sitter reads it as the declaration of a function whose
        parameters are ``B *H`` and ``S``. Read back as ``grid = dim3(B * H, S)`` (a tuple of the arguments, as the
        unambiguous ``dim3 g(B, 4)`` is), when every parameter is a type-less name or a product of names."""
        ident = d.child_by_field_name("declarator")
        plist = d.child_by_field_name("parameters")
        if type_text.split("::")[-1] != "dim3" or ident is None or ident.type != "identifier" or plist is None:
            return None
        args: list[Expr] = []
        for p in plist.named_children:
            if p.type != "parameter_declaration":
                return None
            t = p.child_by_field_name("type")
            if t is None or t.type != "type_identifier":
                return None
            a, b = self.lines(p)
            left = Expr("name", self.text(t), line=a, end_line=b)
            decl = p.child_by_field_name("declarator")
            if decl is None:
                args.append(left)
            elif decl.type == "pointer_declarator" and (r := decl.child_by_field_name("declarator")) is not None \
                    and r.type == "identifier":
                args.append(Expr("bin", "*", (left, Expr("name", self.text(r), line=a, end_line=b)), line=a,
                                 end_line=b))
            else:
                return None
        a, b = self.lines(d)
        return self.text(ident), Expr("tuple", "", tuple(args), line=a, end_line=b)

    # ------------------------------------------------------------------------------------------ statements

    def block(self, n: ts.Node) -> None:
        self.scopes.append({})
        try:
            for c in n.children:
                self.stmt(c)
                if c.type in ("return_statement", "break_statement", "continue_statement"):
                    break
        finally:
            self.scopes.pop()

    def stmt(self, n: ts.Node) -> None:
        t = n.type
        f = self.f
        assert f is not None
        if t == "compound_statement":
            self.block(n)
        elif t == "declaration":
            self.declaration(n)
        elif t == "expression_statement":
            for c in n.named_children:
                self.effect(c)
        elif t in ("for_statement", "for_range_loop", "while_statement", "do_statement"):
            self.loop(n)
        elif t == "if_statement":
            cond_node = n.child_by_field_name("condition")
            cond = self.expr(cond_node) if cond_node is not None else Expr("other")
            inner = cond.args[0] if cond.kind == "other" and cond.op == "condition" and cond.args else cond
            cons, alt = n.child_by_field_name("consequence"), n.child_by_field_name("alternative")
            truth = None
            if inner.kind == "const" and isinstance(inner.value, (int, float, bool)):
                truth = bool(inner.value)
            saved = self.guards
            if truth is not False and cons is not None:
                self.guards = saved + ((cond,) if truth is None else ())
                self.stmt(cons)
            if truth is not True and alt is not None:
                self.guards = saved + ((Expr("unary", "not", (cond,), line=cond.line, end_line=cond.end_line),)
                                       if truth is None else ())
                for c in alt.named_children:
                    self.stmt(c)
            self.guards = saved
        elif t == "return_statement":
            for c in n.named_children:
                f.returns.append(self.expr(c))
        elif t == "preproc_call":
            text = self.text(n)
            self.token("pragma" if text.lstrip().startswith("#pragma") else "preproc", text, n)
            if re.search(r"#pragma\s+unroll", text):
                self.pending_unroll = True
        elif t in ("preproc_if", "preproc_ifdef", "preproc_else", "preproc_elif"):
            if self._dead_preproc(n):
                alt = n.child_by_field_name("alternative")
                if alt is not None:
                    self.stmt(alt)
                return
            for i, c in enumerate(n.children):
                if n.field_name_for_child(i) not in ("condition", "name"):
                    self.stmt(c)
        elif t in ("switch_statement", "case_statement", "labeled_statement", "else_clause", "try_statement"):
            for c in n.named_children:
                if c.type.endswith("statement") or c.type in ("declaration", "compound_statement", "else_clause"):
                    self.stmt(c)
                elif t == "switch_statement" and c.type == "condition_clause":
                    self.expr(c)
        elif t in ("gnu_asm_expression",):
            self.effect(n)

    def effect(self, n: ts.Node) -> None:
        """An expression evaluated for its effect: assignment, store, update, call."""
        f = self.f
        assert f is not None
        t = n.type
        a, b = self.lines(n)
        if t == "assignment_expression":
            left, right = n.child_by_field_name("left"), n.child_by_field_name("right")
            op_node = n.child_by_field_name("operator")
            op = self.text(op_node) if op_node is not None else "="
            if left is None or right is None:
                return
            val = self.expr(right)
            aug = op[:-1] if op != "=" else ""
            if left.type == "identifier":
                name = self.scoped(self.text(left))
                if aug:
                    val = Expr("bin", aug, (Expr("name", name, line=a, end_line=a), val), line=a, end_line=b)
                f.assigns.append(Assign((name,), val, a, b, self.loops, self.guards, None, aug))
                return
            ptr = self.pointer_target(left)
            if ptr is not None:
                if aug:
                    val = Expr("bin", aug, (Expr("call", "load", (ptr,), line=a, end_line=a), val),
                               line=a, end_line=b)
                e = Expr("call", "store", (ptr, val), line=a, end_line=b)
                f.calls.append(Call("store", e, self.loops, self.guards))
                return
            base = left
            while base.type in ("subscript_expression", "field_expression", "pointer_expression",
                                "parenthesized_expression"):
                nxt = base.child_by_field_name("argument")
                if nxt is None:
                    nxt = base.named_children[0] if base.named_children else None
                if nxt is None:
                    break
                base = nxt
            if base.type == "identifier":
                name = self.scoped(self.text(base))
                target = self.expr(left)
                if aug:
                    val = Expr("bin", aug, (target, val), line=a, end_line=b)
                names = (name, self.views[name]) if name in self.views else (name,)  # o2[j] = v writes out too
                f.assigns.append(Assign(names, Expr("other", "item-write", (target, val), line=a, end_line=b),
                                        a, b, self.loops, self.guards, None, aug))
            return
        if t == "update_expression":
            arg = n.child_by_field_name("argument")
            op_node = n.child_by_field_name("operator")
            if arg is not None and arg.type == "identifier":
                name = self.scoped(self.text(arg))
                op = "+" if op_node is not None and self.text(op_node) == "++" else "-"
                f.assigns.append(Assign((name,), Expr("bin", op, (Expr("name", name, line=a, end_line=a),
                                                                  Expr("const", "1", value=1, line=a, end_line=a)),
                                                      line=a, end_line=b), a, b, self.loops, self.guards, None, op))
            return
        if t == "comma_expression":
            for c in n.named_children:
                self.effect(c)
            return
        self.expr(n)

    def pointer_target(self, left: ts.Node) -> Expr | None:
        """The address written by ``p[i] = v`` / ``*(p + i) = v`` when ``p`` is a (global) pointer."""
        if left.type == "subscript_expression":
            base = left.child_by_field_name("argument")
            idx = left.child_by_field_name("indices")
            if base is None:
                return None
            be = self.expr(base)
            if self._is_pointer(be):
                a, b = self.lines(left)
                ie = [self.expr(c) for c in idx.named_children] if idx is not None else []
                return Expr("bin", "+", (be, ie[0] if ie else Expr("const", "0", value=0)), line=a, end_line=b)
            return None
        if left.type == "pointer_expression" and self.text(left).lstrip().startswith("*"):
            arg = left.child_by_field_name("argument")
            if arg is not None:
                ae = self.expr(arg)
                if self._is_pointer(ae):
                    return ae
        if left.type == "field_expression":  # v4ptr[i].x = ... ; treat as a store through the base
            arg = left.child_by_field_name("argument")
            if arg is not None:
                return self.pointer_target(arg)
        if left.type == "parenthesized_expression" and left.named_children:
            return self.pointer_target(left.named_children[0])
        return None

    def register_view(self, e: Expr) -> bool:
        """Is ``e`` a pointer into a local variable's registers (``&v`` of a non-pointer local, possibly cast)?"""
        for x in e.walk():
            if x.kind == "unary" and x.op == "&" and x.args and x.args[0].kind == "name" and (
                    x.args[0].op not in self.pointers or x.args[0].op in self.arrays):
                return x.args[0].op not in (self.f.params if self.f is not None else [])
        return False

    def _is_pointer(self, e: Expr) -> bool:
        if self.register_view(e):
            return False  # reinterpret_cast<const half2*>(&v)[i]: a read of registers, not of memory
        for x in e.walk():
            if x.kind == "name" and x.op in self.pointers and x.op not in self.arrays:
                return True
            if x.kind == "call" and x.op in ("reinterpret_cast", "load"):
                return False
        return False

    def loop(self, n: ts.Node) -> None:
        f = self.f
        assert f is not None
        t = n.type
        a, b = self.lines(n)
        var, start, stop, step = None, None, None, None
        self.scopes.append({})
        try:
            self._loop(n, f, t, a, b, var, start, stop)
        finally:
            self.scopes.pop()

    def _loop(self, n: ts.Node, f: Function, t: str, a: int, b: int, var: str | None, start: Expr | None,
              stop: Expr | None) -> None:
        if t == "for_statement":
            init = n.child_by_field_name("initializer")
            if init is not None:
                if init.type == "declaration":
                    self.declaration(init)
                    d = init.child_by_field_name("declarator")
                    if d is not None and d.type == "init_declarator":
                        nm = d.child_by_field_name("declarator")
                        val = d.child_by_field_name("value")
                        var = self.scoped(self.text(nm)) if nm is not None else None
                        start = self.expr(val) if val is not None else None
                else:
                    self.effect(init)
                    if init.type == "assignment_expression":
                        left = init.child_by_field_name("left")
                        right = init.child_by_field_name("right")
                        var = self.scoped(self.text(left)) if left is not None else None
                        start = self.expr(right) if right is not None else None
            cond = n.child_by_field_name("condition")
            stop = self.expr(cond) if cond is not None else None
        elif t in ("while_statement", "do_statement"):
            cond = n.child_by_field_name("condition")
            stop = self.expr(cond) if cond is not None else None
            if stop is not None and stop.kind == "other" and stop.args:
                stop = stop.args[0]
            if stop is not None and stop.kind == "const" and stop.value in (0, False) and t == "while_statement":
                return
        elif t == "for_range_loop":
            d = n.child_by_field_name("declarator")
            var = self.text(d).lstrip("&*") if d is not None else None
            right = n.child_by_field_name("right")
            stop = self.expr(right) if right is not None else None
        kind = "while" if t in ("while_statement", "do_statement") else "for"
        blanked = self.unroll_rows.get(n.start_point[0])
        if blanked is not None:
            row = blanked[1] + 1 + self.off
            self.facts.tokens.append(Token("pragma", blanked[0], f.key, row, row))
            self.pending_unroll = self.pending_unroll or bool(re.search(r"#\s*pragma\s+unroll", blanked[0]))
        loop = Loop(self.loop_ids[0] + 1, f.key, kind, var, start, stop, None, {}, a, b,
                    self.loops[-1] if self.loops else None, unroll=self.pending_unroll, guards=self.guards)
        self.loop_ids[0] += 1
        self.pending_unroll = False
        f.loops.append(loop)
        saved = self.loops
        self.loops = saved + (loop.id,)
        if t == "for_statement":
            upd = n.child_by_field_name("update")
            if upd is not None:
                n_assign = len(f.assigns)
                self.effect(upd)
                new = f.assigns[n_assign:]
                if new:
                    loop.step = new[-1].value
        body = n.child_by_field_name("body")
        if body is not None:
            self.stmt(body)
        self.loops = saved



# Attributes the CUDA grammar does not know; blanked (same length, so line numbers hold) before parsing.
_UNSUPPORTED_ATTRS = re.compile(r"__(?:align|cluster_dims|maxnreg)__\s*\([^()]*\)")


def _blank(m: re.Match[str]) -> str:
    return re.sub(r"[^\n]", " ", m.group(0))


def _fold_const(e: Expr, consts: dict, depth: int = 0) -> int | float | None:
    """Value of a file-scope constant initialiser built from literals and earlier constants with + - * /."""
    if depth > 12:
        return None
    if e.kind == "const":
        return e.value if isinstance(e.value, (int, float)) and not isinstance(e.value, bool) else None
    if e.kind == "name":
        v = consts.get(e.op)
        return v if isinstance(v, (int, float)) and not isinstance(v, bool) else None
    if e.kind in ("cast", "other") and len(e.args) == 1:
        return _fold_const(e.args[0], consts, depth + 1)
    if e.kind == "unary" and e.op in ("-", "+") and e.args:
        v = _fold_const(e.args[0], consts, depth + 1)
        return None if v is None else (-v if e.op == "-" else v)
    if e.kind == "bin" and e.op in ("+", "-", "*", "/") and len(e.args) == 2:
        a, b = _fold_const(e.args[0], consts, depth + 1), _fold_const(e.args[1], consts, depth + 1)
        if a is None or b is None or (e.op == "/" and b == 0):
            return None
        if e.op == "/" and isinstance(a, int) and isinstance(b, int):
            return a // b if a * b >= 0 else -(-a // b)  # C integer division truncates
        return {"+": a + b, "-": a - b, "*": a * b, "/": a / b if e.op == "/" else 0}[e.op]
    return None


_PRAGMA = re.compile(r"#\s*pragma\b")


def _blank_body_pragmas(text: str) -> tuple[str, dict[int, tuple[str, int]]]:
    """Blank (same length) the ``#pragma`` lines that stand as the body of an unbraced loop or ``if`` header
    (``for (...)`` / ``#pragma unroll`` / ``for (...) ...``), which nvcc accepts and the grammar does not.
    Returns the text and, by the row of the next code line (the nested loop), the pragma's text and row."""
    lines = text.split("\n")
    rows: dict[int, tuple[str, int]] = {}
    prev = ""
    pending: list[tuple[str, int]] = []
    for i, ln in enumerate(lines):
        s = ln.strip()
        if _PRAGMA.match(s) and (prev.endswith(")") or pending):
            pending.append((s, i))
            lines[i] = " " * len(ln)
            continue
        if s:
            if pending:
                rows[i] = pending[0]
                pending = []
            prev = s.split("//", 1)[0].rstrip()
    return "\n".join(lines), rows


def add_cuda_source(facts: Facts, text: str, offset: int, source: int) -> None:
    """Parse one CUDA source and add its functions and tokens to ``facts`` (errors to ``facts.errors``)."""
    text = _UNSUPPORTED_ATTRS.sub(_blank, text)
    src = text.encode("utf-8", "replace")
    tree = _parser().parse(src)
    root = tree.root_node
    where = "CUDA source" if source == 0 else f"CUDA source passed to load_inline (line {offset + 1})"
    unroll_rows: dict[int, tuple[str, int]] = {}
    if root.has_error:  # retry without pragmas in the body position of an unbraced loop header
        text2, unroll_rows = _blank_body_pragmas(text)
        if unroll_rows:
            tree2 = _parser().parse(text2.encode("utf-8", "replace"))
            if not tree2.root_node.has_error:
                src, root = text2.encode("utf-8", "replace"), tree2.root_node
    if root.has_error:
        bad = _first_error(root)
        line = (bad.start_point[0] + 1 + offset) if bad is not None else offset + 1
        what = f"missing '{bad.type}'" if bad is not None and bad.is_missing else "syntax error"
        facts.errors.append(f"{where} does not parse: {what} at line {line}")
        return
    ids = facts.memo("loop_ids", lambda: [10_000])
    facts.memo("cuda_vector_aliases", dict).update(_vector_aliases(root, src))
    before = set(facts.functions)
    lowerer = CudaLowerer(facts, src, offset, source, ids)
    lowerer.unroll_rows = unroll_rows
    lowerer.unit(root)
    _resolve_local_launches(facts, [f for k, f in facts.functions.items() if k not in before])


def _vector_aliases(root: ts.Node, src: bytes) -> dict[str, str]:
    """Type names that stand for a vector type: ``using vec_t = uint4;``, ``typedef float4 f4;``, and traits
    (``template <> struct VecTraits<float> { using type = float4; };`` makes ``VecTraits`` and an alias of
    ``typename VecTraits<T>::type`` vector types)."""
    def text(n: ts.Node) -> str:
        return src[n.start_byte:n.end_byte].decode("utf-8", "replace")

    raw: dict[str, list[str]] = {}
    stack = [root]
    while stack:
        n = stack.pop()
        stack.extend(n.children)
        if n.type == "alias_declaration":
            name = n.child_by_field_name("name")
            ty = n.child_by_field_name("type")
            if name is None or ty is None:
                continue
            raw.setdefault(text(name), []).append(text(ty))
            owner = n.parent
            while owner is not None and owner.type not in ("struct_specifier", "class_specifier"):
                owner = owner.parent
            oname = owner.child_by_field_name("name") if owner is not None else None
            if oname is not None:
                base = text(oname).split("<")[0].strip()
                raw.setdefault(base, []).append(text(ty))
        elif n.type == "type_definition":
            ty = n.child_by_field_name("type")
            for d in n.children_by_field_name("declarator"):
                if ty is not None:
                    raw.setdefault(text(d).strip("*& "), []).append(text(ty))
    out: dict[str, str] = {}
    for _ in range(4):  # aliases of aliases
        for name, texts in raw.items():
            if name in out:
                continue
            for t in texts:
                for ident in re.findall(r"[A-Za-z_]\w*", t):
                    vec = ident if ident in VECTOR_TYPES else out.get(ident)
                    if vec is not None:
                        out[name] = vec
                        break
                if name in out:
                    break
    return out


def _resolve_local_launches(facts: Facts, funcs: list[Function]) -> None:
    """``auto kern = gemm_kernel<BM, BN>; kern<<<grid, block, smem>>>(...)``: the launch runs ``gemm_kernel`` (also
    when the local picks one of two instantiations with ``?:``)."""
    for f in funcs:
        for la in f.launches:
            if la.kernel in facts.functions:
                continue
            for d in reversed(f.defs().get(la.kernel[3:], [])):
                v = d.value
                if v.kind == "ternary" and len(v.args) == 3:  # auto k = flag ? kern<false> : kern<true>
                    v = next((b for b in v.args[1:] if b.kind == "name"
                              and "cu:" + b.op.split("::")[-1] in facts.functions), v)
                if v.kind == "name" and "cu:" + v.op.split("::")[-1] in facts.functions:
                    la.kernel = "cu:" + v.op.split("::")[-1]
                    la.template = la.template or (str(v.value).strip("<>").replace(" ", "") if v.value else "")
                    break


def cuda_edges(facts: Facts) -> Callable[[Function], list[str]]:
    """Control edges of CUDA functions: calls to other functions of the sources, and kernel launches."""

    def edges(f: Function) -> list[str]:
        out = []
        for c in f.calls:
            base = c.name.split("::")[-1].lstrip(".")
            k = "cu:" + base
            if k in facts.functions:
                out.append(k)
        out.extend(la.kernel for la in f.launches if la.kernel in facts.functions)
        return out

    return edges


def extract_cu(facts: Facts) -> None:
    """Fill ``facts`` from a ``.cu`` file: roots are the launched kernels, or every ``__global__`` when the file
    launches none (a kernel library without host code)."""
    add_cuda_source(facts, facts.text, 0, 0)
    if facts.errors:
        return
    funcs = facts.functions
    hosts = [k for k, f in funcs.items() if f.kind == "cpp"]
    launching = [k for k in hosts if funcs[k].launches]
    roots = launching or [k for k, f in funcs.items() if f.kind == "global"]
    facts.roots = roots
    edges = cuda_edges(facts)
    seen: set[str] = set()
    stack = list(roots)
    while stack:
        k = stack.pop()
        if k in seen or k not in funcs:
            continue
        seen.add(k)
        stack.extend(edges(funcs[k]))
    facts.reachable = seen
    for k in launching:
        facts.launches.extend(funcs[k].launches)
    from d2kgrade.static.inline import inline_kernels

    inline_kernels(facts)
    if not roots:
        facts.notes.append("no __global__ function")
