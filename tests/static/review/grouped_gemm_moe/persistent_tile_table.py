"""MoE grouped GEMM, Y[o_e:o_e+1] = X[o_e:o_e+1] @ W[e]^T, as two launches with no host synchronisation.

1. ``_build_tile_table``: one program scans the expert offsets on the device (tile counts cdiv(rows_e, BM), a
   tl.cumsum prefix) and writes the flattened tile list: tile -> (expert, m_tile), expert-major, plus its length.
2. ``_grouped_gemm``: NUM_SMS persistent programs walk (tile, n_tile) pairs, n fastest, so programs running together
   share one expert's X rows and W[e] panel in L2. W[e] is read through a per-expert device tensor descriptor
   built from w + e.to(int64) * stride_we; X rows are masked at the expert boundary.
BM is the rows-per-expert bucket computed on the host from T / E; BN / BK / stages are autotuned keyed on it.
"""
import torch
import triton
import triton.language as tl

MAX_TILES_PER_CALL = 1 << 16

# BM is the tile table's row tile, fixed by the host from T / E; the autotuner picks the rest per bucket.
GEMM_CONFIGS = [
    triton.Config({"BN": 64, "BK": 128}, num_warps=4, num_stages=5),
    triton.Config({"BN": 128, "BK": 128}, num_warps=4, num_stages=4),
    triton.Config({"BN": 128, "BK": 64}, num_warps=8, num_stages=3),
    triton.Config({"BN": 256, "BK": 64}, num_warps=8, num_stages=3),
]


def rows_bucket(T, E):
    r = T // max(E, 1)
    return 16 if r <= 16 else 64 if r <= 512 else 128


@triton.jit
def _build_tile_table(offsets_ptr, tile_expert_ptr, tile_m_ptr, num_tiles_ptr, E,
                      BM: tl.constexpr, E_POW2: tl.constexpr):
    e = tl.arange(0, E_POW2)
    lo = tl.load(offsets_ptr + e, mask=e < E, other=0)
    hi = tl.load(offsets_ptr + e + 1, mask=e < E, other=0)
    tiles = tl.cdiv(hi - lo, BM)
    ends = tl.cumsum(tiles, axis=0)
    starts = ends - tiles
    total = tl.sum(tiles, axis=0)
    tl.store(num_tiles_ptr, total)
    for j in range(0, E):
        s = tl.sum(tl.where(e == j, starts, 0), axis=0)
        n = tl.sum(tl.where(e == j, tiles, 0), axis=0)
        for m in range(0, n):
            tl.store(tile_expert_ptr + s + m, j)
            tl.store(tile_m_ptr + s + m, m)


@triton.autotune(configs=GEMM_CONFIGS, key=["ROWS_BUCKET", "N", "K"])
@triton.jit
def _grouped_gemm(x_ptr, w_ptr, y_ptr, offsets_ptr, tile_expert_ptr, tile_m_ptr, num_tiles_ptr,
                  N, K, stride_xt, stride_we, stride_wn, stride_yt, ROWS_BUCKET,
                  BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, NUM_SMS: tl.constexpr):
    num_n = tl.cdiv(N, BN)
    total = tl.load(num_tiles_ptr) * num_n
    for t in tl.range(tl.program_id(0), total, NUM_SMS):
        tile = t // num_n
        pid_n = t % num_n
        e = tl.load(tile_expert_ptr + tile)
        m_tile = tl.load(tile_m_ptr + tile)
        row_lo = tl.load(offsets_ptr + e)
        row_hi = tl.load(offsets_ptr + e + 1)
        rows = row_lo + m_tile * BM + tl.arange(0, BM)
        w_desc = tl.make_tensor_descriptor(w_ptr + e.to(tl.int64) * stride_we, shape=[N, K],
                                           strides=[stride_wn, 1], block_shape=[BN, BK])
        n0 = pid_n * BN
        ks = tl.arange(0, BK)
        acc = tl.zeros((BM, BN), dtype=tl.float32)
        for k0 in range(0, K, BK):
            x = tl.load(x_ptr + rows[:, None].to(tl.int64) * stride_xt + (k0 + ks)[None, :],
                        mask=(rows[:, None] < row_hi) & ((k0 + ks)[None, :] < K), other=0.0)
            w = w_desc.load([n0, k0])
            acc = tl.dot(x, w.T, acc)
        cols = n0 + tl.arange(0, BN)
        tl.store(y_ptr + rows[:, None].to(tl.int64) * stride_yt + cols[None, :], acc.to(tl.bfloat16),
                 mask=(rows[:, None] < row_hi) & (cols[None, :] < N))


class GroupedGemm:
    def __init__(self):
        self._tables = {}

    def _table(self, device):
        if device not in self._tables:
            self._tables[device] = (torch.empty(MAX_TILES_PER_CALL, device=device, dtype=torch.int32),
                                    torch.empty(MAX_TILES_PER_CALL, device=device, dtype=torch.int32),
                                    torch.empty(1, device=device, dtype=torch.int32))
        return self._tables[device]

    def __call__(self, X, W, expert_offsets):
        T, K = X.shape
        E, N, _ = W.shape
        Y = torch.empty((T, N), device=X.device, dtype=X.dtype)
        tile_e, tile_m, n_tiles = self._table(X.device)
        bucket = rows_bucket(T, E)
        _build_tile_table[(1,)](expert_offsets, tile_e, tile_m, n_tiles, E, BM=bucket,
                                E_POW2=triton.next_power_of_2(E))
        sms = torch.cuda.get_device_properties(X.device).multi_processor_count
        triton.set_allocator(lambda size, align, stream: torch.empty(size, dtype=torch.int8, device=X.device))
        _grouped_gemm[(sms,)](X, W, Y, expert_offsets, tile_e, tile_m, n_tiles, N, K,
                              X.stride(0), W.stride(0), W.stride(1), Y.stride(0), bucket, BM=bucket, NUM_SMS=sms)
        return Y


kernel = GroupedGemm()
