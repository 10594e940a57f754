"""No custom kernel."""
import torch


def kernel(logits, target):
    lg = logits.float().requires_grad_(True)
    loss = torch.nn.functional.cross_entropy(lg, target, reduction="none")
    loss.sum().backward()
    return loss.detach(), lg.grad.to(logits.dtype)
