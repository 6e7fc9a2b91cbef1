"""The whole hostile corpus as one class (:mod:`tests.project.support.hostile_class`), batch-graded end to end with
`grader batch .` from inside the class folder, every sandboxed worker forked from this user's zygote.

Every attack earns nothing on what it attacks and costs the correct modules nothing, every honest control keeps
full marks, the gradebook, summary, report and exports are all produced, and each attack's own checks hold on its
scorecard. test_hostile_class_root.py runs the same tests on the same class graded from the repository root with
freshly exec'd workers (a module of its own, so that xdist grades the two batches side by side).
"""

from __future__ import annotations

import csv
import json
import re
from pathlib import Path

import pytest

from grader import schema
from grader.sandbox import choice, isolation, memwatch
from tests.project.support.common import needs_namespace
from tests.project.support.hostile_class import (
    HOSTILE,
    INTEGRITY,
    REFUSED_AT_RUN_TIME,
    Graded,
    attacked_module,
    build,
    caught_as,
    grade_class,
    leftover_sandbox_processes,
    messages,
    scores,
    student_of,
)

pytestmark = [
    pytest.mark.cost(120),
    needs_namespace,
]  # seconds on 2 cores: started early (tests/project/conftest.py)

needs_memory_cgroup = pytest.mark.skipif(
    "namespace" not in choice.available()
    or memwatch.source(isolation.LaunchSpec("namespace").cgroup_paths()) != "cgroup",
    reason="needs the namespace sandbox with a writable memory cgroup (root on Linux)",
)


@pytest.fixture(scope="module")
def graded(tmp_path_factory: pytest.TempPathFactory) -> Graded:
    folder = tmp_path_factory.mktemp("hostile-class") / "class"
    attacked = build(folder)
    return grade_class(
        folder, attacked, cwd=folder, target=".", out=folder.parent / "out", warm="fork"
    )


@pytest.mark.slow
def test_the_whole_class_is_graded_and_every_output_written(graded: Graded) -> None:
    out, cards, done = graded.out, graded.cards, graded.done
    assert done.returncode in (0, 1), done.stderr[
        -3000:
    ]  # 1: intake errors (hostile notebooks) are reported
    assert set(cards) == set(graded.attacked), done.stderr[-3000:]
    for student, module in graded.attacked.items():
        card = cards[student]
        schema.validate("scorecard", card)
        if (
            card["status"] == "error"
        ):  # an intake error (a hostile notebook): nothing graded, nothing earned
            assert module and card["error"]["kind"] == "intake" and card["score"] == 0, (
                student,
                card["error"],
            )
            continue
        record = card["isolation"]
        assert (
            record["backend"] == graded.level
            and record["seccomp"] is True
            and record["attested"] is True
        )
        assert (
            record["uid"] >= 60000
            and record["capabilities"] == "none"
            and record["no_new_privs"] is True
        )
        starts, forks = card["isolation"]["worker_starts"], card["isolation"]["worker_forks"]
        assert starts >= 1 and forks == (starts if graded.forked else 0), (student, starts, forks)
        got = scores(card)
        if not module:
            assert card["score"] == card["max_score"] > 0, (student, got)
            continue
        if (
            student not in REFUSED_AT_RUN_TIME
        ):  # those keep what their honest parts earn: see the test below
            assert got[module][0] == 0, f"{student} earned {got[module]} on {module}"
        assert got["masks"][0] == got["masks"][1] > 0, (
            f"{student} cost the correct masks module points"
        )
    for name in ("gradebook.csv", "summary.json", "report.html"):
        assert (out / name).stat().st_size > 0
    rows = list(csv.reader((out / "gradebook.csv").open(encoding="utf-8")))
    assert not any(cell[:1] in ("=", "+", "-", "@") for row in rows for cell in row)
    assert any((out / "exports" / "gradescope").iterdir()) and any(
        (out / "exports" / "csv").iterdir()
    )
    uids = {c["isolation"]["uid"] for c in cards.values() if c["status"] == "graded"}
    assert not leftover_sandbox_processes(uids, started_before=graded.ended)


@pytest.mark.slow
@pytest.mark.parametrize("attack", HOSTILE, ids=[p.stem for p in HOSTILE])
def test_hostile_module_earns_nothing_and_others_keep_their_points(attack, graded: Graded) -> None:
    card = graded.card(attack.stem)
    got = scores(card)
    assert card["status"] == "graded", card["error"]
    assert card["isolation"]["backend"] == graded.level and card["isolation"]["attested"] is True
    assert got["softmax"][0] == 0, f"{attack.stem} earned {got['softmax']}"
    assert got["masks"][0] == got["masks"][1] > 0, f"{attack.stem} cost the correct module points"
    assert card["score"] == sum(score for score, _ in got.values())


def test_secrets_are_absent_inside_the_sandbox(graded: Graded) -> None:
    text = messages(graded.card("reads_secrets"), "softmax")
    hidden = (
        "FileNotFoundError" if graded.level == "namespace" else "PermissionError"
    )  # absent, or outside Landlock
    assert f"STOLEN files=0 refs=0 frames=0 shadow={hidden}" in text, text


def test_a_worker_sees_the_same_bare_process_whether_forked_or_exec_d(graded: Graded) -> None:
    """Nothing of the zygote leaks into a forked worker: fds, environment, uid, trusted modules, threads."""
    text = messages(graded.card("inspects_its_process"), "softmax")
    # fds: stdin (requests), stdout, stderr and the reply pipe (fd 3 when forked, its runner-side number when exec'd)
    tmpdir = (
        "" if graded.level == "namespace" else "'TMPDIR', "
    )  # its own scratch folder (no private /tmp)
    assert re.search(
        r"PROBE uid=6\d{4} fds=\[0, 1, 2, \d+\] env=\['HOME', 'LANG', 'MALLOC_ARENA_MAX', 'MALLOC_MMAP_THRESHOLD_', "
        r"'MKL_NUM_THREADS', 'OMP_NUM_THREADS', 'PATH', 'PYTHONDONTWRITEBYTECODE', "
        + tmpdir
        + r"'TORCHINDUCTOR_CACHE_DIR', 'USER'\] user=student trusted=\[\] threads=1",
        text,
    ), text


def test_no_daemon_outlives_the_batch_and_nothing_it_wrote_is_left(graded: Graded) -> None:
    """setsid and a double fork leave the runner's process group: the sandbox's end still takes them (the pid
    namespace, or every process of the leased uid), before any scorecard is written; so no marker file exists
    and every scorecard is the grader's own (the daemon rewrites every .json under /tmp it can reach)."""
    uids = {c["isolation"]["uid"] for c in graded.cards.values() if c["status"] == "graded"}
    assert not leftover_sandbox_processes(uids, started_before=graded.ended)
    assert not [
        p
        for folder in ("/tmp", "/dev/shm", "/var/tmp")
        for p in Path(folder).glob("attention-daemon-was-here-*")
    ]
    for path in (graded.out / "scorecards").glob("*.json"):
        schema.validate("scorecard", json.loads(path.read_text()))


def test_no_reference_is_reachable_from_the_sandbox(graded: Graded) -> None:
    """Neither the grader's folder nor `solutions/` is on the worker's path or in its file view."""
    card = graded.card("steals_references")
    assert scores(card)["softmax"][0] == 0 and "NOT-STOLEN" in messages(card, "softmax")


def test_the_grader_s_controls_are_out_of_the_sandbox_s_reach(graded: Graded) -> None:
    """cgroups, /etc/shadow, the grader's cache and any socket path in an argv; signals stay inside the sandbox
    (its own pid namespace, or Landlock's signal scope)."""
    text = messages(graded.card("escapes_its_limits"), "softmax")
    found = re.search(r"ESCAPE cgroup=(\w+) shadow=(\w+) cache=(\w+) argv=(\w+) signal=(\w+)", text)
    assert found and "done" not in found.groups()[:4], text
    assert found.group(5) == ("done" if graded.level == "namespace" else "PermissionError"), text


def test_the_zygote_socket_cannot_be_replaced_from_a_sandbox(graded: Graded) -> None:
    card = graded.card("hijacks_zygote")
    assert scores(card)["softmax"][0] == 0 and "HIJACKED" not in messages(card, "softmax")


def test_network_is_unreachable_inside_the_sandbox(graded: Graded) -> None:
    text = messages(graded.card("network_access"), "softmax")
    assert "NETWORK" in text and "connected" not in text, text


def test_timeouts_and_crashes_are_recorded_as_incidents(graded: Graded) -> None:
    card = graded.card("sleep_forever")
    outcomes = {t["outcome"] for e in card["exercises"] if e["id"] == "softmax" for t in e["tests"]}
    assert outcomes == {"timeout"}
    assert any(i["kind"] == "timeout" for i in card["incidents"])
    assert (
        card["isolation"]["worker_starts"] >= 2
    )  # restarted after the timeout, so masks still ran


@pytest.mark.parametrize("attack", ["forged_frame", "extra_reply"])
def test_a_protocol_violation_fails_the_rest_of_the_exercise_and_is_reported(
    graded: Graded, attack: str
) -> None:
    """Both modules have a correct `softmax_stable`: it must not keep its points after the violation."""
    card = graded.card(attack)
    assert scores(card)["softmax"][0] == 0 and scores(card)["masks"] == (8.0, 8.0)
    assert [i["kind"] for i in card["incidents"]] == ["protocol"]
    assert "broke the protocol earlier in this exercise" in messages(card, "softmax")


def test_forged_grader_labels_are_shown_as_the_students_own_exceptions(graded: Graded) -> None:
    card = graded.card("forged_labels")
    tests = [t for e in card["exercises"] if e["id"] == "softmax" for t in e["tests"]]
    assert {t["outcome"] for t in tests} == {"failed"} and card["incidents"] == []
    assert all(t["message"].startswith("your code raised an exception named ") for t in tests)
    assert (
        card["isolation"]["worker_starts"] == 1
    )  # no worker was stopped: nothing timed out or crashed


def test_a_flood_of_output_is_capped_and_never_reaches_the_scorecard(graded: Graded) -> None:
    card = graded.card("stdout_flood")
    assert any(i["kind"] == "output" for i in card["incidents"])
    assert "AAAA" not in str(card)


def test_missing_module_is_a_clear_not_found(graded: Graded) -> None:
    card = graded.card("")
    assert scores(card)["softmax"][0] == 0 and scores(card)["masks"][0] > 0
    assert "softmax.py not found" in messages(card, "softmax")


@needs_memory_cgroup
@pytest.mark.parametrize("trick", INTEGRITY, ids=[p.stem for p in INTEGRITY])
def test_each_integrity_trick_earns_nothing_and_is_reported(graded: Graded, trick) -> None:
    """The red team's tricks against the bans and the memory measurement. Caught as the attack's docstring says:
    withheld (proof), or a review finding on its line while the runtime ban refuses what it reached (its tests fail
    with the ban's message: the trick earns nothing, the exercise keeps what its honest parts earn)."""
    exercise, card = attacked_module(trick), graded.cards[student_of(trick)]
    assert card["status"] == "graded" and card["isolation"]["memory_figure"] == "cgroup", card[
        "error"
    ]
    by_id = {e["id"]: e for e in card["exercises"]}
    if caught_as(trick) == "withhold":
        assert by_id[exercise]["score"] == 0 and by_id[exercise]["withheld"].startswith(
            "integrity finding: "
        )
        assert all(t["points"] == 0 for t in by_id[exercise]["tests"])
    else:
        failed = [t for t in by_id[exercise]["tests"] if t["outcome"] != "passed" and t["counted"]]
        assert "withheld" not in by_id[exercise] and failed, by_id[exercise]
        assert all("is not allowed in this exercise" in t["message"] for t in failed), [
            t["message"] for t in failed
        ]
        assert any(f["severity"] == "review" and f["line"] > 0 for f in card["integrity"]), card[
            "integrity"
        ]
    assert all(
        e["score"] == e["max_score"] > 0 and "withheld" not in e
        for i, e in by_id.items()
        if i != exercise
    )
    assert card["integrity"] and {f["file"] for f in card["integrity"]} == {f"{exercise}.py"}


MEMORY_TEST = "test_flash_never_materialises_the_score_matrix"


@needs_memory_cgroup
def test_the_outside_memory_figure_fails_a_full_matrix_hidden_from_the_dispatch_mode(
    graded: Graded,
) -> None:
    """Even without the scan's verdict, the memory test itself fails: the cgroup saw the L x S matrix; an honest
    flash attention passes the same test."""
    tricked = graded.cards["integrity-disables_dispatch_mode"]
    (test,) = [t for e in tricked["exercises"] for t in e["tests"] if t["name"] == MEMORY_TEST]
    assert test["outcome"] == "failed" and "the sandbox's memory grew by" in test["message"], test
    (test,) = [
        t
        for e in graded.cards["honest-one"]["exercises"]
        for t in e["tests"]
        if t["name"] == MEMORY_TEST
    ]
    assert test["outcome"] == "passed", test["message"]
