"""Bug: softmax over dim=0, normalising columns instead of each query's row (source: seed 001 line ~62 / misconception #1).

Misconception: softmax-wrong-dim
"""

import torch


def attention_scores(inputs):
    return inputs @ inputs.transpose(-2, -1)


def attention_weights(scores):
    return torch.softmax(scores, dim=0)


def context_vectors(inputs):
    return attention_weights(attention_scores(inputs)) @ inputs
