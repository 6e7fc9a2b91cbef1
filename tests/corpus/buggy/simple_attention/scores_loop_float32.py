"""Bug: scores filled by a double loop into torch.zeros(T, T): float32 always, and 2-D inputs only (source: seed 001 line ~100).

Misconception: scores-loop
"""

import torch


def attention_scores(inputs):
    n = inputs.shape[-2]
    scores = torch.zeros(n, n)
    for i, x_i in enumerate(inputs):
        for j, x_j in enumerate(inputs):
            scores[i, j] = torch.dot(x_i, x_j)
    return scores


def attention_weights(scores):
    return torch.softmax(scores, dim=-1)


def context_vectors(inputs):
    return attention_weights(attention_scores(inputs)) @ inputs
