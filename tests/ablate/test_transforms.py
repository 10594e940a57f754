"""Each ablation transform on small hand-written kernels: the exact rewrite, what it leaves alone, and when it does
not apply. (Every transform on the expert references is in test_references.py.)"""

from __future__ import annotations

import textwrap

import pytest

from d2kgrade.ablate.apply import changed_lines
from d2kgrade.ablate.registry import TRANSFORM_FAMILIES, TRANSFORM_NAMES, describe, load_all, transform_args_problem
from d2kgrade.ablate.transforms._base import NotApplicable, run_transform
from d2kgrade.errors import UserError


def apply(transform: str, src: str, **args: object) -> str:
    return run_transform(load_all()[transform], textwrap.dedent(src), args).source


def test_registry_declares_exactly_what_the_modules_register() -> None:
    assert set(load_all()) == TRANSFORM_NAMES
    assert sum(len(v) for v in TRANSFORM_FAMILIES.values()) == len(TRANSFORM_NAMES)
    assert all(row["doc"] for row in describe())
    assert transform_args_problem("remove_path", {}) == "transform 'remove_path' needs argument(s) ['path']"
    assert "no argument(s) ['bogus']" in transform_args_problem("exp2_to_exp", {"bogus": 1})
    assert "unknown ablation transform" in transform_args_problem("nope", {})


KERNEL = '''
import triton
import triton.language as tl

LOG2E = tl.constexpr(1.4426950408889634)


@triton.jit
def _k(x_ptr, y_ptr, N, stride_xm, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    cols = tl.max_contiguous(tl.multiple_of(tl.arange(0, BLOCK), BLOCK), BLOCK)
    # a comment that must survive
    x = tl.load(x_ptr + pid * stride_xm + cols, mask=cols < N,
                eviction_policy="evict_last").to(tl.float32)
    m = tl.max(x, axis=0)
    p = tl.exp2((x - m) * LOG2E)
    inv = 1.0 / tl.sum(p, axis=0)
    tl.store(y_ptr + pid * stride_xm + cols, p * inv, mask=cols < N, cache_modifier=".cs")
'''


def test_exp2_to_exp_folds_log2e_back_and_keeps_everything_else() -> None:
    out = apply("exp2_to_exp", KERNEL)
    assert "p = tl.exp(x - m)\n" in out
    assert out.replace("p = tl.exp(x - m)\n", "p = tl.exp2((x - m) * LOG2E)\n") == textwrap.dedent(KERNEL)
    # the natural-log domain everywhere: host scale factors, ln(2) conversions, negated literals
    src = "def f(g, s, D):\n    a = tl.exp2(g * -1.4426950408889634)\n    b = tl.log2(s) * 0.6931471805599453\n" \
          "    return a, b, D ** -0.5 * 1.4426950408889634\n"
    assert apply("exp2_to_exp", src) == "def f(g, s, D):\n    a = tl.exp(-g)\n    b = tl.log(s)\n" \
                                        "    return a, b, D ** -0.5\n"
    with pytest.raises(NotApplicable, match="no tl.exp2"):
        apply("exp2_to_exp", "x = tl.exp(1.0)\n")


def test_hint_strippers_remove_only_the_keyword() -> None:
    out = apply("strip_eviction_hints", KERNEL)
    assert "x = tl.load(x_ptr + pid * stride_xm + cols, mask=cols < N).to(tl.float32)" in out
    assert 'cache_modifier=".cs"' in out and "# a comment that must survive" in out
    assert apply("strip_cache_modifiers", KERNEL).count("cache_modifier") == 0
    with pytest.raises(NotApplicable, match="evict_first"):
        apply("strip_eviction_hints", KERNEL, values=["evict_first"])
    with pytest.raises(UserError, match="ops must be"):
        apply("strip_eviction_hints", KERNEL, ops=["gather"])


def test_alignment_hints_and_unspecialized_strides() -> None:
    out = apply("strip_alignment_hints", KERNEL)
    assert "cols = tl.arange(0, BLOCK)\n" in out
    out = apply("strip_alignment_hints", "@triton.jit\ndef k(x, stride_xm, N):\n    tl.assume(N > 0)\n    return x\n",
                strides=True)
    assert out == '@triton.jit(do_not_specialize=["stride_xm"])\ndef k(x, stride_xm, N):\n    return x\n'


def test_reciprocal_becomes_a_division_per_element() -> None:
    out = apply("reciprocal_to_division", KERNEL)
    assert "inv" not in out
    assert "tl.store(y_ptr + pid * stride_xm + cols, p / tl.sum(p, axis=0), mask=cols < N" in out
    out = apply("reciprocal_to_division", "@triton.jit\ndef k(h, v, w):\n    r = tl.math.rsqrt(v + 1.0)\n"
                                          "    tl.store(w, r)\n    return h * r[:, None]\n")
    assert "return h / tl.math.sqrt(v + 1.0)[:, None]" in out and "r = tl.math.rsqrt" in out  # r is still stored


def test_exact_division_and_upcasts() -> None:
    assert apply("exact_division", "h = tl.fdiv(g, 1.0 + e, ieee_rounding=False) * u\n") == \
        "h = (g / (1.0 + e)) * u\n"
    out = apply("strip_upcasts", KERNEL)
    assert 'eviction_policy="evict_last")\n' in out and ".to(tl.float32)" not in out


PIPELINED = '''
CONFIGS = [
    triton.Config({"BM": 128}, num_warps=8, num_stages=3),
    triton.Config({"BM": 64}, num_warps=4, num_stages=4),
]
tuned = triton.autotune(configs=CONFIGS, key=["M"])(k)


def launch(x, interp):
    for i in tl.range(0, 4, num_stages=NUM_STAGES):
        pass
    k[(1,)](x, NUM_STAGES=1 if interp else 3, num_stages=2, flatten=True)
'''


def test_pipeline_depth_autotune_and_keyword_edits() -> None:
    out = apply("set_num_stages", PIPELINED)
    assert out.count("num_stages=1") == 4 and "NUM_STAGES=1, num_stages=1" in out
    assert "num_stages=2" in apply("set_num_stages", PIPELINED, value=2) and \
        "num_stages=3" not in apply("set_num_stages", PIPELINED, value=2)
    out = apply("one_autotune_config", PIPELINED, keep=-1)
    assert '"BM": 128' not in out and '"BM": 64' in out
    out = apply("one_autotune_config", "t = triton.autotune(configs=make(), key=[])(k)\n")
    assert "configs=(make())[0:1]" in out
    assert "flatten" not in apply("drop_call_kwarg", PIPELINED, launch="k", keyword="flatten")
    assert "num_warps=4" in apply("set_call_kwarg", "k[g](x, num_warps=w(b))\n", launch="k", keyword="num_warps",
                                  value=4)
    with pytest.raises(UserError, match="exactly one of call"):
        apply("drop_call_kwarg", PIPELINED, keyword="flatten")


GROUPED = '''
@triton.jit
def coords(tile_id, num_pid_m, num_pid_n, GROUP_M: tl.constexpr):
    tiles_per_group = GROUP_M * num_pid_n
    group = tile_id // tiles_per_group
    first_m = group * GROUP_M
    rows_in_group = tl.minimum(num_pid_m - first_m, GROUP_M)
    local = tile_id % tiles_per_group
    pid_m = first_m + local % rows_in_group
    pid_n = local // rows_in_group
    return pid_m, pid_n
'''


def test_grouped_order_becomes_row_major_and_the_group_arithmetic_goes() -> None:
    out = apply("row_major_tiles", GROUPED)
    assert out == textwrap.dedent('''
        @triton.jit
        def coords(tile_id, num_pid_m, num_pid_n, GROUP_M: tl.constexpr):
            pid_m = tile_id // num_pid_n
            pid_n = tile_id % num_pid_n
            return pid_m, pid_n
        ''')
    with pytest.raises(NotApplicable, match="no grouped tile order"):
        apply("row_major_tiles", "@triton.jit\ndef k(pid, n):\n    pid_m = pid // n\n    pid_n = pid % n\n")


PERSISTENT = '''
@triton.jit
def k(x, T, NUM_SMS: tl.constexpr):
    for t in tl.range(tl.program_id(0), T, NUM_SMS, flatten=True):
        y = t * 2
        tl.store(x + t, y)


def launch(x, T, num_sms):
    k[(min(num_sms, T),)](x, T, NUM_SMS=num_sms)
'''


def test_persistent_loop_becomes_one_program_per_tile() -> None:
    out = apply("one_program_per_tile", PERSISTENT)
    assert "    t = tl.program_id(0)\n    if t < T:\n        y = t * 2\n        tl.store(x + t, y)\n" in out
    assert "k[(T,)](x, T, NUM_SMS=num_sms)" in out
    with pytest.raises(NotApplicable, match="both are needed"):
        apply("one_program_per_tile", PERSISTENT.replace("min(num_sms, T)", "num_sms"))
    assert "if t < T" in apply("one_program_per_tile", PERSISTENT.replace("min(num_sms, T)", "num_sms"),
                               require_grid=False)
    with_break = PERSISTENT.replace("        y = t * 2\n", "        if t > 3:\n            break\n")
    with pytest.raises(NotApplicable):
        apply("one_program_per_tile", with_break)


LAUNCHER = '''
def _pick(M, N, sms):
    if N <= 1024:
        return "tile"
    return "two_sweep" if M >= 2 * sms else "split"


def run(x, _path=None):
    path = _path or _pick(*x.shape, 4)
    if path == "tile":
        a()
    elif path == "split":
        b()
    else:
        raise ValueError(path)
'''


def test_remove_path_cuts_the_arm_and_the_choice() -> None:
    out = apply("remove_path", LAUNCHER, path="split")
    assert 'return "two_sweep"\n' in out and "b()" not in out and 'elif path == "split"' not in out
    out = apply("remove_path", LAUNCHER, path="tile")
    assert "N <= 1024" not in out and '    if path == "split":\n        b()\n    else:' in out
    with pytest.raises(NotApplicable, match="unconditionally"):
        apply("remove_path", 'def c():\n    return "rows"\n\n\ndef r(path):\n    if path == "rows":\n        a()\n',
              path="rows")


def test_replace_expr_set_constant_fix_constexpr() -> None:
    src = "K = tl.constexpr(16)\n\n\ndef f(M):\n    return min(M, 64) + min(M,  64)\n"
    assert apply("replace_expr", src, old="min(M, 64)", new="64").endswith("return 64 + 64\n")
    assert apply("replace_expr", src, old="min(M, 64)", new="64", nth=2).endswith("return min(M, 64) + 64\n")
    with pytest.raises(NotApplicable, match="expected 1 match"):
        apply("replace_expr", src, old="min(M, 64)", new="64", count=1)
    with pytest.raises(UserError, match="not a Python expression"):
        apply("replace_expr", src, old="min(M,", new="64")
    assert apply("set_constant", src, name="K", value=64).startswith("K = tl.constexpr(64)\n")
    flagged = '''
@triton.jit
def k(x, USE_TMA: tl.constexpr, EVEN: tl.constexpr):
    if USE_TMA:
        a = 1
    elif EVEN:
        a = 2
    else:
        a = 3
    b = 4 if USE_TMA else 5
    return a + b


h = triton.heuristics({"USE_TMA": lambda args: args["x"] > 0})(k)
k[(1,)](x, USE_TMA=use_tma, EVEN=True)
'''
    out = apply("fix_constexpr", flagged, name="USE_TMA", value=False)
    assert "    if EVEN:\n        a = 2\n    else:\n        a = 3\n    b = 5\n" in out
    assert '{"USE_TMA": lambda args: False}' in out and "USE_TMA=False, EVEN=True" in out


def test_changed_lines_counts_replacements_and_insertions() -> None:
    assert changed_lines("a\nb\nc\n", "a\nB\nc\n") == {2}
    assert changed_lines("a\nb\n", "a\nx\nb\n") == {1}
    assert changed_lines("a\nb\nc\n", "a\nc\n") == {2}


@pytest.mark.parametrize("transform", ["exp2_to_exp", "strip_eviction_hints", "strip_alignment_hints",
                                       "reciprocal_to_division", "strip_upcasts"])
def test_transforms_of_one_text_share_its_tree_and_give_what_libcst_gives(transform: str) -> None:
    """run_transform visits one cached tree per source text, its positions resolved once for every transform:
    each result is the one libcst's own driver (Codemod.transform_module: a fresh copy, positions again) gives,
    and a second run on the shared tree gives it again."""
    import libcst as cst
    from libcst.codemod import CodemodContext

    text = textwrap.dedent(KERNEL)
    got = run_transform(load_all()[transform], text, {})
    codemod = load_all()[transform](CodemodContext())
    want = codemod.transform_module(cst.parse_module(text))
    assert got.source == want.code and got.source != text
    assert sorted(map(repr, got.changes)) == sorted(map(repr, codemod.changes)) and got.changes
    assert run_transform(load_all()[transform], text, {}) == got
