"""Facts extraction: reachability from kernel(...), launches and their order, aliases, autotune, dead code, CUDA."""

from __future__ import annotations

import textwrap

from d2kgrade.static import extract_facts
from d2kgrade.static.dataflow import flow


def facts_of(src: str, suffix: str = ".py"):
    return extract_facts(textwrap.dedent(src), suffix=suffix, cache=False)


def test_reachability_follows_helpers_aliases_and_jit_calls():
    f = facts_of("""
        import triton, triton.language as tl

        @triton.jit
        def _inner(x):
            return x * 2

        @triton.jit
        def _k(x_ptr, BLOCK: tl.constexpr):
            tl.store(x_ptr, _inner(tl.load(x_ptr)))

        @triton.jit
        def _never(x_ptr):
            tl.store(x_ptr, 1.0)

        _tuned = triton.autotune(configs=[triton.Config({'BLOCK': 128}, num_warps=4),
                                          triton.Config({'BLOCK': 256}, num_warps=8)], key=['n'])(_k)

        def _launch(x):
            _tuned[(1,)](x)

        def kernel(x):
            _launch(x)
            return x
    """)
    assert f.ok, f.errors
    assert {"kernel", "_launch", "_k", "_inner"} <= f.reachable
    assert "_never" not in f.reachable
    assert [la.kernel for la in f.launches] == ["_k"]
    at = f.functions["_k"].autotune
    assert at is not None and len(at.configs) == 2 and at.key == ["n"]
    assert [c.num_warps for c in at.configs] == [4, 8]
    assert f.languages == {"triton"}


def test_launch_order_follows_calls_in_source_order():
    f = facts_of("""
        import triton, triton.language as tl
        @triton.jit
        def a(x): pass
        @triton.jit
        def b(x): pass
        def second(x):
            b[(1,)](x)
        def kernel(x):
            a[(1,)](x)
            second(x)
            a[(2,)](x)
    """)
    assert [la.kernel for la in f.launches] == ["a", "b", "a"]
    assert f.launched() == ["a", "b"]


def test_dead_code_is_skipped():
    f = facts_of("""
        import triton, triton.language as tl
        DEBUG = False
        @triton.jit
        def k(x_ptr):
            tl.store(x_ptr, 1.0)
            return
            tl.store(x_ptr, tl.exp2(1.0))
        @triton.jit
        def k2(x_ptr):
            pass
        def kernel(x):
            if False:
                k2[(1,)](x)
            if DEBUG:
                k2[(1,)](x)
            k[(1,)](x)
            return x
    """)
    names = [c.name for c in f.functions["k"].calls]
    assert "tl.exp2" not in names and "tl.store" in names
    assert "k2" not in f.reachable


def test_comments_and_strings_are_not_code():
    f = facts_of('''
        import triton, triton.language as tl
        @triton.jit
        def k(x_ptr):
            """uses tl.exp2 and eviction_policy='evict_last'"""
            # tl.exp2(x)
            s = "tl.exp2(x)"
            tl.store(x_ptr, 1.0)
        def kernel(x):
            k[(1,)](x)
    ''')
    assert [c.name for c in f.functions["k"].calls] == ["tl.store"]


def test_no_kernel_function_is_an_error():
    f = facts_of("def helper(x):\n    return x\n")
    assert not f.ok and "kernel" in f.errors[0]


def test_import_aliases_are_canonical():
    f = facts_of("""
        import triton
        import triton.language as language
        from triton.language.extra import libdevice
        from triton.language import exp2 as e2
        @triton.jit
        def k(x_ptr):
            x = language.load(x_ptr)
            tl_y = language.math.rsqrt(x) + libdevice.exp(x) + e2(x)
            language.store(x_ptr, tl_y)
        def kernel(x):
            k[(1,)](x)
    """)
    names = {c.name for c in f.functions["k"].calls}
    assert {"tl.load", "tl.rsqrt", "libdevice.exp", "tl.exp2", "tl.store"} <= names


def test_loop_carried_values():
    f = facts_of("""
        import triton, triton.language as tl
        @triton.jit
        def k(x_ptr, N, B: tl.constexpr):
            m = -float('inf')
            s = 0.0
            total = 0.0
            for i in tl.range(0, N, B):
                x = tl.load(x_ptr + i + tl.arange(0, B))
                m_new = tl.maximum(m, tl.max(x, 0))
                s = s * tl.exp(m - m_new) + tl.sum(tl.exp(x - m_new), 0)
                m = m_new
                y = x * 2
        def kernel(x):
            k[(1,)](x, 1, B=16)
    """)
    fn = f.functions["k"]
    carried = flow(f).carried(fn)
    (loop_id,) = carried
    assert set(carried[loop_id]) == {"m", "s"}
    loop = fn.loop(loop_id)
    assert loop.kind == "tl.range" and loop.var == "i"


def test_load_inline_cuda_is_parsed_only_when_passed():
    f = facts_of('''
        import torch
        from torch.utils.cpp_extension import load_inline
        USED = r"""
        __device__ float twice(float v) { return 2.f * v; }
        __global__ void k(const float* __restrict__ x, float* y, int n) {
            __shared__ float buf[256];
        #pragma unroll
            for (int i = threadIdx.x; i < n; i += blockDim.x) {
                float4 v = reinterpret_cast<const float4*>(x)[i];
                y[i] = twice(v.x) + __shfl_xor_sync(0xffffffff, v.y, 1);
            }
        }
        torch::Tensor run(torch::Tensor x) { auto y = torch::empty_like(x);
            k<<<1, 256>>>(x.data_ptr<float>(), y.data_ptr<float>(), x.numel()); return y; }
        """
        UNUSED = r"""__global__ void ghost(float* x) { x[0] = exp2f(1.f); }"""
        mod = load_inline(name="m", cpp_sources="torch::Tensor run(torch::Tensor x);", cuda_sources=USED,
                          functions=["run"])
        def kernel(x):
            return mod.run(x)
    ''')
    assert f.ok, f.errors
    assert {"cu:run", "cu:k", "cu:twice"} <= f.reachable
    assert "cu:ghost" not in f.functions
    k = f.functions["cu:k"]
    assert k.kind == "global" and k.pointer_params == {"x", "y"}
    assert {c.name for c in k.calls} >= {"load", "store", "twice", "__shfl_xor_sync"}
    assert k.loops[0].unroll
    assert f.shared[0].name == "buf" and f.shared[0].dims == ["256"]
    # lines map back into the Python file
    kline = next(i for i, line in enumerate(f.lines, 1) if "__global__ void k" in line)
    assert k.line == kline
    assert any(t.kind == "reinterpret" and t.text == "float4" for t in f.tokens)
    assert f.languages == {"cuda"}


def test_cu_file_roots_are_launched_kernels():
    f = facts_of("""
        __global__ void used(float* x) { x[threadIdx.x] = 1.f; }
        __global__ void unused(float* x) { x[0] = 2.f; }
        void host(float* x) { used<<<1, 32>>>(x); }
    """, suffix=".cu")
    assert f.ok
    assert "cu:used" in f.reachable and "cu:unused" not in f.reachable
    assert [la.kernel for la in f.launches] == ["cu:used"]


def test_cuda_dead_preprocessor_block():
    f = facts_of("""
        #if 0
        __global__ void old(float* x) { x[0] = expf(1.f); }
        #endif
        __global__ void k(float* x) { if (0) { x[0] = expf(2.f); } x[1] = 3.f; }
    """, suffix=".cu")
    assert "cu:old" not in f.functions
    assert "expf" not in {c.name for c in f.functions["cu:k"].calls}


def test_pointer_bases_follow_local_arithmetic():
    f = facts_of("""
        import triton, triton.language as tl
        @triton.jit
        def k(x_ptr, y_ptr, stride, N, B: tl.constexpr):
            row = tl.program_id(0)
            base = x_ptr + row * stride
            cols = tl.arange(0, B)
            x = tl.load(base + cols, mask=cols < N)
            tl.store(y_ptr + row * stride + cols, x)
        def kernel(x):
            k[(1,)](x, x, 1, 1, B=16)
    """)
    ops = flow(f).memory_ops(f.functions["k"])
    assert [(kind, b) for kind, _, b in ops] == [("load", {"x_ptr"}), ("store", {"y_ptr"})]
