"""Attack (or accident): a syntax error."""


def softmax_naive(x, dim=-1)
    return x
