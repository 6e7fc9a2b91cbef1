"""Bug: to_additive builds the additive mask as (1 - mask) * float('-inf'), and 0 * -inf is NaN, so every ALLOWED position holds NaN instead of 0.0 (blocked ones are -inf).

Misconception: mask-multiplied
Held out: yes
Source: https://github.com/cerebroai/reformers/issues/3 (multiplying the mask by float('-inf') causes NaN output); written from scratch
"""

import torch


def causal_mask(seq_len, device=None):
    """True on and below the diagonal."""
    assert seq_len >= 0, "seq_len must be non-negative"
    i = torch.arange(seq_len, device=device)
    return i[:, None] >= i[None, :]


def padding_mask(lengths, max_len):
    """True where position j < lengths[b]."""
    assert lengths.dim() == 1, "lengths must be a 1-D tensor of sequence lengths"
    pos = torch.arange(max_len, device=lengths.device).unsqueeze(0)  # (1, S)
    return pos < lengths.unsqueeze(1)


def to_additive(mask, dtype=torch.float32):
    """0 where allowed, -inf where blocked."""
    assert mask.dtype == torch.bool, "to_additive expects a boolean mask (True = may attend)"
    blocked = 1.0 - mask.to(dtype)  # 1 where blocked, 0 where allowed
    return blocked * float("-inf")
