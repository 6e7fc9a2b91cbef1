"""The report's "Common mistakes" and students table (issue 28.10).

- One mistake is one row: grouped by the misconception a test diagnosed where its message names one (a
  ``diagnosis [id]:`` tag), else by the test without its parameters and the message's first line with numbers
  masked; the hint is shown in full. On 4ad1d57 300 students making one mistake on varied inputs gave up to 15 rows of raw
  assertion text (one per distinct message), the hint cut off at 240 characters and never shown on its own.
- Each student's failing count tells "tried and failed" apart from "not submitted".
- Sorting works from the keyboard: a real Tab and Enter in headless Chromium sort the students table.
"""

from __future__ import annotations

import html as html_text
import os
import re
from pathlib import Path

import pytest

from grader import schema
from grader.course import manifest
from grader.exports import report, students
from grader.exports.summary import summarize
from grader.scoring import scorecard
from tests.project.support import cdp

pytestmark = pytest.mark.cost(10)

HINT = (
    "subtract each row's maximum before exp: softmax(x) = softmax(x - max(x)); "
    + "a long explanation " * 20
)


def _test(name: str, message: str, outcome: str = "failed", **extra: object) -> dict:
    return {
        "id": f"tests/hidden/test_softmax.py::{name}",
        "name": name,
        "outcome": outcome,
        "points": 0,
        "max_points": 1,
        "message": message,
        "duration": 0.1,
        "cuda": False,
        "counted": True,
        **extra,
    }


def _card(student: str, tests: list[dict], score: float = 0.0) -> dict:
    card = scorecard.new(
        assignment="attention-basics",
        max_score=6,
        path=student,
        student=student,
        isolation=scorecard.inprocess_isolation(),
        seed=1,
    )
    card["exercises"] = [
        {"id": "softmax", "title": "Softmax", "score": score, "max_score": 6, "tests": tests}
    ]
    card["score"] = score
    return scorecard.finished(card, seconds=0.5)


def _overflow(i: int) -> dict:
    """The same mistake on inputs that differ from student to student (parameters, sizes, values)."""
    return _test(
        f"test_large_inputs_do_not_overflow[{i % 7}-{3 + i % 5}]",
        f"softmax_stable({i % 4 + 2}x{i % 9 + 3}): got inf at [{i % 3}, {i % 11}] ({1e4 + i:.3g}), "
        f"expected finite values\n  hint: {HINT}",
    )


def test_three_hundred_students_with_one_mistake_make_one_row_with_its_hint_in_full():
    named = [(f"s{i:03d}", _card(f"s{i:03d}", [_overflow(i)])) for i in range(300)]
    rows = students.common_mistakes(named)
    assert len(rows) == 1, [r["message"] for r in rows]
    [row] = rows
    assert row["count"] == 300 and row["tests"] == 300 and row["hint"] == HINT.strip()
    assert (
        row["test"] == "softmax::test_large_inputs_do_not_overflow" and "hint" not in row["message"]
    )
    assert row["message"].startswith("softmax_stable(#x#): got inf at [#, #]")


def test_a_diagnosis_is_named_in_the_message_never_in_a_field_of_the_test():
    """The scorecard's test entry has no ``diagnosis`` field (the suites tag the message: grader.testing.diagnosis),
    so the schema refuses a card with one; grader.gradetext.diagnosed reads only the tag."""
    card = _card("a", [_test("test_rows_sum_to_one", "rows sum to 3.2", diagnosis="sums-dim0")])
    with pytest.raises(schema.SchemaError, match=r"Additional properties.*'diagnosis'"):
        schema.validate("scorecard", card)


def test_a_diagnosis_tag_in_the_message_is_the_group_and_its_text_the_hint():
    """The suites name a misconception in the message (``diagnosis [id]: ...``, grader.testing.diagnosis.TAG): two
    tests and two wordings of one diagnosed mistake make one row; an untagged failure of the same test its own."""
    tagged = [
        _test(
            "test_rows_sum_to_one",
            "rows sum to 3.2, expected 1\n  diagnosis [softmax-wrong-dim]: your "
            "output equals softmax over dim 0",
        ),
        _test(
            "test_matches_torch",
            "max error 0.41 at [2, 1]\n  diagnosis [softmax-wrong-dim]: your output "
            "equals softmax over dim 0\n(severe: this failure caps the exercise at 50% of its points)",
        ),
    ]
    named = [
        ("a", _card("a", [tagged[0]])),
        ("b", _card("b", [tagged[1]])),
        ("c", _card("c", [_test("test_matches_torch", "max error 0.41 at [2, 1]")])),
    ]
    for _, card in named:
        schema.validate("scorecard", card)
    rows = students.common_mistakes(named)
    by = {r.get("diagnosis", "-"): r for r in rows}
    assert set(by) == {"softmax-wrong-dim", "-"} and by["softmax-wrong-dim"]["students"] == [
        "a",
        "b",
    ]
    assert by["softmax-wrong-dim"]["hint"] == "your output equals softmax over dim 0"
    assert by["-"]["students"] == ["c"] and by["-"]["hint"] == ""


def test_each_student_counts_tried_and_failed_apart_from_not_submitted():
    stub = "NotImplementedError: softmax.softmax_naive is not implemented yet (TODO: implement it)"
    card = _card(
        "d",
        [_overflow(1), _test("test_a", stub), _test("test_b", stub), _test("test_c", "", "passed")],
    )
    row = students.row("d", card, ["softmax"], None)
    assert (row["failed_tests"], row["tried_failed"], row["not_submitted"]) == (3, 1, 2)


def _summary(tmp_path: Path) -> dict:
    spec = manifest.load()
    named = [
        (f"s{i}", _card(f"s{i}", [_overflow(i)] if i % 2 else [], score=float(i))) for i in range(6)
    ]
    summary = summarize(
        named,
        assignment=spec,
        backend="inprocess",
        slots=1,
        wall_s=1.0,
        skipped=0,
        timing={},
        exercise_ids=["softmax"],
    )
    schema.validate("summary", summary)
    return summary


def test_the_report_shows_the_mistake_the_hint_and_both_counts(tmp_path):
    html = report.render(_summary(tmp_path))
    mistakes = html[
        html.index('id="failures"') : html.index("</table>", html.index('id="failures"'))
    ]
    assert mistakes.count("<tr>") == 2 and HINT.strip() in html_text.unescape(
        mistakes
    )  # the heading, one mistake
    assert "softmax::test_large_inputs_do_not_overflow" in mistakes
    headers = re.findall(
        r"<th(?: [^>]*)?>(.*?)</th>", html[html.index('id="students"') : html.index("</thead>")]
    )
    assert all(h.startswith('<button type="button">') for h in headers), headers
    assert any("tried, failed" in h for h in headers) and any("not submitted" in h for h in headers)


@pytest.mark.skipif(
    not os.access(cdp.CHROMIUM, os.X_OK),
    reason="Debian's chromium is not installed (apt-get "
    "install chromium; .ci/run installs it): keyboard sorting not verified",
)
def test_tab_and_enter_sort_the_students_table(tmp_path):
    page = tmp_path / "report.html"
    page.write_text(report.render(_summary(tmp_path)), "utf-8")
    order = "Array.from(document.querySelectorAll('#students tbody tr')).map(r => r.id).join(',')"
    with cdp.Browser(tmp_path / "profile") as browser:
        browser.open(page.as_uri())
        before = browser.evaluate(order)
        for _ in range(40):  # Tab through the page, as a keyboard user does, to the "total" heading
            browser.press("Tab")
            if (
                browser.evaluate(
                    "document.activeElement.closest('th') && "
                    "document.activeElement.closest('th').dataset.col"
                )
                == "total"
            ):
                break
        else:
            pytest.fail("no column heading of the students table takes the keyboard focus")
        sort = "document.querySelector('th[data-col=total]').getAttribute('aria-sort')"
        browser.press("Enter")
        ascending, first = browser.evaluate(order), browser.evaluate(sort)
        browser.press("Enter")
        descending, second = browser.evaluate(order), browser.evaluate(sort)
    assert (first, second) == ("ascending", "descending")
    assert ascending == ",".join(f"student-s{i}" for i in range(6)), (before, ascending)
    assert descending == ",".join(f"student-s{i}" for i in range(5, -1, -1)), descending
