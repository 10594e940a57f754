"""GPU debugging aid for references/moe_permute: runs the route, scan and scatter launches one at a time and
checks each intermediate (ids, block counts, ranks, bases, destinations) against torch before the next launch,
so a wrong intermediate is reported before it can become an illegal address. Trusted code, GPU only.

    CUDA_LAUNCH_BLOCKING=1 python benchmarks/debug_moe_permute.py [T E k H ...]
"""

from __future__ import annotations

import sys
from pathlib import Path

import torch
import triton

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from runner.loading import load_module  # noqa: E402

mod = load_module(ROOT / "references" / "moe_permute" / "triton.py", prefix="d2k_dbg")


def first_bad(name: str, got: torch.Tensor, want: torch.Tensor) -> bool:
    bad = (got != want).nonzero()
    if len(bad):
        i = tuple(bad[0].tolist())
        print(f"  {name}: {len(bad)} of {want.numel()} differ; first at {i}: got {got[i].item()} want {want[i].item()}")
        return False
    print(f"  {name}: ok")
    return True


def run(T: int, E: int, k: int, H: int) -> None:
    print(f"T={T} E={E} k={k} H={H}", flush=True)
    g = torch.Generator(device="cuda").manual_seed(0)
    logits = torch.randn(T, E, device="cuda", generator=g)
    X = torch.randn(T, H, device="cuda", generator=g).to(torch.bfloat16)
    k_p2, e_p2 = triton.next_power_of_2(k), triton.next_power_of_2(E)
    block_t = max(1, min(mod._MAX_BLOCK_T, mod._ONE_HOT // (k_p2 * e_p2), triton.next_power_of_2(T)))
    nb = triton.cdiv(T, block_t)
    ids = torch.full((T, k), -1, dtype=torch.int32, device="cuda")
    w = torch.empty((T, k), dtype=torch.float32, device="cuda")
    counts = torch.full((nb, E), -7, dtype=torch.int32, device="cuda")
    rank = torch.full((T, k), -7, dtype=torch.int32, device="cuda")
    mod._moe_route_kernel[(nb,)](logits, ids, w, counts, rank, T, E, logits.stride(0), K=k, K_P2=k_p2, E_P2=e_p2,
                                 BLOCK_T=block_t, num_warps=4)
    torch.cuda.synchronize()
    want_ids = torch.sort(logits, dim=-1, descending=True, stable=True).indices[:, :k].to(torch.int32)
    first_bad("ids", ids, want_ids)
    blk_ids = want_ids.view(-1)
    pad = nb * block_t * k - blk_ids.numel()
    blocks = torch.cat([blk_ids, torch.full((pad,), E, dtype=blk_ids.dtype, device="cuda")]).view(nb, block_t * k)
    want_counts = torch.stack([(blocks == e).sum(1) for e in range(E)], 1).to(torch.int32)
    first_bad("counts", counts, want_counts)
    oh = torch.nn.functional.one_hot(blocks.long(), E + 1)[..., :E]              # [nb, block_t*k, E]
    want_rank = ((oh.cumsum(1) * oh).sum(-1) - 1).view(-1)[: T * k].view(T, k).to(torch.int32)
    first_bad("rank", rank, want_rank)
    totals = torch.empty(E, dtype=torch.int32, device="cuda")
    c2 = counts.clone()
    mod._moe_scan_kernel[(triton.cdiv(E, min(mod._EG, e_p2)),)](c2, totals, nb, E, BLOCK_B=mod._SCAN_ROWS,
                                                                 EG=min(mod._EG, e_p2), num_warps=4)
    torch.cuda.synchronize()
    first_bad("totals", totals, counts.sum(0).to(torch.int32))
    first_bad("bases", c2, (counts.cumsum(0) - counts).to(torch.int32))
    # The scatter into a buffer 4x too tall, so a wrong destination lands in memory we own and shows in row_map.
    offsets = torch.full((E + 1,), -7, dtype=torch.int32, device="cuda")
    xp = torch.zeros((4 * T * k, H), dtype=X.dtype, device="cuda")
    row_map = rank.clone()
    block_h = min(mod._BLOCK_H, max(16, triton.next_power_of_2(H)))
    mod._moe_scatter_kernel[(T,)](X, xp, ids, c2, totals, row_map, offsets, T, E, H, X.stride(0), xp.stride(0),
                                  K=k, K_P2=k_p2, E_P2=e_p2, BLOCK_T=block_t, BLOCK_H=block_h, num_warps=4)
    torch.cuda.synchronize()
    want_off = torch.zeros(E + 1, dtype=torch.int32, device="cuda")
    want_off[1:] = counts.sum(0).cumsum(0)
    first_bad("expert_offsets", offsets, want_off)
    order = torch.argsort(want_ids.flatten(), stable=True)
    want_map = torch.empty(T * k, dtype=torch.int32, device="cuda")
    want_map[order] = torch.arange(T * k, dtype=torch.int32, device="cuda")
    first_bad("row_id_map", row_map, want_map.view(T, k))
    first_bad("X_perm", xp[: T * k], X[order // k])
    out = mod.moe_permute(logits, X, k)
    torch.cuda.synchronize()
    print("  full launch ran", [tuple(o.shape) for o in out], flush=True)


if __name__ == "__main__":
    a = [int(x) for x in sys.argv[1:]] or [45, 12, 3, 100, 1024, 8, 2, 256, 16384, 8, 2, 4096]
    for i in range(0, len(a), 4):
        run(*a[i:i + 4])
