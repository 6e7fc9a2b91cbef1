"""Attack: an infinite CPU loop inside a call."""


def softmax_naive(x, dim=-1):
    while True:
        pass


def softmax_stable(x, dim=-1):
    while True:
        pass
