"""The similarity benchmark's independently written solutions (tests/corpus/independent) are correct: each author's
module gives the reference's values (float64, the same weights), so a pair of them is honest independent work."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import torch

from grader.course import references

ROOT = Path(__file__).resolve().parents[3]
AUTHORS = ("ana", "ben", "chen")


def _load(author: str, module: str) -> ModuleType:
    folder = str(ROOT / "tests" / "corpus" / "independent")
    if folder not in sys.path:
        sys.path.insert(0, folder)
    return importlib.import_module(f"{author}.{module}")


def _ref(module: str) -> ModuleType:
    references.solutions_package(ROOT)  # this checkout's, whatever another test registered
    return importlib.import_module(f"solutions.{module}")


def _same_module(ref: torch.nn.Module, alt: torch.nn.Module) -> None:
    """``alt`` takes ``ref``'s parameters (every one of its own must be among them)."""
    params = {k: v for k, v in ref.state_dict().items() if k in dict(ref.named_parameters())}
    missing = alt.load_state_dict(params, strict=False).missing_keys
    assert not [k for k in missing if k in dict(alt.named_parameters())]
    ref.eval()
    alt.eval()


def _modules(
    module: str, cls: str, args: tuple[Any, ...], inputs: tuple[Any, ...], author: str
) -> None:
    ref, alt = getattr(_ref(module), cls)(*args), getattr(_load(author, module), cls)(*args)
    _same_module(ref, alt)
    torch.testing.assert_close(alt(*inputs), ref(*inputs))


def _functions(module: str, name: str, author: str, *cases: tuple[Any, ...]) -> None:
    ref, alt = getattr(_ref(module), name), getattr(_load(author, module), name)
    for case in cases:
        got, expected = alt(*case), ref(*case)
        torch.testing.assert_close(got, expected, equal_nan=True)


def _x(*shape: int) -> torch.Tensor:
    return torch.randn(*shape)


def softmax(a: str) -> None:
    for f in ("softmax_naive", "softmax_stable"):
        _functions("softmax", f, a, (_x(3, 5),), (_x(2, 3, 4), 1))


def simple_attention(a: str) -> None:
    for f in ("attention_scores", "attention_weights", "context_vectors"):
        _functions("simple_attention", f, a, (_x(5, 4),), (_x(2, 5, 4),))


def scaled_dot_product(a: str) -> None:
    q, k, v = _x(2, 3, 4), _x(2, 6, 4), _x(2, 6, 5)
    blocked = torch.rand(3, 6) > 0.4
    blocked[0] = False  # a query that may attend to nothing: weights 0
    _functions(
        "scaled_dot_product",
        "scaled_dot_product_attention",
        a,
        (q, k, v),
        (q, k, v, blocked),
        (q, k, v, _x(3, 6)),
        (q, k, v, None, 0.0, 0.3),
    )


def masks(a: str) -> None:
    _functions("masks", "causal_mask", a, (0,), (5,))
    _functions("masks", "padding_mask", a, (torch.tensor([0, 3, 5]), 5))
    _functions(
        "masks",
        "to_additive",
        a,
        (torch.rand(3, 4) > 0.5,),
        (torch.rand(2, 2) > 0.5, torch.float16),
    )


def self_attention(a: str) -> None:
    for cls in ("SelfAttentionV1", "SelfAttentionV2"):
        _modules("self_attention", cls, (4, 6), (_x(2, 5, 4),), a)


def causal_attention(a: str) -> None:
    _modules("causal_attention", "CausalAttention", (4, 6, 8, 0.5), (_x(2, 5, 4),), a)


def multihead_attention(a: str) -> None:
    for cls in ("MultiHeadAttentionWrapper", "MultiHeadAttention"):
        _modules("multihead_attention", cls, (4, 6, 8, 0.5, 2), (_x(2, 5, 4),), a)


def cross_attention(a: str) -> None:
    pad = torch.tensor([[1, 1, 1, 0, 0, 0, 0], [1] * 7])
    _modules("cross_attention", "CrossAttention", (8, 2), (_x(2, 5, 8), _x(2, 7, 8), pad), a)


def decaying_attention(a: str) -> None:
    _modules("decaying_attention", "DecayingAttention", (8, 2), (_x(2, 5, 8),), a)
    for n in (1, 5, 8, 12):
        torch.testing.assert_close(
            _load(a, "decaying_attention").alibi_slopes(n),
            _ref("decaying_attention").alibi_slopes(n),
        )


def efficient_attention(a: str) -> None:
    q, k, v = _x(2, 5, 4), _x(2, 9, 4), _x(2, 9, 3)
    _functions("efficient_attention", "sdpa_attention", a, (q, k, v), (q, k, v, None, True))
    _functions(
        "efficient_attention",
        "flash_attention",
        a,
        (q, k, v, False, 4),
        (q, k, v, True, 4),
        (q, k, v, True, 64),
        (q.half(), k.half(), v.half(), True, 2),
    )


CHECKS: list[Callable[[str], None]] = [
    softmax,
    simple_attention,
    scaled_dot_product,
    masks,
    self_attention,
    causal_attention,
    multihead_attention,
    cross_attention,
    decaying_attention,
    efficient_attention,
]


@pytest.mark.parametrize("author", AUTHORS)
@pytest.mark.parametrize("check", CHECKS, ids=lambda c: c.__name__)
def test_independent_solution_matches_the_reference(
    author: str, check: Callable[[str], None]
) -> None:
    torch.manual_seed(0)
    before = torch.get_default_dtype()
    torch.set_default_dtype(
        torch.float64
    )  # parameters and inputs in float64: a real difference is never rounding
    try:
        check(author)
    finally:
        torch.set_default_dtype(before)


def test_every_exercise_has_three_authors() -> None:
    for author in AUTHORS:
        found = {p.stem for p in (ROOT / "tests/corpus/independent" / author).glob("*.py")} - {
            "__init__"
        }
        assert found == {c.__name__ for c in CHECKS}
