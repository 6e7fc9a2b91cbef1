"""Honest (uses the shared helper module attn_utils too)."""
from . import attn_utils


def attention_scores(inputs):
    return inputs @ inputs.transpose(-2, -1)


def attention_weights(scores):
    return attn_utils.masked_softmax(scores)


def context_vectors(inputs):
    return attention_weights(attention_scores(inputs)) @ inputs
