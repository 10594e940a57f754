"""Address-pattern checks and the check arguments added for the rotary, swiglu, transpose, layernorm-backward,
flash-attention and SpMV rubrics: each pattern found where the code has it, and not in the near miss."""

from __future__ import annotations

import textwrap

from d2kgrade.static import extract_facts
from d2kgrade.static.dataflow import flow
from d2kgrade.static.registry import load_all

HEAD = "import torch, triton\nimport triton.language as tl\n"


def facts_of(src: str, suffix: str = ".py"):
    src = textwrap.dedent(src)
    facts = extract_facts(HEAD + src if suffix == ".py" else src, suffix=suffix, cache=False)
    assert facts.ok, facts.errors
    return facts


def run(check_name: str, src: str, lang: str = "any", suffix: str = ".py", **args):
    return load_all()[check_name](facts_of(src, suffix), lang, **args)


ROPE = """
@triton.jit
def k(x, y, half, D: tl.constexpr, HALF: tl.constexpr):
    d = tl.arange(0, HALF)
    m = d < half
    {body}
def kernel(x):
    k[(1,)](x, x, 64, D=128, HALF=64)
"""
SHIFTED = "a = tl.load(x + d); b = tl.load(x + HALF + d); tl.store(y + d, a - b); tl.store(y + HALF + d, a + b)"
PARTNER = "a = tl.load(x + d); b = tl.load(x + (d + HALF) % D); tl.store(y + d, a - b)"
RUNTIME_HALF = "a = tl.load(x + d, mask=m); b = tl.load(x + half + d, mask=m); tl.store(y + d, a - b)"


def test_permuted_index_flags_a_partner_gather_not_a_constant_shift():
    assert run("permuted_index", ROPE.format(body=PARTNER)).passed
    assert not run("permuted_index", ROPE.format(body=SHIFTED)).passed


def test_runtime_element_offset_flags_a_plain_int_argument_not_a_constexpr():
    assert run("runtime_element_offset", ROPE.format(body=RUNTIME_HALF)).passed
    assert not run("runtime_element_offset", ROPE.format(body=SHIFTED)).passed


def test_an_int_argument_added_to_a_pointer_is_not_a_pointer_base():
    f = facts_of(ROPE.format(body=RUNTIME_HALF))
    fl = flow(f)
    (kern,) = f.kernels("triton")
    assert all(b == {"x"} for kind, _, b in fl.memory_ops(kern) if kind == "load")
    assert not run("stores_distinct", ROPE.format(body=RUNTIME_HALF), min=2).passed


def test_host_index_gather():
    src = """
    @triton.jit
    def k(x):
        tl.store(x, tl.load(x))
    def kernel(q, cos):
        perm = torch.cat([torch.arange(0, 8, 2), torch.arange(1, 8, 2)])
        {line}
        k[(1,)](q)
    """
    assert run("host_index_gather", src.format(line="q = q[..., perm].contiguous()")).passed
    assert run("host_index_gather", src.format(line="c = cos[q]")).passed
    assert not run("host_index_gather", src.format(line="q = q[:, :4].contiguous()")).passed


SWIGLU = """
@triton.jit
def k(x, h, I, BLOCK: tl.constexpr):
    c = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    {body}
def kernel(x):
    k[(4, 4)](x, x, 64, BLOCK=1024)
"""


def test_load_feeds_sees_values_combined_in_the_store_and_same_base():
    in_store = "tl.store(h + c, tl.load(x + c) * tl.load(x + I + c))"
    two_inputs = "tl.store(h + c, tl.load(x + c) * tl.load(h + c))"
    args = {"min_loads": 2, "reductions": [], "stores": 1}
    assert run("load_feeds", SWIGLU.format(body=in_store), **args).passed
    assert run("load_feeds", SWIGLU.format(body=in_store), same_base=True, **args).passed
    assert run("load_feeds", SWIGLU.format(body=two_inputs), **args).passed
    assert not run("load_feeds", SWIGLU.format(body=two_inputs), same_base=True, **args).passed


def test_contiguous_tile_access_counts_every_thread_of_a_2d_tile():
    src = """
    @triton.jit
    def k(x, R: tl.constexpr, W: tl.constexpr):
        r = tl.arange(0, R)
        w = tl.arange(0, W)
        tl.store(x + r[:, None] * 64 + w[None, :], tl.load(x + r[:, None] * 64 + w[None, :]))
    def kernel(x):
        k[(1,)](x, R={rows}, W=32, num_warps=4)
    """
    assert run("contiguous_tile_access", src.format(rows=16), min_per_thread=4).passed   # 512 / 128 = 4
    assert not run("contiguous_tile_access", src.format(rows=2), min_per_thread=4).passed  # 64 / 128


def test_cache_modifier_reads_a_module_constant():
    src = """
    STREAM = ".cs"
    @triton.jit
    def k(x):
        tl.store(x, 1.0, cache_modifier=STREAM)
    def kernel(x):
        k[(1,)](x)
    """
    assert run("cache_modifier", src, value=[".cs"], op="store").passed


def test_accumulator_dtype_with_atomics():
    src = """
    @triton.jit
    def k(dy, dw):
        g = tl.load(dy + tl.arange(0, 16)).to(tl.float32)
        tl.atomic_add(dw + tl.arange(0, 16), {value})
    def kernel(x):
        k[(1,)](x, x)
    """
    assert run("accumulator_dtype", src.format(value="g * g"), atomics=True, required=False).passed
    assert not run("accumulator_dtype", src.format(value="(g * g).to(tl.bfloat16)"), atomics=True).passed
    assert not run("accumulator_dtype", src.format(value="g * g")).passed  # no loop accumulator, required


ATTN = """
@triton.jit
def k(q, o, S, B: tl.constexpr):
    x = tl.load(q + tl.arange(0, B))
    m = tl.zeros([B], dtype=tl.float32) - float('inf')
    l = tl.zeros([B], dtype=tl.float32)
    acc = tl.zeros([B], dtype=tl.float32)
    for n in range(0, S, B):
        s = tl.load(q + n + tl.arange(0, B)) * x
        m_new = tl.maximum(m, s)
        p = tl.exp(s - m_new)
        l = l * tl.exp(m - m_new) + p
        {update}
        m = m_new
    tl.store(o + tl.arange(0, B), {out})
def kernel(q):
    k[(1,)](q, q, 64, B=16)
"""


def test_division_by_reduction_in_loop_tells_renormalising_from_a_final_division():
    final = ATTN.format(update="acc = acc * tl.exp(m - m_new) + p * x", out="acc / l")
    renorm = ATTN.format(update="acc = acc * tl.exp(m - m_new) + p * x / tl.sum(l, 0)", out="acc")
    assert not run("division_by_reduction", final, in_loop=True).passed
    assert run("division_by_reduction", renorm, in_loop=True).passed


def test_head_group_mapping_fastest_needs_the_group_member_on_the_fastest_axis():
    src = """
    @triton.jit
    def k(q, HQ: tl.constexpr, HKV: tl.constexpr):
        {ids}
        tl.store(q + kvh, 1.0)
    def kernel(q):
        k[(8, 8)](q, HQ=32, HKV=8)
    """
    q_tile_fastest = "h = tl.program_id(1)\n        kvh = h // (HQ // HKV)"
    member_fastest = "pid = tl.program_id(0)\n        g = pid % (HQ // HKV)\n        kvh = pid // (HQ // HKV)"
    assert run("head_group_mapping", src.format(ids=q_tile_fastest)).passed
    assert not run("head_group_mapping", src.format(ids=q_tile_fastest), fastest=True).passed
    assert run("head_group_mapping", src.format(ids=member_fastest), fastest=True).passed


def test_reversed_pid_needs_index_arithmetic_not_data_addressed_by_the_pid():
    src = """
    @triton.jit
    def k(x, n):
        pid = tl.program_id(0)
        v = tl.load(x + pid)
        {line}
        tl.store(x + pid, d)
    def kernel(x):
        k[(4,)](x, 4)
    """
    assert run("reversed_pid", src.format(line="d = n - 1 - pid")).passed
    assert not run("reversed_pid", src.format(line="d = 2.0 - v")).passed


def test_autotune_configs_appended_in_a_helper_are_read():
    src = """
    def _configs():
        out = []
        for bn, s in ((64, 2), (128, 3)):
            out.append(triton.Config({'BN': bn}, num_warps=8, num_stages=s))
        return out
    @triton.autotune(configs=_configs(), key=['N'])
    @triton.jit
    def k(x, N, BN: tl.constexpr):
        for i in range(0, N, BN):
            tl.store(x + i + tl.arange(0, BN), 0.0)
    def kernel(x):
        k[(1,)](x, 64)
    """
    assert run("autotune_configs", src, require=["num_warps", "num_stages"]).passed
    assert run("num_stages", src, min=2).passed


def test_warp_stride_loop_classifies_the_increment_only():
    src = """
    __global__ void spmv(const int* rp, const float* v, float* y, int M) {
        int row = (blockIdx.x * blockDim.x + threadIdx.x) / 32;
        int lane = threadIdx.x % 32;
        float s = 0.f;
        for (int i = rp[row] + lane; i < rp[row + 1]; i += 32) s += v[i];
        y[row] = s;
    }
    """
    assert run("stride_loop", src, suffix=".cu", kind="warp").passed
    assert not run("stride_loop", src, suffix=".cu", kind="block").passed
