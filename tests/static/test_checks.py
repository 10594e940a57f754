"""Named checks on small kernels: each pattern found where the code has it, and not where only names claim it."""

from __future__ import annotations

import sys
import textwrap

import pytest

from d2kgrade.static import extract_facts
from d2kgrade.static.registry import check_args_problem, describe, known_checks, load_all

HEAD = "import torch, triton\nimport triton.language as tl\n"


def run(check_name: str, src: str, lang: str = "any", suffix: str = ".py", **args):
    src = textwrap.dedent(src.replace(HEAD, ""))
    if suffix == ".py":
        src = HEAD + src
    facts = extract_facts(src, suffix=suffix, cache=False)
    assert facts.ok, facts.errors
    return load_all()[check_name](facts, lang, **args)


ONLINE = HEAD + """
@triton.jit
def k(x_ptr, N, B: tl.constexpr):
    m = -float('inf')
    s = 0.0
    for i in tl.range(0, N, B):
        x = tl.load(x_ptr + i + tl.arange(0, B))
        m_new = tl.maximum(m, tl.max(x, 0))
        s = s * tl.exp2(m - m_new) + tl.sum(tl.exp2(x - m_new), 0)
        m = m_new
    tl.store(x_ptr, s)
def kernel(x):
    k[(1,)](x, 1, B=16)
"""

TWO_PASS_NAMED_ONLINE = HEAD + """
@triton.jit
def online_softmax(x_ptr, N, B: tl.constexpr):
    running_max = -float('inf')
    for i in tl.range(0, N, B):
        running_max = tl.maximum(running_max, tl.max(tl.load(x_ptr + i + tl.arange(0, B)), 0))
    running_sum = 0.0
    for i in tl.range(0, N, B):
        running_sum = running_sum + tl.sum(tl.exp(tl.load(x_ptr + i + tl.arange(0, B)) - running_max), 0)
    tl.store(x_ptr, running_sum)
def kernel(x):
    online_softmax[(1,)](x, 1, B=16)
"""


def test_loop_carried_rescale_finds_online_normalizer():
    res = run("loop_carried_rescale", ONLINE)
    assert res.passed and res.evidence and res.evidence[0].line > 0


def test_loop_carried_rescale_rejects_named_two_pass():
    res = run("loop_carried_rescale", TWO_PASS_NAMED_ONLINE)
    assert res.passed is False
    assert "running max" in res.reason  # it saw the max but no rescaled sum


def test_loop_carried_rescale_in_cuda_warp_merge():
    src = """
    __global__ void k(float* x) {
        float m = x[threadIdx.x], s = 1.f;
        for (int o = 16; o > 0; o >>= 1) {
            float mo = __shfl_xor_sync(0xffffffff, m, o);
            float so = __shfl_xor_sync(0xffffffff, s, o);
            float mn = fmaxf(m, mo);
            s = s * __expf(m - mn) + so * __expf(mo - mn);
            m = mn;
        }
        x[threadIdx.x] = s;
    }
    """
    assert run("loop_carried_rescale", src, suffix=".cu").passed


def test_uses_call_ignores_unreachable_and_respects_in_loop():
    src = HEAD + """
    @triton.jit
    def used(x_ptr):
        tl.store(x_ptr, tl.exp(tl.load(x_ptr)))
    @triton.jit
    def unused(x_ptr):
        tl.store(x_ptr, tl.exp2(tl.load(x_ptr)))
    def kernel(x):
        used[(1,)](x)
    """
    assert run("uses_call", src, name="tl.exp").passed
    assert run("uses_call", src, name="tl.exp2").passed is False
    assert run("uses_call", src, name="tl.exp", in_loop=True).passed is False


def test_exp2_log2e_through_constant_and_host_argument():
    direct = HEAD + """
    LOG2E = 1.4426950408889634
    @triton.jit
    def k(x_ptr):
        tl.store(x_ptr, tl.exp2(tl.load(x_ptr) * LOG2E))
    def kernel(x):
        k[(1,)](x)
    """
    host = HEAD + """
    import math
    @triton.jit
    def k(x_ptr, scale):
        tl.store(x_ptr, tl.exp2(tl.load(x_ptr) * scale))
    def kernel(x, sm_scale=0.125):
        k[(1,)](x, sm_scale / math.log(2))
    """
    plain = HEAD + """
    @triton.jit
    def k(x_ptr):
        tl.store(x_ptr, tl.exp2(tl.load(x_ptr)))
    def kernel(x):
        k[(1,)](x)
    """
    assert run("exp2_log2e", direct).passed
    assert run("exp2_log2e", host).passed
    assert run("exp2_log2e", plain).passed is False


def test_tl_dot_in_k_loop_requires_carried_fp32_accumulator():
    good = HEAD + """
    @triton.jit
    def k(a_ptr, b_ptr, c_ptr, K, B: tl.constexpr):
        acc = tl.zeros((B, B), dtype=tl.float32)
        for kk in range(0, K, B):
            acc = tl.dot(tl.load(a_ptr + kk), tl.load(b_ptr + kk), acc)
        tl.store(c_ptr, acc)
    def kernel(a, b):
        k[(1,)](a, b, a, 1, B=16)
    """
    fp16_acc = good.replace("dtype=tl.float32", "dtype=tl.float16")
    no_loop = HEAD + """
    @triton.jit
    def k(a_ptr, b_ptr, c_ptr, B: tl.constexpr):
        tl.store(c_ptr, tl.dot(tl.load(a_ptr), tl.load(b_ptr)))
    def kernel(a, b):
        k[(1,)](a, b, a, B=16)
    """
    assert run("tl_dot_in_k_loop", good).passed
    assert run("tl_dot_in_k_loop", fp16_acc).passed is False
    assert run("tl_dot_in_k_loop", fp16_acc, acc_dtype=None).passed
    assert run("tl_dot_in_k_loop", no_loop).passed is False


def test_grouped_tile_order_vs_row_major_named_group():
    grouped = HEAD + """
    @triton.jit
    def k(c_ptr, M, N, BM: tl.constexpr, BN: tl.constexpr, G: tl.constexpr):
        pid = tl.program_id(0)
        npm = tl.cdiv(M, BM)
        npn = tl.cdiv(N, BN)
        width = G * npn
        first = (pid // width) * G
        size = tl.minimum(npm - first, G)
        pm = first + (pid % width) % size
        pn = (pid % width) // size
        tl.store(c_ptr + pm * N + pn, 1.0)
    def kernel(c):
        k[(1,)](c, 1, 1, BM=16, BN=16, G=8)
    """
    row_major = HEAD + """
    @triton.jit
    def k(c_ptr, M, N, BM: tl.constexpr, BN: tl.constexpr, GROUP_M: tl.constexpr):
        pid = tl.program_id(0)
        num_pid_n = tl.cdiv(N, BN)
        group_id = pid // num_pid_n
        tl.store(c_ptr + group_id * N + pid % num_pid_n, 1.0)
    def kernel(c):
        k[(1,)](c, 1, 1, BM=16, BN=16, GROUP_M=8)
    """
    assert run("grouped_tile_order", grouped).passed
    assert run("grouped_tile_order", row_major).passed is False


def test_persistent_loop_and_grid_from_sm_count():
    src = HEAD + """
    @triton.jit
    def k(x_ptr, T, NUM_SMS: tl.constexpr):
        for t in tl.range(tl.program_id(0), T, NUM_SMS):
            tl.store(x_ptr + t, 1.0)
    def kernel(x):
        sms = torch.cuda.get_device_properties(x.device).multi_processor_count
        k[(sms,)](x, 100, NUM_SMS=sms)
    """
    fixed = src.replace("torch.cuda.get_device_properties(x.device).multi_processor_count", "132")
    assert run("persistent_loop", src).passed
    assert run("grid_size_from", src).passed
    assert run("grid_size_from", fixed).passed is False
    plain = HEAD + """
    @triton.jit
    def k(x_ptr, T):
        for t in tl.range(0, T, 1):
            tl.store(x_ptr + t, 1.0)
    def kernel(x):
        k[(1,)](x, 100)
    """
    assert run("persistent_loop", plain).passed is False


def test_load_feeds_single_load_and_min_sources():
    fused = HEAD + """
    @triton.jit
    def k(x_ptr, r_ptr, o_ptr, y_ptr, B: tl.constexpr):
        c = tl.arange(0, B)
        h = tl.load(x_ptr + c).to(tl.float32) + tl.load(r_ptr + c).to(tl.float32)
        tl.store(o_ptr + c, h)
        tl.store(y_ptr + c, h * tl.rsqrt(tl.sum(h * h, 0)))
    def kernel(x, r):
        k[(1,)](x, r, x, x, B=16)
    """
    assert run("load_feeds", fused, reductions=["any"], stores=2, min_sources=2).passed
    assert run("load_feeds", fused, reductions=["any"], stores=3, min_sources=2).passed is False
    reload = HEAD + """
    @triton.jit
    def k(x_ptr, y_ptr, B: tl.constexpr):
        c = tl.arange(0, B)
        m = tl.max(tl.load(x_ptr + c), 0)
        x = tl.load(x_ptr + c)
        tl.store(y_ptr + c, tl.exp(x - m) / tl.sum(tl.exp(x - m), 0))
    def kernel(x):
        k[(1,)](x, x, B=16)
    """
    assert run("load_feeds", reload, reductions=["tl.max", "tl.sum"], single_load=True).passed is False


def test_reciprocal_and_division_by_reduction():
    recip = HEAD + """
    @triton.jit
    def k(x_ptr, B: tl.constexpr):
        x = tl.load(x_ptr + tl.arange(0, B))
        inv = 1.0 / tl.sum(x, 0)
        tl.store(x_ptr + tl.arange(0, B), x * inv)
    def kernel(x):
        k[(1,)](x, B=16)
    """
    div = recip.replace("inv = 1.0 / tl.sum(x, 0)", "s = tl.sum(x, 0)").replace("x * inv", "x / s")
    assert run("reciprocal_multiply", recip).passed
    assert run("division_by_reduction", recip).passed is False
    assert run("reciprocal_multiply", div).passed is False
    assert run("division_by_reduction", div).passed


def test_eviction_policy_and_descriptors():
    src = HEAD + """
    @triton.jit
    def k(a_ptr, M, K, B: tl.constexpr):
        d = tl.make_tensor_descriptor(a_ptr, shape=[M, K], strides=[K, 1], block_shape=[B, B])
        for kk in range(0, K, B):
            t = d.load([0, kk])
        tl.store(a_ptr, tl.load(a_ptr, eviction_policy="evict_last"))
        d.store([0, 0], t)
    def kernel(a):
        k[(1,)](a, 1, 1, B=16)
    """
    assert run("eviction_policy", src, value="evict_last").passed
    assert run("eviction_policy", src, value="evict_first").passed is False
    assert run("descriptor_access", src, op="load", in_loop=True).passed
    assert run("descriptor_access", src, op="store").passed


def test_cuda_checks():
    src = """
    #include <cooperative_groups.h>
    namespace cg = cooperative_groups;
    __global__ void __launch_bounds__(128) k(const float* __restrict__ x, float* y, int n) {
        __shared__ float red[32];
        float v[8];
        auto block = cg::this_thread_block();
        for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) {
            float4 q = reinterpret_cast<const float4*>(x)[i];
            y[i] = q.x;
        }
        asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" :: "r"(0), "l"(x));
    }
    """
    for name, args in [("shared_memory", {}), ("stride_loop", {"kind": "grid"}),
                       ("vector_access", {}), ("register_array", {"min_size": 8}),
                       ("async_copy", {"kind": "cp.async"}), ("asm_contains", {"pattern": "cp.async"})]:
        assert run(name, src, suffix=".cu", **args).passed, name
    assert run("register_array", src, suffix=".cu", min_size=16).passed is False
    assert run("async_copy", src, suffix=".cu", kind="tma").passed is False
    assert run("stride_loop", src, suffix=".cu", kind="block").passed is False


def test_args_are_validated_against_signatures():
    assert check_args_problem("uses_call", {"name": "tl.exp"}) is None
    assert "needs" in check_args_problem("uses_call", {})
    assert "no argument" in check_args_problem("uses_call", {"name": "x", "nmae": "y"})
    assert "unknown static check" in check_args_problem("no_such_check", {})


def test_the_checks_reference_is_generated_from_the_registry(repo_root):
    """docs/static-checks.md ends with ``reference_markdown()``: every check, its arguments and its docstring, by
    concept module and task module. Regenerate it with ``reference_markdown()`` when a check changes."""
    from d2kgrade.static.registry import reference_markdown

    text = (repo_root / "docs" / "static-checks.md").read_text()
    assert text[text.index("## The checks"):] == reference_markdown()


@pytest.mark.parametrize("entry", describe(), ids=lambda e: e["check"])
def test_every_check_is_documented(entry, repo_root):
    assert entry["doc"], f"check {entry['check']} has no docstring"
    assert f"`{entry['check']}`" in (repo_root / "docs" / "static-checks.md").read_text()


def test_every_registered_check_is_used_by_a_rubric(repo_root):
    """No dead checks: each registered check serves at least one rubric's static block."""
    import yaml

    used = {c["check"] for f in (repo_root / "rubrics").glob("*.yaml")
            for p in yaml.safe_load(f.read_text())["properties"] for c in p["static"]["checks"]}
    assert not set(known_checks()) - used, sorted(set(known_checks()) - used)


def test_task_specific_checks_are_found_by_task_id(repo_root):
    """A check that one rubric uses lives in checks/tasks/<task>.py; one that several use, in a concept module."""
    import yaml

    users: dict[str, set[str]] = {}
    for f in (repo_root / "rubrics").glob("*.yaml"):
        data = yaml.safe_load(f.read_text())
        for p in data["properties"]:
            for c in p["static"]["checks"]:
                users.setdefault(c["check"], set()).add(data["task"])
    for entry in describe():
        tasks = users.get(entry["check"], set())
        mod = sys.modules[load_all()[entry["check"]].__module__].__name__
        if len(tasks) == 1 and ".tasks." in mod:
            assert mod.endswith(f".tasks.{next(iter(tasks))}"), (entry["check"], mod)
        elif ".tasks." in mod:  # a task module's check that another task uses must be shared
            raise AssertionError(f"{entry['check']} ({mod}) is used by {sorted(tasks)}")


def test_a_load_used_only_as_a_mask_does_not_spoil_fp32_accumulation():
    """Issue 16: ``keep = tl.load(flags)`` that only selects values (a ``tl.where`` condition, a comparison) is not
    a value reaching the sum; the 16-bit loads that do are upcast."""
    src = HEAD + """
@triton.jit
def k(x_ptr, f_ptr, y_ptr, N, B: tl.constexpr):
    c = tl.arange(0, B)
    keep = tl.load(f_ptr + c, mask=c < N, other=0)
    x = tl.load(x_ptr + c, mask=c < N, other=0.0).to(tl.float32)
    h = tl.where(keep != 0, x, 0.0)
    tl.store(y_ptr, tl.sum(h * h, axis=0))

def kernel(x, f):
    y = torch.empty(1, device=x.device)
    k[(1,)](x, f, y, x.numel(), B=1024)
    return y
"""
    assert run("reduction_in_fp32", src, name=["tl.sum"]).passed is True
    raw = src.replace("other=0.0).to(tl.float32)", "other=0.0)")
    assert run("reduction_in_fp32", raw, name=["tl.sum"]).passed is False


def test_a_reciprocal_of_a_sum_reduced_in_an_earlier_kernel():
    """Issue 16: the stats kernel stores the row sum, the normalising kernel loads it and inverts it once."""
    src = HEAD + """
@triton.jit
def _stats(x_ptr, s_ptr, N, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    c = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + row * N + c, mask=c < N, other=0.0).to(tl.float32)
    tl.store(s_ptr + row, tl.sum(tl.exp(x), axis=0))

@triton.jit
def _norm(x_ptr, s_ptr, y_ptr, N, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    c = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + row * N + c, mask=c < N, other=0.0).to(tl.float32)
    inv = 1.0 / tl.load(s_ptr + row)
    tl.store(y_ptr + row * N + c, tl.exp(x) * inv, mask=c < N)

def kernel(x):
    M, N = x.shape
    s = torch.empty(M, device=x.device, dtype=torch.float32)
    y = torch.empty_like(x)
    _stats[(M,)](x, s, N, BLOCK=1024)
    _norm[(M,)](x, s, y, N, BLOCK=1024)
    return y
"""
    assert run("reciprocal_multiply", src).passed is True
    unreduced = src.replace("tl.sum(tl.exp(x), axis=0)", "1.0")
    assert run("reciprocal_multiply", unreduced).passed is False


def test_tensor_core_tile_size_counts_when_asked():
    """Issue 16: ``min_tile`` refuses a K loop whose accumulator stays 64x64 in every launch, accepts one where an
    autotune config reaches 128 in both dimensions, and does not hold a size it cannot resolve against the kernel."""
    src = HEAD + """
@triton.jit
def k(a_ptr, b_ptr, c_ptr, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for kk in range(0, K, BK):
        acc = tl.dot(tl.load(a_ptr + kk), tl.load(b_ptr + kk), acc)
    tl.store(c_ptr, acc)

def kernel(a, b):
    k[(1,)](a, b, a, a.shape[1], BM=64, BN=64, BK=32)
"""
    small = run("tl_dot_in_k_loop", src, min_tile=128)
    assert small.passed is False and "64x64" in small.reason
    assert run("tl_dot_in_k_loop", src).passed  # without min_tile the size is not looked at
    assert run("tl_dot_in_k_loop", src.replace("BM=64, BN=64", "BM=128, BN=256"), min_tile=128).passed
    assert run("tl_dot_in_k_loop", src.replace("BM=64, BN=64", "BM=128, BN=64"), min_tile=128).passed is False
    tuned = src.replace("@triton.jit", """@triton.autotune(configs=[triton.Config({"BM": 64, "BN": 64}),
                               triton.Config({"BM": 128, "BN": 128})], key=["K"])
@triton.jit""").replace(", BM=64, BN=64, BK=32)", ", BK=32)")
    assert run("tl_dot_in_k_loop", tuned, min_tile=128).passed
    unresolved = src.replace("BM=64, BN=64", "BM=a.shape[0], BN=64")
    assert run("tl_dot_in_k_loop", unresolved, min_tile=128).passed
