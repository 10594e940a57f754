"""EmbeddingBag in plain PyTorch: gather every looked-up row (an [nnz, D] fp32 matrix), weight it, and take
per-bag sums as differences of a running sum at the bag boundaries."""
import torch


def kernel(table, indices, offsets, per_sample_weights):
    rows = table[indices].float() * per_sample_weights[:, None]
    csum = torch.cat([rows.new_zeros(1, rows.shape[1]), torch.cumsum(rows, dim=0)])
    return csum[offsets[1:]] - csum[offsets[:-1]]
