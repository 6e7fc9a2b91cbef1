"""Bug: context vectors computed from the unnormalised scores instead of the weights (source: seed 001 line ~150).

Misconception: context-from-scores
"""

import torch


def attention_scores(inputs):
    return inputs @ inputs.transpose(-2, -1)


def attention_weights(scores):
    return torch.softmax(scores, dim=-1)


def context_vectors(inputs):
    return attention_scores(inputs) @ inputs
