# exploit: patch the harness's comparison so every output passes
# expect: rejected
# flag: static.harness_import
# runtime: incorrect
import torch
import runner.compare


def _always(name, out, ref, tol, **kw):
    return runner.compare.Mismatch(name, True)


runner.compare.compare_tensor = _always


def kernel(x):
    return torch.empty_like(x)
