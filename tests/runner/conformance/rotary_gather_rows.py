# task: rotary_embedding
# expect: passed
# style: out-of-place RoPE over heads flattened into rows: cos rows gathered with torch.gather over an
# style: expanded position index, sin rows by advanced indexing (cache[positions]), the per-row token index built
# style: with repeat_interleave; NeoX halves rebuilt as full-width cos/sin with torch.cat; reshape and
# style: empty_like glue, the rotation style a constexpr picked on the host
"""RoPE on rows: q [T, H, D] is viewed as T*H rows of D; row r belongs to token r // H. Each program rotates
ROWS rows against the full-width cos/sin rows of their tokens (cat(c, c), cat(s, s) for NeoX)."""

import torch
import triton
import triton.language as tl


@triton.jit
def _rope_rows(x_ptr, y_ptr, tok_ptr, cos_ptr, sin_ptr, n_rows, stride_x, stride_y, stride_c,
               D: tl.constexpr, ROWS: tl.constexpr, IS_NEOX: tl.constexpr):
    rows = tl.program_id(0) * ROWS + tl.arange(0, ROWS)
    ok = rows < n_rows
    tok = tl.load(tok_ptr + rows, mask=ok, other=0)
    j = tl.arange(0, D)
    if IS_NEOX:
        partner = (j + D // 2) % D
        sign = tl.where(j < D // 2, -1.0, 1.0)
    else:
        partner = j ^ 1
        sign = tl.where(j % 2 == 0, -1.0, 1.0)
    mask = ok[:, None]
    x = tl.load(x_ptr + rows[:, None] * stride_x + j[None, :], mask=mask).to(tl.float32)
    xp = tl.load(x_ptr + rows[:, None] * stride_x + partner[None, :], mask=mask).to(tl.float32)
    c = tl.load(cos_ptr + tok[:, None] * stride_c + j[None, :], mask=mask)
    s = tl.load(sin_ptr + tok[:, None] * stride_c + j[None, :], mask=mask)
    y = x * c + sign[None, :] * xp * s
    tl.store(y_ptr + rows[:, None] * stride_y + j[None, :], y.to(y_ptr.dtype.element_ty), mask=mask)


def _full_width(rows, is_neox):
    return torch.cat([rows, rows], dim=-1) if is_neox else rows.repeat_interleave(2, dim=-1)


def _apply(x, tok, cos_full, sin_full, is_neox):
    T, H, D = x.shape
    x2 = x.reshape(T * H, D)
    y = torch.empty_like(x2)
    rows = 16
    _rope_rows[(triton.cdiv(T * H, rows),)](x2, y, tok, cos_full, sin_full, T * H, x2.stride(0), y.stride(0),
                                            cos_full.stride(0), D=D, ROWS=rows, IS_NEOX=is_neox)
    return y.reshape(T, H, D)


def kernel(q, k, positions, cos_cache, sin_cache, *, style):
    is_neox = style == "neox"
    T, half = positions.numel(), cos_cache.shape[1]
    idx = positions.view(-1, 1).expand(-1, half)
    cos = torch.gather(cos_cache, 0, idx)
    sin = sin_cache[positions]
    cos_full, sin_full = _full_width(cos, is_neox), _full_width(sin, is_neox)
    tokens = torch.arange(T, device=q.device)
    q_out = _apply(q, tokens.repeat_interleave(q.shape[1]), cos_full, sin_full, is_neox)
    k_out = _apply(k, tokens.repeat_interleave(k.shape[1]), cos_full, sin_full, is_neox)
    return q_out, k_out
