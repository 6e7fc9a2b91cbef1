"""Bug: scores as `inputs @ inputs.T`, which on a 3-D batch reverses all dims (source: seed 001 line ~113 / misconception #4).

Misconception: keys-dot-t
"""

import torch


def attention_scores(inputs):
    return inputs @ inputs.T


def attention_weights(scores):
    return torch.softmax(scores, dim=-1)


def context_vectors(inputs):
    return attention_weights(attention_scores(inputs)) @ inputs
