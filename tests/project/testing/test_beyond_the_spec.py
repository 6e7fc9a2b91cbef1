"""Inputs beyond what a docstring promises to take: a student's own refusal is no mistake, a wrong answer is
(:func:`grader.testing.checks.unless_refused`)."""

from __future__ import annotations

import textwrap

import pytest
import torch

from grader.protocol.errors import StudentError
from grader.student.inprocess import InProcessBackend
from grader.student.proxy import StudentProxy
from grader.testing.checks import unless_refused

CODE = """
import torch

def strict(scores):
    if scores.dim() not in (2, 3):
        raise ValueError(f"scores must be (T, T) or (B, T, T), got {tuple(scores.shape)}")
    return torch.softmax(scores, dim=-1)

def asserts(scores):
    assert scores.dim() <= 3, "at most 3-D"
    return torch.softmax(scores, dim=-1)

def crashes(scores):
    return scores.view(-1, scores.shape[-1] + 1)  # a RuntimeError: no refusal

def answers(scores):
    return torch.softmax(scores, dim=2)  # right for (B, T, T), wrong for 4-D
"""


@pytest.fixture
def student(tmp_path):
    (tmp_path / "m.py").write_text(textwrap.dedent(CODE))
    return StudentProxy(InProcessBackend(tmp_path))


def test_a_refusal_of_the_students_own_is_no_mistake(student):
    scores = torch.randn(2, 2, 5, 5)
    assert unless_refused(lambda: student.m.strict(scores)) == (True, None)
    assert unless_refused(lambda: student.m.asserts(scores)) == (True, None)


def test_a_crash_is_no_refusal_and_an_answer_is_judged(student):
    scores = torch.randn(2, 2, 5, 5)
    with pytest.raises(StudentError, match="shape"):
        unless_refused(lambda: student.m.crashes(scores))
    refused, got = unless_refused(lambda: student.m.answers(scores))
    assert not refused
    assert not torch.allclose(got, torch.softmax(scores, dim=-1))  # the test that follows fails it
