"""Long bags split into 2048-lookup chunks, but the split is planned on the host: bag lengths are copied to the
CPU (.tolist()) every call to build the (bag, start, end) list, and the cache policy is picked by counting
distinct indices on the host (torch.unique(...).numel()). The kernel walks its chunk one lookup at a time and
adds the chunk's sum to the zeroed output with one atomic per element of the row."""
import torch
import triton
import triton.language as tl

CHUNK = 2048


@triton.jit
def chunk_kernel(table_ptr, idx_ptr, w_ptr, out_ptr, bag_ptr, lo_ptr, hi_ptr, D, stride_t,
                 BLOCK_D: tl.constexpr, KEEP_HOT: tl.constexpr):
    c = tl.program_id(0)
    bag = tl.load(bag_ptr + c)
    lo = tl.load(lo_ptr + c)
    hi = tl.load(hi_ptr + c)
    d = tl.arange(0, BLOCK_D)
    dm = d < D
    acc = tl.zeros([BLOCK_D], dtype=tl.float32)
    for i in range(lo, hi):
        r = tl.load(idx_ptr + i)
        if KEEP_HOT:
            row = tl.load(table_ptr + r * stride_t + d, mask=dm, other=0.0, eviction_policy="evict_last")
        else:
            row = tl.load(table_ptr + r * stride_t + d, mask=dm, other=0.0, eviction_policy="evict_first")
        acc += tl.load(w_ptr + i) * row.to(tl.float32)
    tl.atomic_add(out_ptr + bag * D + d, acc, mask=dm)


def kernel(table, indices, offsets, per_sample_weights):
    V, D = table.shape
    B = offsets.numel() - 1
    out = torch.zeros((B, D), dtype=torch.float32, device=table.device)
    bags, los, his = [], [], []
    offs = offsets.tolist()
    for b in range(B):
        for s in range(offs[b], offs[b + 1], CHUNK):
            bags.append(b)
            los.append(s)
            his.append(min(s + CHUNK, offs[b + 1]))
    if not bags:
        return out
    dev = table.device
    bag_t = torch.tensor(bags, dtype=torch.int64, device=dev)
    lo_t = torch.tensor(los, dtype=torch.int64, device=dev)
    hi_t = torch.tensor(his, dtype=torch.int64, device=dev)
    keep_hot = torch.unique(indices).numel() < 0.5 * indices.numel()
    chunk_kernel[(len(bags),)](table, indices, per_sample_weights, out, bag_t, lo_t, hi_t, D, table.stride(0),
                               BLOCK_D=triton.next_power_of_2(D), KEEP_HOT=keep_hot, num_warps=4)
    return out
