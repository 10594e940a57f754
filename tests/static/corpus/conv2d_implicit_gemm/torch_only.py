"""NHWC convolution in plain PyTorch: pad x, then for each filter tap multiply the strided input view by that
tap's filters and sum over channels."""
import torch
import torch.nn.functional as F


def kernel(x, w, *, stride, pad):
    N, H, W, C = x.shape
    K, R, S, _ = w.shape
    P = (H + 2 * pad - R) // stride + 1
    Q = (W + 2 * pad - S) // stride + 1
    xp = F.pad(x.float(), (0, 0, pad, pad, pad, pad))
    y = torch.zeros((N, P, Q, K), dtype=torch.float32, device=x.device)
    for r in range(R):
        for s in range(S):
            patch = xp[:, r:r + stride * (P - 1) + 1:stride, s:s + stride * (Q - 1) + 1:stride, :]
            y += (patch[..., None, :] * w[:, r, s, :].float()).sum(-1)
    return y.to(x.dtype)
