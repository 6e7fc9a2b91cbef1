"""RoPE's catalogue (:mod:`grader.testing.catalogue.rope`): each diagnosis on a corpus bug that shows it and never
on the reference; and partial credit that follows what is wrong (a table layout slip is not priced like wrong
values)."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path
from types import ModuleType

import pytest
import torch

from grader.course import manifest
from grader.testing.catalogue.rope import rotate_suspects, table_suspects
from grader.testing.diagnosis import PRECISION, Suspects
from tests.project.support.common import CORPUS, ROOT, grade_inprocess, solutions_copy

BUGS = CORPUS / "buggy" / "rope"
MODERN = manifest.load(assignment="attention-modern")


def load(path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"rope_{path.stem}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def named(suspects: Suspects, got: torch.Tensor, want: torch.Tensor) -> set[str]:
    said = (suspects + PRECISION).explain(
        got, want, 1e-10, 1e-7
    )  # as every float64 check tries it last
    return {
        i for found in re.findall(r"diagnosis \[([a-z0-9, -]+)\]", said) for i in found.split(", ")
    }


def tables64(hd: int, max_len: int, base: float = 10000.0) -> tuple[torch.Tensor, torch.Tensor]:
    return load(ROOT / "solutions" / "rope.py").rope_frequencies(
        hd, max_len, base, dtype=torch.float64
    )


TABLE_BUGS = [
    ("sin_cos_swapped", 10000.0, "rope-return-order"),
    ("base_ignored", 500000.0, "rope-base-ignored"),
    ("exponent_positive", 10000.0, "rope-frequencies"),
    ("frequencies_from_head_dim", 10000.0, "rope-frequencies"),
    ("positions_start_at_one", 10000.0, "rope-positions-start-one"),
    ("angles_in_float32", 10000.0, "precision-lowered"),
]


@pytest.mark.parametrize("bug,base,mid", TABLE_BUGS)
def test_a_table_bug_is_named_and_the_reference_is_not(bug, base, mid):
    want = tables64(16, 300, base)[0]
    suspects = table_suspects(16, 300, base, 0, torch.float64)
    assert named(
        suspects,
        load(BUGS / f"{bug}.py").rope_frequencies(16, 300, base, dtype=torch.float64)[0],
        want,
    ) == {mid}
    assert (
        named(
            suspects,
            load(ROOT / "solutions" / "rope.py").rope_frequencies(
                16, 300, base, dtype=torch.float64
            )[0],
            want,
        )
        == set()
    )


ROTATION_BUGS = [
    ("rotates_the_wrong_half", "apply_rope", None, "rope-rotation-sign"),
    ("half_split_pairs_neighbours", "apply_rope", None, "rope-pairing"),
    ("interleaved_is_half_split", "apply_rope_interleaved", None, "rope-pairing"),
    ("interleaved_not_reinterleaved", "apply_rope_interleaved", None, "rope-pairing"),
    ("positions_ignored", "apply_rope", "chunk", "positions-not-offset"),
    (
        "batch_positions_not_broadcast_over_heads",
        "apply_rope",
        "per-sequence",
        "rope-positions-broadcast",
    ),
    ("tables_reshaped_to_4d", "apply_rope", "2-D", "rope-shape"),
]


@pytest.mark.parametrize("bug,fn,case,mid", ROTATION_BUGS)
def test_a_rotation_bug_is_named_and_the_reference_is_not(bug, fn, case, mid):
    gen = torch.Generator().manual_seed(3)
    cos, sin = tables64(8, 32)
    x = (
        torch.randn(7, 8, generator=gen, dtype=torch.float64)
        if case == "2-D"
        else torch.randn(3, 1, 5, 8, generator=gen, dtype=torch.float64)
    )
    positions = {
        "chunk": torch.arange(9, 14),
        "per-sequence": torch.randint(0, 32, (3, 1), generator=gen),
    }.get(case)
    if case == "per-sequence":
        x = x[:, :, :1]
    kwargs = {} if positions is None else {"positions": positions}
    want = getattr(load(ROOT / "solutions" / "rope.py"), fn)(x, cos, sin, **kwargs)
    suspects = rotate_suspects(x, cos, sin, positions, interleaved=fn == "apply_rope_interleaved")
    assert named(suspects, getattr(load(BUGS / f"{bug}.py"), fn)(x, cos, sin, **kwargs), want) == {
        mid
    }
    assert named(suspects, want.clone(), want) == set()


NO_ROTATION = """

def apply_rope(x, cos, sin, positions=None):
    return x.clone()


def apply_rope_interleaved(x, cos, sin, positions=None):
    return x.clone()
"""


def score(tmp_path: Path, module: str | None) -> float:
    sub = solutions_copy(tmp_path / "sub")
    if module is not None:
        (sub / "rope.py").write_text(module)
    scored, most = grade_inprocess(sub, MODERN, exercises=["rope"])["rope"]
    assert most == 16
    return scored


def test_partial_credit_follows_what_is_wrong(tmp_path):
    """Hugging Face's table layout with the right values keeps most points (it loses the layout's own test); a RoPE
    that rotates nothing (its tables keep the right shape, its rotations return x) keeps almost none (the
    tables' shape, the norms a rotation keeps, what position 0 alone shows); the reference keeps all."""
    hf = (BUGS / "tables_in_hf_layout.py").read_text()
    assert score(tmp_path / "ref", None) == 16
    assert score(tmp_path / "hf", hf) >= 14
    assert (
        score(
            tmp_path / "none",
            (ROOT / "solutions" / "rope.py")
            .read_text()
            .split("\ndef apply_rope(")[0]
            .replace(
                "return angles.cos().to(dtype), angles.sin().to(dtype)",
                "return (angles * 0).cos().to(dtype), (angles * 0).sin().to(dtype)",
            )
            + NO_ROTATION,
        )
        <= 2.5
    )
