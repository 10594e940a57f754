"""No custom kernel: HF-style rotate_half in PyTorch (NeoX), even/odd slicing for GPT-J."""
import torch


def _rotate_half(x):
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((-x2, x1), dim=-1)


def kernel(q, k, positions, cos_cache, sin_cache, *, style):
    c = cos_cache[positions][:, None, :]
    s = sin_cache[positions][:, None, :]
    if style == "neox":
        c2, s2 = torch.cat((c, c), -1), torch.cat((s, s), -1)
        return ((q.float() * c2 + _rotate_half(q.float()) * s2).to(q.dtype),
                (k.float() * c2 + _rotate_half(k.float()) * s2).to(k.dtype))
    outs = []
    for x in (q, k):
        xf = x.float()
        e, o = xf[..., 0::2], xf[..., 1::2]
        out = torch.stack((e * c - o * s, o * c + e * s), dim=-1).flatten(-2)
        outs.append(out.to(x.dtype))
    return tuple(outs)
