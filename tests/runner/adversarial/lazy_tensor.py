# exploit: return a tensor subclass that answers every comparison with "equal"
# expect: rejected
# flag: static.tensor_subclass
# runtime: rejected
# runtime-flag: output_not_plain_tensor
import torch


class Agreeable(torch.Tensor):
    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        if func in (torch.Tensor.__eq__, torch.eq, torch.isfinite, torch.Tensor.__le__, torch.le):
            return torch.ones(args[0].shape, dtype=torch.bool)
        return super().__torch_function__(func, types, args, kwargs or {})


def kernel(x):
    return torch.empty_like(x).as_subclass(Agreeable)
