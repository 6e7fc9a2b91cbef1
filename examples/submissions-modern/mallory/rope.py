"""Attack: an infinite CPU loop inside a call."""


def rope_frequencies(head_dim, max_len, base=10000.0, dtype=None):
    while True:
        pass


def apply_rope(x, cos, sin, positions=None):
    while True:
        pass


def apply_rope_interleaved(x, cos, sin, positions=None):
    while True:
        pass
