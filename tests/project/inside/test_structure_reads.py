"""Structure is read from nn.Module's registries, never asked of the student's code (grader/inside/structure.py).

The oracle is nn.Module's own methods on honest modules (the references, a GPT-2-size module, shared and nested
submodules, non-persistent buffers); the attacks override those methods, ``__dict__`` or the registries themselves.
The second generation's "mask is a buffer" trick (tests/corpus/hostile/structure/) loses exactly that point in the
hidden suite, and the reference keeps it.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import torch
from torch import nn

from grader.course import manifest
from grader.inside import structure
from grader.inside.executor import Executor
from grader.protocol.errors import StudentError
from grader.scoring.runner import run_suites
from tests.project.support.common import CORPUS, ROOT, solutions_copy

pytestmark = pytest.mark.cost(8)  # seconds on 2 cores: started early (tests/project/conftest.py)

MASK_POINT = "test_mask_is_a_buffer_not_a_parameter"


class _Shared(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.inner = nn.Linear(3, 2)
        self.twin = self.inner  # the same module twice
        self.seq = nn.Sequential(
            nn.Linear(2, 2), nn.ReLU(), nn.Sequential(nn.Linear(2, 4, bias=False))
        )
        self.register_buffer("kept", torch.arange(3.0))
        self.register_buffer("scratch", torch.zeros(2), persistent=False)
        self.register_buffer("absent", None)
        self.tied = self.inner.weight  # a parameter reachable under a plain attribute too


def _honest_modules() -> list[nn.Module]:
    import importlib.util

    def load(name: str):
        spec = importlib.util.spec_from_file_location(
            f"_ref_{name}", ROOT / "solutions" / f"{name}.py", submodule_search_locations=None
        )
        module = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
        spec.loader.exec_module(module)  # type: ignore[union-attr]
        return module

    causal, cross, decay = (
        load("causal_attention"),
        load("cross_attention"),
        load("decaying_attention"),
    )
    return [
        causal.CausalAttention(4, 6, 7, 0.1, True),
        cross.CrossAttention(8, 2, 0.0, True),
        decay.DecayingAttention(6, 3),
        nn.MultiheadAttention(8, 2),
        nn.TransformerEncoderLayer(8, 2, 16),
        _Shared(),
    ]


@pytest.mark.parametrize("index", range(6))
def test_registry_reads_agree_with_nn_module_on_honest_modules(index):
    m = _honest_modules()[index]
    assert list(structure.named_parameters(m)) == [n for n, _ in m.named_parameters()]
    assert all(
        a is b for a, (_, b) in zip(structure.named_parameters(m).values(), m.named_parameters())
    )
    assert list(structure.named_buffers(m)) == [n for n, _ in m.named_buffers()]
    expected = m.state_dict()
    got = structure.state_dict(m)
    assert sorted(got) == sorted(expected) and all(
        torch.equal(got[k], expected[k]) for k in expected
    )
    assert not any(t.requires_grad for t in got.values())


def test_loading_writes_the_registered_tensors_and_reports_keys_as_torch_does():
    m, twin = _Shared(), _Shared()
    fresh = {
        k: v + 1 for k, v in structure.state_dict(twin).items()
    }  # a shared tensor gets one value
    assert structure.load_state_dict(m, {**fresh, "nope": torch.zeros(1)}, strict=False) == {
        "missing_keys": [],
        "unexpected_keys": ["nope"],
    }
    assert all(torch.equal(structure.state_dict(m)[k], fresh[k]) for k in fresh)
    expected = twin.load_state_dict({"kept": torch.ones(3)}, strict=False)
    got = structure.load_state_dict(m, {"kept": torch.ones(3)}, strict=False)
    assert got == {
        "missing_keys": list(expected.missing_keys),
        "unexpected_keys": list(expected.unexpected_keys),
    }
    with pytest.raises(RuntimeError, match="size mismatch for kept"):
        structure.load_state_dict(m, {"kept": torch.ones(4)}, strict=False)
    with pytest.raises(RuntimeError, match="Missing key"):
        structure.load_state_dict(m, {"kept": torch.ones(3)}, strict=True)


class _Liar(nn.Module):
    """Claims a `mask` buffer, a `fake` parameter and a state dict it does not have; hides its own registries."""

    def __init__(self) -> None:
        super().__init__()
        self.proj = nn.Linear(2, 2)
        self.causal = torch.ones(3, 3).tril()  # a plain attribute

    def named_buffers(self, *args, **kwargs):
        yield "mask", self.causal

    def named_parameters(self, *args, **kwargs):
        yield "fake", nn.Parameter(torch.zeros(1))

    def state_dict(self, *args, **kwargs):
        return {"mask": self.causal}

    def load_state_dict(self, *args, **kwargs):
        raise AssertionError("never asked")

    def __getattr__(self, name):
        if name == "_buffers":
            return {"mask": torch.ones(1)}
        return super().__getattr__(name)


class _LyingDict(_Liar):
    """Its instance dict, read through the attribute, is a lie (set once the module is built)."""

    @property
    def __dict__(self):  # type: ignore[override]
        return {"_buffers": {"mask": torch.ones(1)}, "_parameters": {}, "_modules": {}}


def test_overridden_methods_dict_and_getattr_cannot_claim_structure():
    liar = _Liar()
    liar.__class__ = _LyingDict
    assert liar.__dict__["_buffers"].keys() == {"mask"}  # what an attribute read would believe
    assert "mask" not in structure.named_buffers(liar) and "mask" not in structure.state_dict(liar)
    assert list(structure.named_parameters(liar)) == ["proj.weight", "proj.bias"]
    assert structure.load_state_dict(liar, {"proj.bias": torch.ones(2)}, strict=False)[
        "missing_keys"
    ] == ["proj.weight"]
    assert torch.equal(structure.named_parameters(liar)["proj.bias"].detach(), torch.ones(2))


def test_a_replaced_registry_is_a_student_error_not_an_answer():
    class FakeDict(dict):
        def items(self):
            return [("mask", torch.ones(1))]

    m = nn.Module()
    vars(m)["_buffers"] = FakeDict()
    with pytest.raises(StudentError, match=r"is not nn\.Module's own registry"):
        structure.named_buffers(m)


def test_the_executor_answers_handles_from_the_registries(tmp_path):
    sub = solutions_copy(tmp_path / "sub")
    shutil.copy(
        CORPUS / "hostile" / "structure" / "buffer_claimed_by_override.py",
        sub / "causal_attention.py",
    )
    executor = Executor(sub)
    handle = executor.call("causal_attention", "CausalAttention", (4, 4, 6, 0.0), {})
    assert "mask" not in executor.method(handle.id, "named_buffers", (), {})
    assert "mask" not in executor.method(handle.id, "state_dict", (), {})
    _, _, grads = executor.method(
        handle.id, "grads", (torch.randn(1, 3, 4),), {"grad_output": torch.ones(1, 3, 4)}
    )
    assert sorted(grads) == ["W_key.weight", "W_query.weight", "W_value.weight"]


def _causal_scores(sub: Path) -> tuple[float, list[str]]:
    assignment = manifest.load()
    results, _ = run_suites(
        [assignment.root / "tests/hidden/test_causal_attention.py"],
        student=sub,
        seed=11,
        assignment=assignment,
    )
    return sum(r.points for r in results), [r.name for r in results if r.outcome != "passed"]


@pytest.mark.parametrize(
    "attack", sorted((CORPUS / "hostile" / "structure").glob("*.py")), ids=lambda p: p.stem
)
def test_the_buffer_tricks_lose_exactly_the_mask_point(tmp_path, attack):
    sub = solutions_copy(tmp_path / "sub")
    shutil.copy(attack, sub / "causal_attention.py")
    score, failed = _causal_scores(sub)
    assert failed == [MASK_POINT] and score == 11.0, (score, failed)


def test_the_reference_keeps_the_mask_point(tmp_path):
    assert _causal_scores(solutions_copy(tmp_path / "sub")) == (12.0, [])
