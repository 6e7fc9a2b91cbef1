"""The operators behind each banned API: data shared by the worker's runtime ban and the trusted
static scan.

A banned API has many names (``torch.softmax``, ``torch._C._VariableFunctions.softmax``,
``torch._softmax``, ``torch.ops.aten._softmax.default``, ``torch._C.TensorBase.softmax``, a Python
original captured before the ban was installed); every one of them reaches torch's function dispatch
as one of these operators, so the runtime ban refuses them by operator (:mod:`grader.inside.bans`)
and the scan resolves a torch path ending in one of them to the banned API
(:mod:`grader.scoring.banned`). No torch import here: the trusted side reads this table too.
"""

from __future__ import annotations

SOFTMAX = ("softmax", "_softmax", "special_softmax", "_softmax_backward_data")
LOG_SOFTMAX = ("log_softmax", "_log_softmax", "special_log_softmax", "_log_softmax_backward_data")
SDPA = (
    "scaled_dot_product_attention",
    "_scaled_dot_product_attention_math",
    "_scaled_dot_product_flash_attention",
    "_scaled_dot_product_flash_attention_for_cpu",
    "_scaled_dot_product_efficient_attention",
    "_scaled_dot_product_cudnn_attention",
    "_scaled_dot_product_fused_attention_overrideable",
    "_scaled_dot_product_attention_math_for_mps",
    "_fused_sdp_choice",
    "_efficient_attention_forward",
    "_flash_attention_forward",
)
MHA = (
    "multi_head_attention_forward",
    "_native_multi_head_attention",
    "_transformer_encoder_layer_fwd",
)

OPERATORS: dict[str, tuple[str, ...]] = {
    "torch.softmax": SOFTMAX,
    "torch.nn.functional.softmax": SOFTMAX,
    "torch.Tensor.softmax": SOFTMAX,
    "torch.special.softmax": SOFTMAX,
    "torch.nn.Softmax": SOFTMAX,
    "torch.log_softmax": LOG_SOFTMAX,
    "torch.nn.functional.log_softmax": LOG_SOFTMAX,
    "torch.Tensor.log_softmax": LOG_SOFTMAX,
    "torch.special.log_softmax": LOG_SOFTMAX,
    "torch.nn.LogSoftmax": LOG_SOFTMAX,
    "torch.nn.functional.scaled_dot_product_attention": SDPA,
    "torch.nn.MultiheadAttention": MHA,
    "torch.nn.functional.multi_head_attention_forward": MHA,
}


def operators(api: str) -> tuple[str, ...]:
    """The operator names of ``api`` (an API outside the table: its own last name)."""
    return OPERATORS.get(api, (api.rsplit(".", 1)[-1],))
