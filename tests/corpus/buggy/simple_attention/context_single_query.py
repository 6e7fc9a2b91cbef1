"""Bug: context vector of query x^2 only, the seed's context_vec_2 loop (source: seed 001 line ~80).

Misconception: context-single-query
"""

import torch


def attention_scores(inputs):
    return inputs @ inputs.transpose(-2, -1)


def attention_weights(scores):
    return torch.softmax(scores, dim=-1)


def context_vectors(inputs):
    weights = attention_weights(attention_scores(inputs))
    query = inputs[..., 1, :]
    context = torch.zeros(query.shape)
    for i in range(inputs.shape[-2]):
        context += weights[..., 1, i, None] * inputs[..., i, :]
    return context
