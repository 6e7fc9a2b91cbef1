import torch


def softmax_naive(x, dim=-1):
    num = x.exp()
    den = num.sum(dim, keepdim=True)
    return num / den


def softmax_stable(x, dim=-1):
    # log-sum-exp trick
    return torch.exp(x - torch.logsumexp(x, dim=dim, keepdim=True))
