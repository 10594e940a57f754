"""Lowering of CUDA C++ expressions (tree-sitter nodes) to :class:`~d2kgrade.static.ir.Expr`, mixed into
:class:`~d2kgrade.static.cudafacts.CudaLowerer`: calls, casts and conversion intrinsics, kernel launches, inline
asm, and reads through pointers as ``load`` calls."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from d2kgrade.static.ir import LAUNCH_ALIAS, Assign, Call, Expr, Launch

if TYPE_CHECKING:
    import tree_sitter as ts

    from d2kgrade.static.facts import Facts
    from d2kgrade.static.ir import Function

VECTOR_TYPES = {"float2", "float4", "int2", "int4", "uint2", "uint4", "double2", "half2", "__half2",
                "__nv_bfloat162", "nv_bfloat162", "bfloat162", "char4", "uchar4", "short4", "longlong2",
                "ulonglong2", "float8", "bf16x8", "int8x16"}
_SCALAR_DTYPES = {"float": "fp32", "double": "fp64", "__half": "fp16", "half": "fp16", "__nv_bfloat16": "bf16",
                  "nv_bfloat16": "bf16", "int": "int32", "int64_t": "int64", "long": "int64", "long long": "int64",
                  "unsigned": "uint32", "uint32_t": "uint32", "int32_t": "int32", "size_t": "int64",
                  "float2": "fp32", "float4": "fp32"}
_CONVERSIONS = {"__bfloat162float": "fp32", "__half2float": "fp32", "__bfloat1622float2": "fp32",
                "__half22float2": "fp32", "__int2float_rn": "fp32", "__float2bfloat16": "bf16",
                "__float2bfloat16_rn": "bf16", "__float2half": "fp16", "__float2half_rn": "fp16",
                "__floats2bfloat162_rn": "bf16", "__float22bfloat162_rn": "bf16", "__floats2half2_rn": "fp16",
                "__float22half2_rn": "fp16", "__ll2float_rn": "fp32", "float": "fp32"}
_CMP_OPS = {"<", ">", "<=", ">=", "==", "!=", "&&", "||"}
_BUILTIN_DIMS = {"threadIdx", "blockIdx", "blockDim", "gridDim"}


def _num(text: str) -> object:
    t = text.replace("'", "")
    try:
        if t.lower().startswith("0x"):
            return int(t.rstrip("uUlL"), 16)
        t = t.rstrip("fFlLuU")
        if any(c in t for c in ".eE"):
            return float(t)
        return int(t, 8) if len(t) > 1 and t.startswith("0") else int(t)
    except ValueError:
        return None


class CudaExprMixin:
    """Expression lowering; the host class provides ``text``, ``lines``, ``token``, ``effect``, ``_is_pointer``
    and the ``f``/``loops``/``guards``/``ns_alias`` state."""

    facts: Facts
    f: Function | None
    loops: tuple[int, ...]
    guards: tuple[Expr, ...]
    ns_alias: dict[str, str]

    def scoped(self, name: str) -> str:
        """The variable a name refers to in the current block (the host class tracks block scopes)."""
        return name

    # ------------------------------------------------------------------------------------------ expressions

    def qualified(self, text: str) -> str:
        text = re.sub(r"\s+", "", text)
        head, sep, rest = text.partition("::")
        if sep and head in self.ns_alias:
            return self.ns_alias[head] + "::" + rest
        return text

    def expr(self, n: ts.Node) -> Expr:
        t = n.type
        a, b = self.lines(n)
        if t == "identifier":
            return Expr("name", self.scoped(self.text(n)), line=a, end_line=b)
        if t == "number_literal":
            txt = self.text(n)
            return Expr("const", txt, value=_num(txt), line=a, end_line=b)
        if t in ("true", "false"):
            return Expr("const", t, value=(t == "true"), line=a, end_line=b)
        if t in ("string_literal", "raw_string_literal", "concatenated_string", "char_literal", "null", "nullptr"):
            return Expr("const", self.text(n)[:80], value=self.text(n), line=a, end_line=b)
        if t in ("parenthesized_expression", "condition_clause"):
            kids = n.named_children
            if len(kids) == 1:
                return self.expr(kids[0])
            return Expr("other", "condition", tuple(self.expr(c) for c in kids), line=a, end_line=b)
        if t == "field_expression":
            arg, field = n.child_by_field_name("argument"), n.child_by_field_name("field")
            ftxt = self.text(field) if field is not None else ""
            if arg is not None and arg.type == "identifier" and self.text(arg) in _BUILTIN_DIMS:
                return Expr("name", f"{self.text(arg)}.{ftxt}", line=a, end_line=b)
            return Expr("attr", ftxt, recv=self.expr(arg) if arg is not None else None, line=a, end_line=b)
        if t in ("qualified_identifier", "namespace_identifier", "type_identifier"):
            return Expr("name", self.qualified(self.text(n)), line=a, end_line=b)
        if t == "template_function":  # kernel<128, 64> named as a value (auto k = kernel<BM, BN>;)
            nm, targs = n.child_by_field_name("name"), n.child_by_field_name("arguments")
            return Expr("name", self.qualified(self.text(nm)) if nm is not None else "?",
                        value=self.text(targs)[1:-1] if targs is not None else None, line=a, end_line=b)
        if t == "call_expression":
            return self.call(n, a, b)
        if t == "binary_expression":
            left, right = n.child_by_field_name("left"), n.child_by_field_name("right")
            op_node = n.child_by_field_name("operator")
            op = self.text(op_node) if op_node is not None else "?"
            args = tuple(self.expr(x) for x in (left, right) if x is not None)
            return Expr("cmp" if op in _CMP_OPS else "bin", op, args, line=a, end_line=b)
        if t == "unary_expression":
            arg = n.child_by_field_name("argument")
            op_node = n.child_by_field_name("operator")
            op = self.text(op_node) if op_node is not None else "?"
            return Expr("unary", "not" if op == "!" else op, (self.expr(arg),) if arg is not None else (),
                        line=a, end_line=b)
        if t == "pointer_expression":
            arg = n.child_by_field_name("argument")
            inner = self.expr(arg) if arg is not None else Expr("other")
            if self.text(n).lstrip().startswith("*"):
                if self._is_pointer(inner) or (inner.kind == "call" and inner.op == "reinterpret_cast"):
                    e = Expr("call", "load", (inner,), line=a, end_line=b)
                    self.f and self.f.calls.append(Call("load", e, self.loops, self.guards))
                    return e
                return Expr("unary", "*", (inner,), line=a, end_line=b)
            if inner.kind == "call" and inner.op == "load":  # &p[i] is the address, not a read
                return inner.args[0]
            return Expr("unary", "&", (inner,), line=a, end_line=b)
        if t == "subscript_expression":
            base = n.child_by_field_name("argument")
            idx = n.child_by_field_name("indices")
            be = self.expr(base) if base is not None else Expr("other")
            ie = [self.expr(c) for c in idx.named_children] if idx is not None else []
            if self._is_pointer(be) or (be.kind == "call" and be.op == "reinterpret_cast"):
                addr = Expr("bin", "+", (be, ie[0] if ie else Expr("const", "0", value=0)), line=a, end_line=b)
                e = Expr("call", "load", (addr,), line=a, end_line=b)
                if self.f is not None:
                    self.f.calls.append(Call("load", e, self.loops, self.guards))
                return e
            return Expr("sub", "", (be, *ie), line=a, end_line=b)
        if t == "conditional_expression":
            parts = [n.child_by_field_name(k) for k in ("condition", "consequence", "alternative")]
            return Expr("ternary", "", tuple(self.expr(p) for p in parts if p is not None), line=a, end_line=b)
        if t == "cast_expression":
            ty = n.child_by_field_name("type")
            val = n.child_by_field_name("value")
            ve = self.expr(val) if val is not None else Expr("other")
            e = self.cast(self.text(ty) if ty is not None else "", ve, n, a, b)
            if e.kind == "cast" and self.f is not None:
                self.f.calls.append(Call("cast", e, self.loops, self.guards))
            return e
        if t == "assignment_expression" or t == "update_expression":
            if self.f is not None:
                self.effect(n)
            right = n.child_by_field_name("right") or n.child_by_field_name("argument")
            return self.expr(right) if right is not None else Expr("other")
        if t in ("initializer_list", "comma_expression", "argument_list"):
            return Expr("tuple", "", tuple(self.expr(c) for c in n.named_children), line=a, end_line=b)
        if t == "compound_literal_expression":
            ty = n.child_by_field_name("type")
            val = n.child_by_field_name("value")
            return Expr("call", self.text(ty) if ty is not None else "?",
                        (self.expr(val),) if val is not None else (), line=a, end_line=b)
        if t == "gnu_asm_expression":
            return self.asm(n, a, b)
        if t == "sizeof_expression":
            return Expr("const", self.text(n), line=a, end_line=b)
        return Expr("other", t, line=a, end_line=b)

    def vector_type(self, type_text: str) -> str | None:
        """The vector type (``float4``, ``uint4``...) a type name denotes, directly or through an alias
        (``using vec_t = uint4;``, ``template <class T> using Vec = typename Traits<T>::type;``), else None."""
        ty = re.sub(r"\b(const|volatile|__restrict__|__restrict|typename)\b|[*&]", " ", type_text)
        ty = re.sub(r"<.*>", "", ty).strip().split("::")[-1].strip()
        if ty in VECTOR_TYPES:
            return ty
        return self.facts.memo("cuda_vector_aliases", dict).get(ty)

    def cast(self, type_text: str, value: Expr, n: ts.Node, a: int, b: int) -> Expr:
        ty = re.sub(r"\s+", " ", type_text.replace("const ", "").replace("__restrict__", "")).strip()
        if "*" in ty:
            base = ty.replace("*", "").strip().split("::")[-1]
            vec = self.vector_type(base)
            self.token("reinterpret", base, n)
            if vec is not None and vec != base:
                self.token("reinterpret", vec, n)  # reinterpret_cast<const Vec<T>*>: the vector type behind the alias
            if vec is not None:
                self.token("type", vec, n)
            return Expr("call", "reinterpret_cast", (value,), value=vec or base, line=a, end_line=b)
        dt = _SCALAR_DTYPES.get(ty.split("::")[-1])
        if dt:
            return Expr("cast", dt, (value,), line=a, end_line=b)
        return Expr("cast", ty, (value,), line=a, end_line=b)

    def call(self, n: ts.Node, a: int, b: int) -> Expr:
        fn = n.child_by_field_name("function")
        args_node = n.child_by_field_name("arguments")
        args = tuple(self.expr(c) for c in args_node.named_children) if args_node is not None else ()
        recv = None
        template = ""
        if fn is None:
            name = "?"
        elif fn.type == "identifier":
            name = self.text(fn)
        elif fn.type == "qualified_identifier":
            name = self.qualified(self.text(fn))
            if "<" in name:
                name, _, template = name.partition("<")
        elif fn.type == "template_function":
            nm = fn.child_by_field_name("name")
            targs = fn.child_by_field_name("arguments")
            name = self.qualified(self.text(nm)) if nm is not None else "?"
            template = self.text(targs)[1:-1] if targs is not None else ""
        elif fn.type == "field_expression":
            field = fn.child_by_field_name("field")
            ftxt = self.text(field) if field is not None else "?"
            if field is not None and field.type == "template_method":
                nm = field.child_by_field_name("name")
                ftxt = self.text(nm) if nm is not None else ftxt
            name = "." + ftxt
            arg = fn.child_by_field_name("argument")
            recv = self.expr(arg) if arg is not None else None
        else:
            name = "<dynamic>"
            recv = self.expr(fn)
        if name in ("static_cast", "reinterpret_cast", "const_cast") and args:
            e = self.cast(template, args[0], n, a, b)
            if self.f is not None and e.kind == "cast":
                self.f.calls.append(Call("cast", e, self.loops, self.guards))
            return e
        if name in _CONVERSIONS and args:
            e = Expr("cast", _CONVERSIONS[name], args, line=a, end_line=b)
            if self.f is not None:
                self.f.calls.append(Call(name, e, self.loops, self.guards))
            return e
        launch = [c for c in n.children if c.type == "kernel_call_syntax"]
        if name == "launch" and not launch:
            name = LAUNCH_ALIAS  # a host function the source calls launch(...), not a kernel launch
        if launch:
            cfg = [self.expr(c) for c in launch[0].named_children]
            la = Launch("cu:" + name.split("::")[-1], cfg[0] if cfg else None, args, {},
                        self.f.key if self.f else "", a, b, block=cfg[1] if len(cfg) > 1 else None,
                        template=re.sub(r"\s+", "", template))
            if self.f is not None:
                self.f.launches.append(la)
            e = Expr("call", "launch", args, recv=Expr("name", name, line=a, end_line=a), line=a, end_line=b)
            if self.f is not None:
                self.f.calls.append(Call("launch", e, self.loops, self.guards))
            return e
        if name.split("::")[-1] in VECTOR_TYPES or name.startswith("make_") and name[5:] in VECTOR_TYPES:
            self.token("type", name.split("::")[-1].replace("make_", ""), n)
        if "cooperative_groups" in name or name.startswith("cg::"):
            self.token("cg", name, n)
        e = Expr("call", name, args, recv=recv, value=template or None, line=a, end_line=b)
        if self.f is not None:
            self.f.calls.append(Call(name, e, self.loops, self.guards))
            for x in args:  # cudaDeviceGetAttribute(&sms, ...): the call writes sms
                if x.kind == "unary" and x.op == "&" and x.args and x.args[0].kind == "name" and not name.startswith(
                        "atomic") and x.args[0].op not in self.arrays:
                    self.f.assigns.append(Assign((x.args[0].op,), Expr("other", "out-param", (e,), line=a,
                                                                        end_line=b), a, b, self.loops, self.guards))
        return e

    def asm(self, n: ts.Node, a: int, b: int) -> Expr:
        body = [c for c in n.children if c.type in ("string_literal", "concatenated_string", "raw_string_literal")]
        text = " ".join(self.text(c) for c in body)
        self.token("asm", text, n)
        ins: list[Expr] = []
        outs: list[str] = []
        for c in n.children:
            if c.type == "gnu_asm_input_operand_list":
                for op in c.named_children:
                    val = op.child_by_field_name("value")
                    if val is not None:
                        ins.append(self.expr(val))
            elif c.type == "gnu_asm_output_operand_list":
                for op in c.named_children:
                    val = op.child_by_field_name("value")
                    if val is not None and val.type == "identifier":
                        outs.append(self.text(val))
        e = Expr("call", "asm", tuple(ins), value=text, line=a, end_line=b)
        if self.f is not None:
            self.f.calls.append(Call("asm", e, self.loops, self.guards))
            if outs:
                self.f.assigns.append(Assign(tuple(outs), e, a, b, self.loops, self.guards))
        return e
