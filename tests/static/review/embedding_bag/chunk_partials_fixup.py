"""EmbeddingBag with bounded chunks and a second-pass fixup instead of atomics, behind a launcher class.

Pass 1: the lookup range [0, nnz) is cut into fixed chunks of CHUNK lookups that never cross a bag boundary
(a bag of n lookups has cdiv(n, CHUNK) chunks, found by searchsorted on the device). Each program gathers an
[UNROLL, BLOCK_D] tile per step from an [UNROLL] index vector and writes its fp32 partial row into a workspace.
Pass 2: one program per bag sums its chunks' partial rows and writes the output row (a zero row for an empty bag).
Table loads take the launcher's cache policy: 'stream' for uniform traffic, 'keep' when lookups outnumber rows.
"""
import torch
import triton
import triton.language as tl

CHUNK = 512
UNROLL = 8
POLICIES = {"stream": "evict_first", "keep": "evict_last"}


@triton.jit
def _chunk_partials(table_ptr, idx_ptr, w_ptr, c_start_ptr, c_end_ptr, part_ptr, n_chunks_ptr, D, stride_t,
                    UNROLL: tl.constexpr, BLOCK_D: tl.constexpr, POLICY: tl.constexpr):
    c = tl.program_id(0)
    if c < tl.load(n_chunks_ptr):  # the chunk count stays on the device; the grid is an upper bound
        start = tl.load(c_start_ptr + c)
        end = tl.load(c_end_ptr + c)
        offs_d = tl.arange(0, BLOCK_D)
        d_ok = offs_d < D
        u = tl.arange(0, UNROLL)
        acc = tl.zeros([UNROLL, BLOCK_D], dtype=tl.float32)
        for i in range(start, end, UNROLL):
            pos = i + u
            ok = pos < end
            rows = tl.load(idx_ptr + pos, mask=ok, other=0).to(tl.int64)
            w = tl.load(w_ptr + pos, mask=ok, other=0.0)
            vals = tl.load(table_ptr + rows[:, None] * stride_t + offs_d[None, :], mask=ok[:, None] & d_ok[None, :],
                           other=0.0, eviction_policy=POLICY)
            acc += w[:, None] * vals.to(tl.float32)
        tl.store(part_ptr + c.to(tl.int64) * D + offs_d, tl.sum(acc, axis=0), mask=d_ok)


@triton.jit
def _sum_chunks(part_ptr, first_ptr, out_ptr, D, BLOCK_D: tl.constexpr):
    bag = tl.program_id(0)
    lo = tl.load(first_ptr + bag)
    hi = tl.load(first_ptr + bag + 1)
    offs_d = tl.arange(0, BLOCK_D)
    d_ok = offs_d < D
    acc = tl.zeros([BLOCK_D], dtype=tl.float32)
    for c in range(lo, hi):
        acc += tl.load(part_ptr + c.to(tl.int64) * D + offs_d, mask=d_ok, other=0.0)
    tl.store(out_ptr + bag.to(tl.int64) * D + offs_d, acc, mask=d_ok)


class EmbeddingBagSum:
    def __init__(self, policy=None):
        self.policy = policy

    def _chunks(self, offsets, nnz, B):
        lengths = offsets[1:] - offsets[:-1]
        per_bag = (lengths + CHUNK - 1) // CHUNK
        first = torch.zeros(B + 1, device=offsets.device, dtype=torch.int64)
        first[1:] = torch.cumsum(per_bag, 0)
        max_chunks = nnz // CHUNK + B
        ids = torch.arange(max_chunks, device=offsets.device)
        bag = torch.searchsorted(first[1:], ids, right=True).clamp_(max=B - 1)
        k = ids - first[bag]
        c_start = offsets[bag] + k * CHUNK
        c_end = torch.minimum(c_start + CHUNK, offsets[bag + 1])
        return first, c_start, c_end, max_chunks

    def __call__(self, table, indices, offsets, psw):
        V, D = table.shape
        B = offsets.numel() - 1
        nnz = indices.numel()
        first, c_start, c_end, max_chunks = self._chunks(offsets, nnz, B)
        part = torch.empty((max_chunks, D), device=table.device, dtype=torch.float32)
        out = torch.empty((B, D), device=table.device, dtype=torch.float32)
        policy = self.policy or ("keep" if nnz >= V else "stream")
        block_d = triton.next_power_of_2(D)
        _chunk_partials[(max_chunks,)](table, indices, psw, c_start, c_end, part, first[-1:], D, table.stride(0),
                                       UNROLL=UNROLL, BLOCK_D=block_d, POLICY=POLICIES[policy], num_warps=4)
        _sum_chunks[(B,)](part, first, out, D, BLOCK_D=block_d, num_warps=1)
        return out


kernel = EmbeddingBagSum()
