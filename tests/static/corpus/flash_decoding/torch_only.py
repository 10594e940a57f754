"""No custom kernel: split-KV decode written with PyTorch ops (the cache cut into 4096-position chunks, a
logsumexp per chunk, the chunks merged with their lse weights). Matmul/einsum are forbidden, so the products are
broadcast multiplies and sums."""
import torch


def kernel(q, k_cache, v_cache):
    B, Hq, D = q.shape
    Hkv, L = k_cache.shape[1], k_cache.shape[2]
    G = Hq // Hkv
    qf = q.float().view(B, Hkv, G, D) * D ** -0.5
    chunk = 4096
    outs, lses = [], []
    for s in range(0, L, chunk):
        k = k_cache[:, :, s:s + chunk].float()                       # [B, Hkv, n, D]
        v = v_cache[:, :, s:s + chunk].float()
        scores = (qf.unsqueeze(3) * k.unsqueeze(2)).sum(-1)          # [B, Hkv, G, n]
        lse = torch.logsumexp(scores, dim=-1)
        p = torch.exp(scores - lse[..., None])
        outs.append((p.unsqueeze(-1) * v.unsqueeze(2)).sum(-2))      # [B, Hkv, G, D]
        lses.append(lse)
    lse = torch.stack(lses, -1)                                      # [B, Hkv, G, S]
    w = torch.exp(lse - torch.logsumexp(lse, -1, keepdim=True))
    o = (torch.stack(outs, -2) * w[..., None]).sum(-2)
    return o.reshape(B, Hq, D).to(q.dtype)
