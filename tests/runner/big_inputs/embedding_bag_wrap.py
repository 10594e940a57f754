# Appended by tests/runner/test_big_inputs.py to references/embedding_bag/triton.py: the expert kernel, plus a
# line on stdout per call with the pointers it was given, and (WRITE_FROM_CALL > 0) one flipped bit in one
# element of the table from that call on.
WRITE_FROM_CALL = 0
_CALLS = [0]
_expert_kernel = kernel


def kernel(table, indices, offsets, per_sample_weights):
    _CALLS[0] += 1
    print(f"PTRS {_CALLS[0]} {table.data_ptr()} {indices.data_ptr()}", flush=True)
    out = _expert_kernel(table, indices, offsets, per_sample_weights)
    if WRITE_FROM_CALL and _CALLS[0] >= WRITE_FROM_CALL:
        table.view(torch.uint8).view(-1)[7] ^= 1
    return out
