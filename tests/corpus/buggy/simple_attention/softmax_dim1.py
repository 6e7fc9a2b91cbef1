"""Bug: softmax over dim=1, right for (T, T) scores but the query dim of a (B, T, T) batch (misconception #1).

Misconception: softmax-wrong-dim
"""

import torch


def attention_scores(inputs):
    return inputs @ inputs.transpose(-2, -1)


def attention_weights(scores):
    return torch.softmax(scores, dim=1)


def context_vectors(inputs):
    return attention_weights(attention_scores(inputs)) @ inputs
