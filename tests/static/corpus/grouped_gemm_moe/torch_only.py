"""Grouped expert GEMM in plain PyTorch: a Python loop over the experts, broadcast-multiply-sum per expert."""
import torch


def kernel(X, W, expert_offsets):
    T, K = X.shape
    E, N, _ = W.shape
    Y = torch.empty((T, N), dtype=X.dtype, device=X.device)
    bounds = expert_offsets.tolist()
    for e in range(E):
        lo, hi = bounds[e], bounds[e + 1]
        if hi == lo:
            continue
        xe = X[lo:hi].float()
        we = W[e].float()
        # chunk the rows so the [rows, N, K] product stays small
        for r0 in range(0, hi - lo, 64):
            xs = xe[r0:r0 + 64]
            Y[lo + r0:lo + r0 + xs.shape[0]] = (xs[:, None, :] * we[None, :, :]).sum(-1).to(X.dtype)
    return Y
