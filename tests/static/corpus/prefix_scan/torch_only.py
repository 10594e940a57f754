"""No kernel: a Hillis-Steele scan in PyTorch (log2(N) shifted adds along the last dim), accumulated in fp64
for fp32 inputs so the sums stay accurate. Every step reads and writes the whole tensor."""
import torch


def _shift_add(acc: torch.Tensor, d: int) -> torch.Tensor:
    out = acc.clone()
    out[:, d:] += acc[:, :-d]
    return out


def kernel(x: torch.Tensor) -> torch.Tensor:
    B, N = x.shape
    work = x.to(torch.float64) if x.is_floating_point() else x.to(torch.int64)
    d = 1
    while d < N:
        work = _shift_add(work, d)
        d *= 2
    return work.to(x.dtype)
