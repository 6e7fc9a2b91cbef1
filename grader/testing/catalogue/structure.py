"""Structure checks that say what a module's parameters show: a bias the arguments asked for and the
module does not have (or the reverse), an output projection missing, keys and values as wide as the
queries, V1's matrices laid out as nn.Linear's, a decay that is not a parameter, a wrapper's heads
of the wrong width or all one head."""

from __future__ import annotations

from collections.abc import Mapping

from grader.testing.checks import fail
from grader.testing.diagnosis import tag

Shapes = Mapping[str, tuple[int, ...]]

_PROJECTIONS = ("W_query", "W_key", "W_value")


def expect_structure(got: Shapes, expected: Shapes, *, what: str) -> None:
    """Fail unless the parameter names and shapes are ``expected``, naming the misconception they
    show, if any."""
    __tracebackhide__ = True
    if dict(got) == dict(expected):
        return
    said = diagnose_structure(got, expected)
    fail(f"{what}: got {dict(got)}, expected {dict(expected)}" + (f"\n  {said}" if said else ""))


def diagnose_structure(got: Shapes, expected: Shapes) -> str | None:
    missing, extra = set(expected) - set(got), set(got) - set(expected)
    shaped = {n for n in set(got) & set(expected) if tuple(got[n]) != tuple(expected[n])}
    for test in (
        _biases,
        _out_proj,
        _kv_width,
        _v1_layout,
        _gamma,
        _head_width,
        _one_head,
        _unregistered,
    ):
        said = test(missing, extra, shaped, got, expected)
        if said:
            return said
    return None


def _biases(
    missing: set[str], extra: set[str], shaped: set[str], got: Shapes, expected: Shapes
) -> str | None:
    lost = {n for n in missing if n.endswith(".bias") and n.split(".")[-2] in _PROJECTIONS}
    added = {n for n in extra if n.endswith(".bias") and n.split(".")[-2] in _PROJECTIONS}
    if (lost or added) and not (missing - lost) and not (extra - added) and not shaped:
        return tag(
            "qkv-bias-ignored",
            "the projections' biases do not follow the bias argument: pass it on to "
            "every nn.Linear it concerns",
        )
    return None


def _out_proj(
    missing: set[str], extra: set[str], shaped: set[str], got: Shapes, expected: Shapes
) -> str | None:
    if "out_proj.weight" in missing:
        return tag("out-proj-missing", "the module has no output projection out_proj")
    if {"out_proj.bias"} == missing | extra and not shaped:
        has = "out_proj.bias" in extra
        return tag(
            "out-proj-bias",
            "out_proj "
            + (
                "has a bias the arguments did not ask for"
                if has
                else "has no bias, and the specification gives it one"
            ),
        )
    return None


def _kv_width(
    missing: set[str], extra: set[str], shaped: set[str], got: Shapes, expected: Shapes
) -> str | None:
    kv = {n for n in shaped if n.split(".")[0] in ("W_key", "W_value")}
    if (
        kv
        and kv == shaped
        and not missing
        and not extra
        and all(got[n][0] == got.get("W_query.weight", (0,))[0] for n in kv if n.endswith("weight"))
    ):
        return tag(
            "kv-heads-full-width",
            "W_key and W_value are as wide as W_query (d_model): with fewer key/value "
            "heads they map to num_kv_heads * head_dim features",
        )
    return None


def _v1_layout(
    missing: set[str], extra: set[str], shaped: set[str], got: Shapes, expected: Shapes
) -> str | None:
    if (
        shaped
        and not missing
        and not extra
        and all(len(got[n]) == 2 and tuple(got[n]) == tuple(reversed(expected[n])) for n in shaped)
    ):
        return tag(
            "v1-weights-layout",
            "the matrices are stored transposed, (d_out, d_in) as nn.Linear does, where "
            "(d_in, d_out) is specified (x @ W)",
        )
    return None


def _gamma(
    missing: set[str], extra: set[str], shaped: set[str], got: Shapes, expected: Shapes
) -> str | None:
    if "gamma" in missing:
        return tag(
            "gamma-not-parameter",
            "gamma is not among the parameters: a buffer or a plain tensor never "
            "learns; make it an nn.Parameter",
        )
    return None


def _head_width(
    missing: set[str], extra: set[str], shaped: set[str], got: Shapes, expected: Shapes
) -> str | None:
    heads = {n for n in shaped if n.startswith("heads.")}
    if heads and heads == shaped and not missing and not extra:
        return tag(
            "head-width",
            "each head has another width than the d_out it was given (every head of the "
            "wrapper returns d_out features)",
        )
    return None


def _one_head(
    missing: set[str], extra: set[str], shaped: set[str], got: Shapes, expected: Shapes
) -> str | None:
    """Only ``heads.0.*`` registered where later heads are expected: named_parameters() lists a
    module once, however many times a ModuleList holds it."""
    later = {n for n in missing if n.startswith("heads.") and n.split(".")[1] not in ("", "0")}
    first = {"heads.0." + n.split(".", 2)[2] for n in later if n.count(".") >= 2}
    if not later or later != missing or extra or not first <= set(got):
        return None
    return tag(
        "heads-shared",
        "your module registers the parameters of heads.0 only: nn.ModuleList([head] * num_heads) holds "
        "one head num_heads times (every head shares its weights), and named_parameters() lists it once "
        "(or only one head was built); build a new head for each of the num_heads",
    )


def _unregistered(
    missing: set[str], extra: set[str], shaped: set[str], got: Shapes, expected: Shapes
) -> str | None:
    """No parameter at all where submodules' are expected: modules held in a plain list or dict."""
    if (
        got
        or not missing
        or not all(n.count(".") >= 2 and n.split(".")[1].isdigit() for n in missing)
    ):
        return None  # only names of list items (heads.0.W_query.weight) say a list was meant
    holder = sorted({n.split(".")[0] for n in missing})[0]
    return tag(
        "not-a-buffer",
        f"your module registers no parameters: the {holder} are not registered (a plain Python list hides "
        "its modules from named_parameters(), state_dict() and .to()); hold them in nn.ModuleList",
    )
