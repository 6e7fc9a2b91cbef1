"""Bug: weights = scores / scores.sum(), the seed's attn_weights_2_tmp instead of softmax (source: seed 001 line ~48).

Misconception: not-softmax
"""

import torch


def attention_scores(inputs):
    return inputs @ inputs.transpose(-2, -1)


def attention_weights(scores):
    return scores / scores.sum(dim=-1, keepdim=True)


def context_vectors(inputs):
    return attention_weights(attention_scores(inputs)) @ inputs
