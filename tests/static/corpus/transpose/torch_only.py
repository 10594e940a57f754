"""No custom kernel."""
import torch


def kernel(X):
    return X.t().contiguous()
