"""The pattern layer (``d2kgrade.static.patterns``): each named query on small kernels, where the code has the
pattern and where it does not."""

from __future__ import annotations

import textwrap

from d2kgrade.static import extract_facts
from d2kgrade.static.dataflow import flow
from d2kgrade.static.patterns.access import access_base, is_global_load, loads_feeding, unit_arange
from d2kgrade.static.patterns.host import alternatives, constexpr_modes
from d2kgrade.static.patterns.liveness import live_calls
from d2kgrade.static.patterns.names import ATOMICS, expr_key
from d2kgrade.static.patterns.reductions import online
from d2kgrade.static.patterns.roles import (buffer_dtype, input_params, launch_tensors, output_params,
                                            returned_tensors, tensor_root)
from d2kgrade.static.patterns.sorts import compare_exchange, sort_sites

HEAD = "import torch\nimport triton\nimport triton.language as tl\n"


def facts_of(src: str):
    f = extract_facts(HEAD + textwrap.dedent(src), cache=False)
    assert f.ok, f.errors
    return f, flow(f)


ROLES = '''
@triton.jit
def _k(x_ptr, w_ptr, y_ptr, part_ptr, N, BLOCK: tl.constexpr, MODE: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + row * N + cols, mask=cols < N, other=0.0).to(tl.float32)
    w = tl.load(w_ptr + cols, mask=cols < N, other=0.0)
    s = tl.sum(x * x, axis=0)
    tl.store(part_ptr + row, s)
    if MODE == 0:
        tl.store(y_ptr + row * N + cols, x * w, mask=cols < N)
    else:
        tl.store(y_ptr + row * N + cols, x, mask=cols < N)


def _run(inp, weight, out, mode):
    parts = torch.empty((inp.shape[0],), device=inp.device, dtype=inp.dtype)
    _k[(inp.shape[0],)](inp, weight, out, parts, inp.shape[1], BLOCK=1024, MODE=mode)


def kernel(x, w):
    x2 = x.reshape(-1, x.shape[-1])
    y = torch.empty_like(x2)
    _run(x2, w, y, 0 if x.shape[-1] <= 1024 else 1)
    return y.view_as(x)
'''


def test_roles_inputs_outputs_and_workspaces():
    f, fl = facts_of(ROLES)
    k = f.functions["_k"]
    assert input_params(fl, k) == {"x_ptr", "w_ptr"}
    assert output_params(fl, k) == {"y_ptr"}
    assert returned_tensors(fl) == {"y"}
    la = f.launches[0]
    assert launch_tensors(fl, la, {"x_ptr", "y_ptr"}) == {"x_ptr": "x", "y_ptr": "y"}  # through the helper
    assert buffer_dtype(fl, k, "part_ptr") == "same_as_input"  # dtype=inp.dtype: the input's (bf16) dtype
    entry = f.functions["kernel"]
    x2 = next(a.value for a in entry.assigns if a.targets == ("x2",))
    assert tensor_root(fl, x2, entry).op == "x"  # x.reshape(...) is a view of x


def test_host_alternatives_and_constexpr_modes():
    f, fl = facts_of(ROLES)
    k = f.functions["_k"]
    assert constexpr_modes(fl, k) == {"MODE": frozenset({0, 1})}  # BLOCK is not branched on
    entry = f.functions["kernel"]
    mode = next(a.value for a in entry.assigns if a.targets[0].startswith("mode@"))
    assert alternatives(fl, mode, entry) == frozenset({0, 1})
    one, _ = facts_of(ROLES.replace("0 if x.shape[-1] <= 1024 else 1", "1"))
    assert constexpr_modes(flow(one), one.functions["_k"]) == {}  # one mode: no choice


def test_access_addresses_and_loads():
    f, fl = facts_of(ROLES)
    k = f.functions["_k"]
    loads = [c for c in k.calls if c.name == "tl.load"]
    assert is_global_load(loads[0].expr, k) and not is_global_load(k.calls[0].expr, k)
    base = access_base(loads[0])
    assert fl.bases(base, k) == {"x_ptr"}
    assert unit_arange(fl, base, k) is not None  # x_ptr + row * N + cols: cols is a unit-stride arange
    s = next(a.value for a in k.assigns if a.targets == ("s",))
    assert [fl.bases(access_base(ld), k) for ld in loads_feeding(fl, s, k)] == [{"x_ptr"}]


ONLINE = '''
@triton.jit
def _k(x_ptr, y_ptr, N, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    peak = -float("inf")
    mass = 0.0
    for t in tl.range(0, N, BLOCK):
        v = tl.load(x_ptr + row * N + t + tl.arange(0, BLOCK))
        hi = tl.maximum(peak, tl.max(v, axis=0))
        mass = mass * tl.exp(peak - hi) + tl.sum(tl.exp(v - hi), axis=0)
        peak = hi
    tl.store(y_ptr + row, mass)


def kernel(x):
    y = torch.empty(x.shape[0], device=x.device)
    _k[(x.shape[0],)](x, y, x.shape[1], BLOCK=1024)
    return y
'''


def test_online_normaliser_by_data_flow_not_names():
    f, fl = facts_of(ONLINE)
    k = f.functions["_k"]
    assert online(fl, k, k.loops[0]) == ("peak", "mass")
    two_pass = ONLINE.replace("mass = mass * tl.exp(peak - hi) +", "mass = mass +")
    f2, fl2 = facts_of(two_pass)
    assert online(fl2, f2.functions["_k"], f2.functions["_k"].loops[0]) is None  # no rescale: not online


SORTS = '''
@triton.jit
def _cex(w, J: tl.constexpr, K: tl.constexpr, N: tl.constexpr):
    idx = tl.arange(0, N)[None, :]
    other = tl.gather(w, tl.broadcast_to(idx ^ J, w.shape), 1)
    up = ((idx & J) == 0) == ((idx & K) == 0)
    return tl.where(up, tl.maximum(w, other), tl.minimum(w, other))


@triton.jit
def _k(x_ptr, y_ptr, N: tl.constexpr):
    cols = tl.arange(0, N)[None, :]
    w = tl.load(x_ptr + cols)
    w = _cex(w, 1, 2, N)
    tl.store(y_ptr + cols, tl.sort(w))


def kernel(x):
    y = torch.empty_like(x)
    _k[(1,)](x, y, N=x.shape[-1])
    return y
'''


def test_sort_sites_include_hand_written_networks():
    f, fl = facts_of(SORTS)
    k = f.functions["_k"]
    sites = sort_sites(fl, k)
    assert [s.network for s in sites] == [False, True]  # tl.sort, then the inlined compare-exchange
    assert compare_exchange(sites[1].node) is sites[1].operand
    plain, _ = facts_of(SORTS.replace("tl.maximum(w, other), tl.minimum(w, other)", "w, other"))
    assert [s.network for s in sort_sites(flow(plain), plain.functions["_k"])] == [False]


def test_dead_branches_are_not_live_calls():
    f, fl = facts_of('''
DEBUG = False

@triton.jit
def _k(x_ptr, N, FLAG: tl.constexpr):
    if FLAG:
        tl.device_print("flag", N)
    tl.store(x_ptr, tl.load(x_ptr) + 1)


def kernel(x):
    _k[(1,)](x, x.numel(), FLAG=DEBUG)
    return x
''')
    names = [c.name for c in live_calls(fl, f.functions["_k"])]
    assert "tl.store" in names and "tl.device_print" not in names


def test_names_and_keys():
    assert {"atomicCAS", "atomicExch", "tl.atomic_cas", "tl.atomic_xchg"} <= set(ATOMICS)  # spin-lock atomics
    f, _ = facts_of(ONLINE)
    e = next(a.value for a in f.functions["_k"].assigns if a.targets == ("hi",))
    assert expr_key(e) == expr_key(e) and "tl.maximum" in expr_key(e)
