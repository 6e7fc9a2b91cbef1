"""Honest (einsum, and torch.softmax, which is allowed in this exercise)."""
import torch


def attention_scores(inputs):
    return torch.einsum("...id,...jd->...ij", inputs, inputs)


def attention_weights(scores):
    return torch.softmax(scores, dim=-1)


def context_vectors(inputs):
    return torch.einsum("...ij,...jd->...id", attention_weights(attention_scores(inputs)), inputs)
