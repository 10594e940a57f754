"""Tile schedule: grouped (swizzled) tile order made row-major; persistent grids made one program per tile."""

from __future__ import annotations

import re
from collections import Counter

import libcst as cst
import libcst.matchers as m
from libcst.codemod import CodemodContext, SkipFile

from d2kgrade.ablate.registry import transform
from d2kgrade.ablate.transforms._base import Ablation, code, dotted, names_in, norm, parse_expr

GROUP_RE = re.compile(r"^GROUP(_SIZE)?(_[MN])?$")


def _assigns(fn: cst.FunctionDef) -> list[cst.Assign]:
    """Single-target ``name = value`` assignments anywhere in the function body, in order."""
    return [a for a in m.findall(fn.body, m.Assign(targets=[m.AssignTarget(target=m.Name())]))
            if isinstance(a, cst.Assign)]


def _target(a: cst.Assign) -> str:
    t = a.targets[0].target
    assert isinstance(t, cst.Name)
    return t.value


def _reads(fn: cst.FunctionDef) -> Counter[str]:
    """How often each name is read in the function (every Name occurrence that is not an assignment target)."""
    targets = {id(t.target) for a in _assigns(fn) for t in a.targets}
    targets |= {id(x.target) for x in m.findall(fn.body, m.AugAssign()) if isinstance(x, cst.AugAssign)}
    out: Counter[str] = Counter()
    for n in m.findall(fn.body, m.Name()):
        assert isinstance(n, cst.Name)
        if id(n) not in targets:
            out[n.value] += 1
    return out


def _paren(e: cst.BaseExpression) -> str:
    return code(e) if isinstance(e, (cst.Name, cst.Attribute, cst.Call, cst.Subscript)) else f"({code(e)})"


@transform("row_major_tiles")
class RowMajorTiles(Ablation):
    """Grouped tile order -> row-major: where a function computes tile coordinates ``m``/``n`` (default
    ``pid_m``/``pid_n``) from ``index // (GROUP_M * cols)`` and ``index % ...``, they become ``index // cols``
    and ``index % cols``, and the group arithmetic that nothing else reads is deleted. ``tl.swizzle2d`` calls
    become the same row-major pair."""

    def __init__(self, context: CodemodContext, *, m: str = "pid_m", n: str = "pid_n",
                 group: list[str] | None = None, functions: list[str] | None = None) -> None:
        super().__init__(context, functions=functions)
        self.m, self.n = m, n
        self.group = set(group or [])
        self.replace: dict[int, cst.BaseExpression] = {}
        self.remove: set[int] = set()

    def nothing(self) -> str:
        return f"no grouped tile order ({self.m}/{self.n} from index // (GROUP_M * n) or tl.swizzle2d)"

    def _is_group(self, e: cst.BaseExpression, params: set[str]) -> bool:
        return isinstance(e, cst.Name) and (e.value in self.group or (e.value in params and GROUP_RE.match(e.value)
                                                                         is not None))

    def _plan(self, fn: cst.FunctionDef) -> None:
        params = {p.name.value for p in fn.params.params}
        assigns = _assigns(fn)
        products: dict[str, cst.BaseExpression] = {}  # name bound to GROUP * cols -> cols
        for a in assigns:
            v = a.value
            if isinstance(v, cst.BinaryOperation) and isinstance(v.operator, cst.Multiply):
                for g, other in ((v.left, v.right), (v.right, v.left)):
                    if self._is_group(g, params):
                        products[_target(a)] = other

        def cols_of(e: cst.BaseExpression) -> cst.BaseExpression | None:
            if isinstance(e, cst.Name) and e.value in products:
                return products[e.value]
            if isinstance(e, cst.BinaryOperation) and isinstance(e.operator, cst.Multiply):
                for g, other in ((e.left, e.right), (e.right, e.left)):
                    if self._is_group(g, params):
                        return other
            return None

        index = cols = None
        for op in m.findall(fn.body, m.BinaryOperation(operator=m.FloorDivide() | m.Modulo())):
            assert isinstance(op, cst.BinaryOperation)
            c = cols_of(op.right)
            if c is not None:
                index, cols = op.left, c
                break
        mine = {t: a for a in assigns if (t := _target(a)) in (self.m, self.n)}
        if index is None or cols is None or len(mine) != 2:
            return
        new = {self.m: cst.parse_expression(f"{_paren(index)} // {_paren(cols)}"),
               self.n: cst.parse_expression(f"{_paren(index)} % {_paren(cols)}")}
        reads = _reads(fn)
        for name, a in mine.items():
            self.replace[id(a)] = new[name]
            self.record(a, f"{name} = {code(new[name])} (row-major)")
            reads.subtract(names_in(a.value))
            reads.update(names_in(new[name]))
        # Delete the group arithmetic that is now dead: names the old values read, transitively.
        by_name = {}
        for a in assigns:
            by_name.setdefault(_target(a), []).append(a)
        todo = [x for a in mine.values() for x in names_in(a.value)]
        seen: set[str] = set()
        while todo:
            x = todo.pop()
            if x in seen or x in (self.m, self.n) or reads[x] > 0 or x not in by_name:
                continue
            seen.add(x)
            for a in by_name[x]:
                self.remove.add(id(a))
                self.record(a, f"{x} removed (dead after row-major order)")
                reads.subtract(names_in(a.value))
                todo.extend(names_in(a.value))

    def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
        super().visit_FunctionDef(node)
        if self.in_scope():
            self._plan(node)
        return True

    def leave_Assign(self, original_node: cst.Assign, updated_node: cst.Assign) -> cst.Assign:
        new = self.replace.get(id(original_node))
        return updated_node if new is None else updated_node.with_changes(value=new)

    def leave_SimpleStatementLine(self, original_node: cst.SimpleStatementLine,
                                  updated_node: cst.SimpleStatementLine) -> cst.SimpleStatementLine | cst.RemovalSentinel:
        if len(original_node.body) == 1 and id(original_node.body[0]) in self.remove:
            return cst.RemoveFromParent()
        return updated_node

    def leave_Call(self, original_node: cst.Call, updated_node: cst.Call) -> cst.BaseExpression:
        # tl.swizzle2d(i, j, size_i, size_j, size_g) -> (i, j): the launch order itself.
        if dotted(updated_node.func) == "tl.swizzle2d" and len(updated_node.args) >= 2 and self.in_scope():
            self.record(original_node, "tl.swizzle2d removed (row-major)")
            return cst.parse_expression(f"({code(updated_node.args[0].value)}, {code(updated_node.args[1].value)})")
        return updated_node


SM_RE = re.compile(r"(?i)(num_?sms?$|^n_?sms?$|sm_count|multi_processor_count|^sms$|_sms$)")


def _mentions_sms(e: cst.BaseExpression) -> bool:
    return any(SM_RE.search(x) for x in names_in(e))


def _is_pid(e: cst.BaseExpression, pid_names: set[str]) -> bool:
    if isinstance(e, cst.Name):
        return e.value in pid_names
    if not (isinstance(e, cst.Call) and dotted(e.func) == "tl.program_id" and len(e.args) == 1):
        return False
    axis = e.args[0].value
    return isinstance(axis, cst.Integer) and axis.value == "0"


def _breaks_out(body: cst.BaseSuite) -> bool:
    """A ``break``/``continue`` of this loop (not of a loop nested in it)."""
    class Finder(cst.CSTVisitor):
        found = False

        def visit_For(self, node: cst.For) -> bool:
            return False

        def visit_While(self, node: cst.While) -> bool:
            return False

        def visit_Break(self, node: cst.Break) -> None:
            self.found = True

        def visit_Continue(self, node: cst.Continue) -> None:
            self.found = True

    f = Finder()
    body.visit(f)
    return f.found


@transform("one_program_per_tile")
class OneProgramPerTile(Ablation):
    """Persistent grid -> one program per tile. In jit functions (``functions``: only these), each loop
    ``for t in tl.range(pid, end, step)`` that starts at the program id becomes ``t = pid`` and
    ``if t < end:`` around the same body; in host code (``launchers``: only these; ``grid``: only the ``min``
    call equal to this pattern), each ``min(a, b)`` where one side is the SM count becomes the other side, so the
    grid covers every tile. Both halves must apply, unless ``require_grid`` is false (the grid is already one
    program per tile, or another transform of the same property resizes it)."""

    def __init__(self, context: CodemodContext, *, functions: list[str] | None = None,
                 launchers: list[str] | None = None, grid: str | None = None, require_grid: bool = True) -> None:
        super().__init__(context, functions=functions)
        self.require_grid = require_grid
        self.launchers = set(launchers) if launchers else None
        self.grid = norm(parse_expr(grid, "grid")) if grid else None
        self.loops = 0
        self.grids = 0
        self._pids: list[set[str]] = []

    def nothing(self) -> str:
        return (f"persistent loops found: {self.loops}, SM-count grid sizes (min(tiles, num_sms)) found: "
                f"{self.grids}; both are needed")

    def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
        super().visit_FunctionDef(node)
        pids = {_t for a in _assigns(node) if _is_pid(_strip_to(a.value), set()) for _t in [_target(a)]}
        self._pids.append(pids)
        return True

    def leave_FunctionDef(self, original_node: cst.FunctionDef, updated_node: cst.FunctionDef) -> cst.FunctionDef:
        self._pids.pop()
        return super().leave_FunctionDef(original_node, updated_node)

    def leave_For(self, original_node: cst.For, updated_node: cst.For) -> cst.BaseStatement | cst.FlattenSentinel:
        if not (self.in_jit and self.in_scope()) or updated_node.orelse is not None:
            return updated_node
        it = updated_node.iter
        if not (isinstance(it, cst.Call) and dotted(it.func) in ("tl.range", "range")):
            return updated_node
        pos = [a for a in it.args if a.keyword is None]
        if len(pos) < 3 or not _is_pid(pos[0].value, self._pids[-1] if self._pids else set()):
            return updated_node
        if not isinstance(updated_node.target, cst.Name) or _breaks_out(updated_node.body):
            return updated_node
        var = updated_node.target.value
        self.loops += 1
        self.record(original_node, f"persistent loop over {var} -> one {var} per program")
        first = cst.SimpleStatementLine(body=[cst.Assign(targets=[cst.AssignTarget(cst.Name(var))],
                                                         value=pos[0].value)],
                                        leading_lines=updated_node.leading_lines)
        guard = cst.If(test=cst.Comparison(left=cst.Name(var), comparisons=[
            cst.ComparisonTarget(cst.LessThan(), pos[1].value)]), body=updated_node.body)
        return cst.FlattenSentinel([first, guard])

    def leave_Call(self, original_node: cst.Call, updated_node: cst.Call) -> cst.BaseExpression:
        if self.in_jit or dotted(updated_node.func) != "min" or len(updated_node.args) != 2:
            return updated_node
        if self.launchers is not None and not any(f in self.launchers for f, _ in self._fns):
            return updated_node
        if self.grid is not None and norm(original_node) != self.grid:
            return updated_node
        a, b = (x.value for x in updated_node.args)
        keep = b if _mentions_sms(a) and not _mentions_sms(b) else a if _mentions_sms(b) and not _mentions_sms(a) \
            else None
        if keep is None:
            return updated_node
        self.grids += 1
        self.record(original_node, f"grid min(..., SM count) -> {code(keep)}")
        if updated_node.lpar or keep.lpar or isinstance(keep, (cst.Name, cst.Attribute, cst.Call, cst.Subscript,
                                                                cst.Integer)):
            return keep.with_changes(lpar=[*updated_node.lpar, *keep.lpar], rpar=[*keep.rpar, *updated_node.rpar])
        return keep.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])

    def transform_module_impl(self, tree: cst.Module) -> cst.Module:
        out = super().transform_module_impl(tree)
        if not self.loops or (self.require_grid and not self.grids):
            raise SkipFile(self.nothing())
        return out


def _strip_to(e: cst.BaseExpression) -> cst.BaseExpression:
    """``tl.program_id(0).to(tl.int64)`` -> ``tl.program_id(0)``."""
    while isinstance(e, cst.Call) and isinstance(e.func, cst.Attribute) and e.func.attr.value == "to":
        e = e.func.value
    return e
