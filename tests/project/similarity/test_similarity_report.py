"""Same wrong answers (grader.similarity.answers, grader.scoring.answers) and the evidence in summary and report.

Scorecards are fabricated (tests.project.exports.test_outputs_hostile.card) with known digests; the digest itself is checked
against values computed two equivalent ways and one different way; the batch's finish step runs on real class
folders (no grading) with ``similarity=True``, and its summary is validated against the schema.
"""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path
from typing import Any

import torch

from grader import schema
from grader.batch import job
from grader.batch.engine import Options, Result, Run
from grader.cli.main import main
from grader.exports import outputs
from grader.intake.classfolder import Entry
from grader.scoring import answers as digests
from grader.similarity import answers
from grader.similarity import summary as evidence
from tests.project.exports.test_outputs_hostile import card
from tests.project.similarity.test_similarity import disguised, folder, reference
from tests.project.support.common import ROOT, shelve

TEST = "tests/hidden/test_masks.py::test_causal[{}]"


def wrong(student: str, answers_by_test: dict[int, str], *, seed: int = 7) -> dict[str, Any]:
    """A graded card whose masks tests ``n`` failed with digest ``answers_by_test[n]``."""
    c = card(student, sha="a" * 64)
    c["seed"] = seed
    base = c["exercises"][0]["tests"][0]
    c["exercises"][0]["tests"] = [
        {**copy.deepcopy(base), "id": TEST.format(n), "wrong_answer": d}
        for n, d in answers_by_test.items()
    ]
    return c


def test_same_wrong_answers_group_and_common_mistakes_are_left_out():
    shared = {1: "1" * 16, 2: "2" * 16, 3: "3" * 16}
    common = {4: "4" * 16}
    named = [
        ("ann", wrong("ann", {**shared, **common})),
        ("ben", wrong("ben", {**shared, **common})),
    ]
    named += [
        (f"c{i}", wrong(f"c{i}", common)) for i in range(3)
    ]  # five students give answer 4: common
    named += [("dan", wrong("dan", {1: "1" * 16}))]  # with ann and ben on test 1 only
    named += [
        ("eve", wrong("eve", shared, seed=8))
    ]  # same values, another seed: other inputs, never compared
    found, left_out = answers.groups(named)
    assert left_out == 1
    assert found == [
        {
            "students": ["ann", "ben"],
            "seed": 7,
            "tests": [TEST.format(2), TEST.format(3)],
            "digests": ["2" * 16, "3" * 16],
        }
    ]
    assert answers.groups(named, few=5) == (
        found,
        0,
    )  # answer 4 now counts, but five students share only that one
    for _, c in named[:2]:  # a misconception the feedback names (a diagnosis tag) is never evidence
        test = c["exercises"][0]["tests"][1]
        test["message"] += "\n  diagnosis [scale-by-d-out]: your output is scaled by 1/d_out"
        schema.validate(
            "scorecard", c
        )  # the tag is in the message: the test entry has no such field
    found, left_out = answers.groups(named)
    assert (found, left_out) == ([], 2)  # ann and ben now share test 3 only: under min_tests


def test_the_digest_survives_equivalent_calls_and_tells_formulas_apart():
    g = torch.Generator().manual_seed(0)
    q, k = torch.randn(2, 5, 8, generator=g), torch.randn(2, 5, 8, generator=g)
    a = torch.softmax(q @ k.transpose(1, 2) / 8**0.5, dim=-1)
    b = torch.exp(
        torch.log_softmax(torch.matmul(q, k.mT) * 8**-0.5, -1)
    )  # same values, other calls
    c = torch.softmax(q @ k.transpose(1, 2) / 8, dim=-1)  # the wrong scale: other values
    assert digests.encode(a) == digests.encode(b) != digests.encode(c)
    assert digests.encode((a, None)) != digests.encode((a, 1))


def test_masks_and_non_finite_values_are_digested_exactly_without_numpy():
    # NumPy is not a dependency: Tensor.numpy() raised in the trusted runner, and every masks test of the
    # reference failed with "Numpy is not available" (found by grading the reference under process)
    causal = torch.ones(4, 4, dtype=torch.bool).tril()
    assert digests.encode(causal) == digests.encode(causal.clone()) != digests.encode(causal.T)
    assert digests.encode(torch.arange(6)) != digests.encode(torch.arange(6).flip(0))
    nan_first, nan_last = (
        torch.tensor([float("nan"), 1.0, 2.0]),
        torch.tensor([1.0, 2.0, float("nan")]),
    )
    assert digests.encode(nan_first) != digests.encode(nan_last)


def finish(
    tmp_path: Path, klass: dict[str, Path], cards: dict[str, dict[str, Any]]
) -> dict[str, Any]:
    results = [Result(Entry(k, k, p, "folder"), cards[k]) for k, p in klass.items()]
    shelve(tmp_path / "out", list(cards.items()))
    outcome = job.finish(
        Run(results, "namespace", 1, 2.0),
        out=tmp_path / "out",
        options=Options(exercises=["masks"]),
        similarity=True,
    )
    schema.validate("summary", outcome.summary)
    return outcome.summary


def test_batch_summary_and_report_show_pairs_groups_and_the_note_escaped(tmp_path):
    payload = "</pre><script>alert(1)</script>"
    hostile = re.sub(
        r"(\n\s+)(return )", r"\1tag = '" + payload + r"'\1\2", reference("masks"), count=1
    )
    klass = dict(
        [
            folder(tmp_path / "class", "a<b>", {"masks": hostile}),
            folder(tmp_path / "class", "copy", {"masks": disguised(hostile)}),
            ("stub", ROOT / "exercises"),
        ]
    )
    digest = {1: "1" * 16, 2: "2" * 16}
    cards = {"a<b>": wrong("a<b>", digest), "copy": wrong("copy", digest), "stub": card("stub")}
    s = finish(tmp_path, klass, cards)["similarity"]
    assert [(p["exercise"], p["a"], p["b"]) for p in s["pairs"]] == [("masks", "a<b>", "copy")]
    assert s["same_wrong_answers"][0]["students"] == ["a<b>", "copy"] and s["note"] == evidence.NOTE
    html = (tmp_path / "out" / "report.html").read_text("utf-8")
    assert "<script>alert" not in html and "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert "a&lt;b&gt; ~ copy" in html and "never an automatic penalty" in html
    assert html.count('<table class="fragment">') == len(s["pairs"][0]["fragments"]) >= 1


def test_grader_similarity_reads_a_batch_folder_and_rewrites_its_report(tmp_path, capsys):
    klass = dict(
        [
            folder(tmp_path / "class", "x", {"masks": reference("masks")}),
            folder(tmp_path / "class", "y", {"masks": disguised(reference("masks"))}),
        ]
    )
    digest = {1: "1" * 16, 2: "2" * 16}
    cards = {"x": wrong("x", digest), "y": wrong("y", digest)}
    results = [Result(Entry(k, k, p, "folder"), cards[k]) for k, p in klass.items()]
    shelve(tmp_path / "out", list(cards.items()))
    job.finish(
        Run(results, "namespace", 1, 2.0),
        out=tmp_path / "out",
        options=Options(exercises=["masks"]),
    )
    for key, c in cards.items():
        outputs.write_text(tmp_path / "out" / "scorecards" / f"{key}.json", json.dumps(c))
    assert "similarity" not in json.loads((tmp_path / "out" / "summary.json").read_text())
    assert (
        main(
            [
                "similarity",
                str(tmp_path / "out"),
                "--class",
                str(tmp_path / "class"),
                "--exercise",
                "masks",
            ]
        )
        == 0
    )
    printed = capsys.readouterr().out
    assert "masks: x ~ y" in printed and "x, y: 2 test(s) failed with the same values" in printed
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    schema.validate("summary", summary)
    assert summary["similarity"]["pairs"][0]["share"] >= 0.9
    assert 'id="similar-pairs"' in (tmp_path / "out" / "report.html").read_text()
    assert (
        main(["similarity", str(tmp_path / "class"), "--json", "--exercise", "masks"]) == 0
    )  # code only
    assert json.loads(capsys.readouterr().out)["same_wrong_answers"] == []
