"""student.isolated: the module graded with the grader's stand-ins for the exercise classes it builds on."""

from __future__ import annotations

from pathlib import Path

import torch

from grader.inside.executor import Executor
from grader.inside.standins import StandInCausalAttention
from tests.project.support.common import ROOT

WRAPPER_ARGS = (4, 3, 6, 0.0)


def _submission(tmp_path: Path, causal_source: str, multihead_source: str | None = None) -> Path:
    sub = tmp_path / "sub"
    sub.mkdir()
    (sub / "causal_attention.py").write_text(causal_source)
    source = multihead_source or (ROOT / "solutions" / "multihead_attention.py").read_text()
    (sub / "multihead_attention.py").write_text(source)
    return sub


def _head_types(executor: Executor) -> set[str]:
    handle = executor.call(
        "multihead_attention:isolated", "MultiHeadAttentionWrapper", WRAPPER_ARGS, {"num_heads": 2}
    )
    executor.method(handle.id, "forward", (torch.randn(2, 5, 4),), {})
    wrapper = executor.handles[handle.id][0]
    return {type(head).__name__ for head in wrapper.heads}


def test_the_heads_are_stand_ins_even_when_the_students_causal_attention_does_not_import(tmp_path):
    executor = Executor(_submission(tmp_path, "class CausalAttention(:\n"))
    assert _head_types(executor) == {StandInCausalAttention.__name__}


def test_a_helper_the_wrapper_imports_from_the_sibling_module_still_imports(tmp_path):
    causal = (
        ROOT / "solutions" / "causal_attention.py"
    ).read_text() + "\n\ndef heads_of(n):\n    return n\n"
    multihead = (
        (ROOT / "solutions" / "multihead_attention.py")
        .read_text()
        .replace(
            "from .causal_attention import CausalAttention",
            "from .causal_attention import CausalAttention, heads_of",
        )
    )
    assert "heads_of" in multihead
    executor = Executor(_submission(tmp_path, causal, multihead))
    assert _head_types(executor) == {StandInCausalAttention.__name__}


def test_the_plain_module_keeps_the_students_own_heads(tmp_path):
    sub = _submission(tmp_path, (ROOT / "solutions" / "causal_attention.py").read_text())
    executor = Executor(sub)
    handle = executor.call(
        "multihead_attention", "MultiHeadAttentionWrapper", WRAPPER_ARGS, {"num_heads": 2}
    )
    assert {type(h).__name__ for h in executor.handles[handle.id][0].heads} == {"CausalAttention"}


def test_a_one_file_submission_gets_the_stand_ins_too(tmp_path):
    sub = tmp_path / "one"
    sub.mkdir()
    body = (
        (ROOT / "solutions" / "causal_attention.py").read_text()
        + "\n"
        + (ROOT / "solutions" / "multihead_attention.py")
        .read_text()
        .replace("from .causal_attention import CausalAttention\n", "")
        .replace("from __future__ import annotations\n", "")
    )
    (sub / "all.py").write_text(body)
    executor = Executor(sub, single_module="all")
    assert _head_types(executor) == {StandInCausalAttention.__name__}
