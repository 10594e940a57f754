"""MoE routing and permutation in plain PyTorch: k rounds of argmax, a softmax over the picks, one-hot counts and
ranks with cumsum, X_perm by index assignment."""
import torch
import torch.nn.functional as F


def kernel(logits, X, *, k):
    T, E = logits.shape
    work = logits.clone()
    ids = torch.empty((T, k), dtype=torch.long, device=logits.device)
    for j in range(k):
        best = work.argmax(dim=-1)
        ids[:, j] = best
        work.scatter_(1, best[:, None], float("-inf"))
    picked = logits.gather(1, ids)
    w = torch.exp(picked - picked.max(dim=-1, keepdim=True).values)
    w = w / w.sum(dim=-1, keepdim=True)
    flat = ids.flatten()
    one_hot = F.one_hot(flat, E).to(torch.int32)
    counts = one_hot.sum(0)
    offsets = torch.zeros(E + 1, dtype=torch.int32, device=logits.device)
    offsets[1:] = torch.cumsum(counts, 0)
    rank = (torch.cumsum(one_hot, 0) * one_hot).sum(1) - 1
    dest = offsets[flat] + rank
    X_perm = torch.empty((T * k, X.shape[1]), dtype=X.dtype, device=X.device)
    X_perm[dest] = X.repeat_interleave(k, dim=0)
    return ids.to(torch.int32), w, offsets, dest.view(T, k).to(torch.int32), X_perm
