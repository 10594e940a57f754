"""No custom kernel: k rounds of a row max in PyTorch (torch.topk/sort are forbidden), each found maximum masked
out before the next round."""
import torch


def kernel(x, *, k):
    work = x.float().clone()
    vals = torch.empty((x.shape[0], k), dtype=x.dtype, device=x.device)
    idx = torch.empty((x.shape[0], k), dtype=torch.int64, device=x.device)
    for j in range(k):
        v, i = work.max(dim=-1)
        vals[:, j] = v.to(x.dtype)
        idx[:, j] = i
        work.scatter_(1, i[:, None], float("-inf"))
    return vals, idx
