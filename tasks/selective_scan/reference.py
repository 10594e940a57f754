"""selective_scan: exact semantics (float64), the PyTorch baseline, and the seeded input maker.

Per batch b and channel d, h_0 = 0: dt_t = softplus(delta_t + delta_bias[d]); h_t[n] = exp(dt_t*A[d, n]) * h_{t-1}[n]
+ dt_t*B[t, n]*u_t; y_t = (sum_n C[t, n]*h_t[n] + D_skip[d]*u_t) * silu(z_t).
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

# "normal" is the catalog's: A = -exp(log(n+1) + 0.1*N(0,1)), delta_bias = softplus^-1(dt0) with dt0 log-uniform in
#   [0.001, 0.1], u, delta, B, C, z, D_skip ~ N(0,1). The state term sum_n C h is ~20-40% of y.
# "long_memory": dt0 log-uniform in [3e-3, 3e-2], |A| scaled by 0.05, u and B ~ 1 + 0.5*N(0,1) (positive means) and
#   D_skip ~ 0.1*N(0,1). The decay exp(dt*A) is ~0.995 per step, so each state integrates a coherent sum over
#   hundreds of steps to O(1) and dominates y: a state reset at a chunk boundary, a carry applied twice, or a state
#   kept in bf16 (spacing 2^-7 near 1, coarser than the ~0.01 increments; the decay rounds to 0.996 or 1) is an O(1)
#   error.
# "fast_decay": delta ~ 8*N(0,1) and dt0 in [0.1, 1]: dt spans ~1e-4 to ~30, so softplus runs on both branches
#   (v > 20 returns v), exp(dt*A) underflows to 0 for large dt (the state restarts from the current input) and
#   silu/softplus see large arguments.
DISTRIBUTIONS = ("normal", "long_memory", "fast_decay")

_DT_RANGE = {"normal": (1e-3, 1e-1), "long_memory": (3e-3, 3e-2), "fast_decay": (1e-1, 1.0)}


def inverse_softplus(dt: torch.Tensor) -> torch.Tensor:
    """x with softplus(x) = dt (dt > 0): dt + log(-expm1(-dt))."""
    return dt + torch.log(-torch.expm1(-dt))


def make_inputs(params, shapes, dtypes, *, generator, device, dist):
    if dist not in _DT_RANGE:
        raise ValueError(f"unknown distribution {dist!r}")
    D, N = shapes["A"]
    f32 = dict(generator=generator, device=device, dtype=torch.float32)
    u = torch.randn(shapes["u"], **f32)
    delta = torch.randn(shapes["delta"], **f32)
    A_log = torch.log(torch.arange(1, N + 1, device=device, dtype=torch.float32))[None, :] + 0.1 * torch.randn(D, N, **f32)
    A = -torch.exp(A_log)
    B = torch.randn(shapes["B"], **f32)
    C = torch.randn(shapes["C"], **f32)
    D_skip = torch.randn(D, **f32)
    z = torch.randn(shapes["z"], **f32)
    lo, hi = _DT_RANGE[dist]
    dt0 = torch.exp(math.log(lo) + torch.rand(D, **f32) * (math.log(hi) - math.log(lo)))
    delta_bias = inverse_softplus(dt0.double()).float()
    if dist == "long_memory":
        A = A * 0.05
        u = 1.0 + 0.5 * u
        B = 1.0 + 0.5 * B
        D_skip = D_skip * 0.1
    elif dist == "fast_decay":
        delta = delta * 8.0
    bf = dtypes["u"]
    return (u.to(bf), delta.to(dtypes["delta"]), A.contiguous(), B.to(dtypes["B"]), C.to(dtypes["C"]), D_skip,
            z.to(dtypes["z"]), delta_bias)


_REF_BYTES = 1 << 28  # float64 bytes per time-block temporary (dA, dBu, the local scan, its decay, h): 256 MB each


def _block_scan(dA, dBu, h):
    """h_t = dA_t * h_{t-1} + dBu_t over a time block ([tb, ...], h the state before it), as a two-level chunked
    scan: chunks of K ~ sqrt(tb) steps scanned locally from a zero state (K steps, each over every chunk at once),
    with the running product of their decays, then each chunk's local states plus its decay product times the
    state the previous chunk ended in (one step per chunk). About 4 sqrt(tb) launches instead of tb: the one-step-
    per-t loop ran at ~10 us a step, 1.3 s a call on long_narrow's 131072 steps of 24576 states. Only products
    and sums of the same terms, no division, so an exp(dt*A) that underflows to 0 restarts the state as the
    recurrence does; in float64 the two orders agree to ~1e-15."""
    tb = dA.shape[0]
    k = max(1, math.isqrt(tb - 1) + 1) if tb > 1 else 1
    n = -(-tb // k)
    pad = n * k - tb
    if pad:  # identity steps (decay 1, input 0) at the end
        dA = torch.cat([dA, dA.new_ones((pad, *dA.shape[1:]))])
        dBu = torch.cat([dBu, dBu.new_zeros((pad, *dBu.shape[1:]))])
    a = dA.view(n, k, *dA.shape[1:])
    b = dBu.view(n, k, *dBu.shape[1:])
    local = torch.empty_like(b)
    decay = torch.empty_like(a)
    local[:, 0] = b[:, 0]
    decay[:, 0] = a[:, 0]
    for j in range(1, k):
        torch.addcmul(b[:, j], a[:, j], local[:, j - 1], out=local[:, j])
        torch.mul(decay[:, j - 1], a[:, j], out=decay[:, j])
    hs = torch.empty_like(local)
    for c in range(n):
        torch.addcmul(local[c], decay[c], h[None], out=hs[c])
        h = hs[c, -1]
    return hs.view(n * k, *dA.shape[1:])[:tb], h


def reference(u, delta, A, B, C, D_skip, z, delta_bias):
    """The recurrence in float64 (mamba's selective_scan_ref), time-major blocks of contiguous (batch, channel,
    state) slices, each block scanned in chunks (:func:`_block_scan`)."""
    batch, D, L = u.shape
    N = A.shape[1]
    y = torch.empty_like(u)
    Ad = A.double()                                                        # [D, N]
    Bt = B.double().permute(2, 0, 1)                                       # [L, batch, N]
    Ct = C.double().permute(2, 0, 1)
    dt_all = F.softplus(delta.double() + delta_bias.double()[None, :, None])   # [batch, D, L]
    h = torch.zeros(batch, D, N, dtype=torch.float64, device=u.device)
    step = max(1, _REF_BYTES // (batch * D * N * 8))
    for t0 in range(0, L, step):
        t1 = min(L, t0 + step)
        dt = dt_all[:, :, t0:t1].permute(2, 0, 1)                          # [tb, batch, D]
        ut = u[:, :, t0:t1].double().permute(2, 0, 1)
        dA = torch.exp(dt[..., None] * Ad[None, None])                     # [tb, batch, D, N]
        dBu = (dt * ut)[..., None] * Bt[t0:t1, :, None, :]
        hs, h = _block_scan(dA, dBu, h)
        yt = (hs * Ct[t0:t1, :, None, :]).sum(-1) + D_skip.double()[None, None, :] * ut   # [tb, batch, D]
        zt = z[:, :, t0:t1].double().permute(2, 0, 1)
        y[:, :, t0:t1] = (yt * F.silu(zt)).permute(1, 2, 0).to(u.dtype)
        del dA, dBu, hs
    return y


def baseline(u, delta, A, B, C, D_skip, z, delta_bias):
    """The fastest pure-PyTorch selective scan that stays compile-friendly: discretize in fp32 (materializing
    deltaA and deltaB_u as mamba's selective_scan_ref does, [batch, D, L, N]) and scan with log2(L) doubling steps
    (Hillis-Steele over the associative operator (a1, b1) o (a2, b2) = (a1*a2, a2*b1 + b2)) instead of an L-step
    Python loop, which eager PyTorch runs at ~10 us per step (1.3 s at L = 131072) and torch.compile would unroll."""
    L = u.shape[-1]
    uf = u.float()
    dt = F.softplus(delta.float() + delta_bias[None, :, None])                  # [batch, D, L]
    a = torch.exp(dt[..., None] * A[None, :, None, :])                         # [batch, D, L, N]
    b = (dt * uf)[..., None] * B.float().transpose(1, 2)[:, None, :, :]
    k = 1
    while k < L:
        b = torch.cat([b[:, :, :k], torch.addcmul(b[:, :, k:], a[:, :, k:], b[:, :, :-k])], dim=2)
        a = torch.cat([a[:, :, :k], a[:, :, k:] * a[:, :, :-k]], dim=2)
        k *= 2
    y = torch.einsum("bdln,bnl->bdl", b, C.float()) + D_skip[None, :, None] * uf
    return (y * F.silu(z.float())).to(u.dtype)


# ------------------------------------------------------------------------------------- baseline candidates
# Read in mamba_ssm/ops/selective_scan_interface.py: selective_scan_fn(u, delta, A, B, C, D=None, z=None,
# delta_bias=None, delta_softplus=False, return_last_state=False) with u, delta, z [batch, D, L], A [D, N] fp32,
# B, C [batch, N, L] (variable B/C, one group), D and delta_bias [D] fp32: this task's layout; it returns
# y * silu(z) in u's dtype. Not run here (CUDA only).


def baseline_mamba_ssm(u, delta, A, B, C, D_skip, z, delta_bias):
    """mamba-ssm's fused CUDA selective scan (the kernel Mamba runs), softplus on delta + delta_bias."""
    from mamba_ssm.ops.selective_scan_interface import selective_scan_fn

    return selective_scan_fn(u, delta, A, B, C, D_skip, z, delta_bias, delta_softplus=True)
