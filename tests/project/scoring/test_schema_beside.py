"""The schema checks of one command made in a forked copy of it (grader/schema_beside.py): the copy
answers what this process would have answered, a copy that cannot answer leaves the checks to this
process, a process forked from the command never talks to the copy, and it ends with the command.

Each case runs in a fresh interpreter: the copy is forked only from a single-threaded process, and
pytest-xdist's workers run threads.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from grader import schema, schema_beside

ROOT = Path(__file__).resolve().parents[3]

# every verdict of the copy against this process's, on the documents a `grader grade` checks (the
# manifest, a proof-like and a scorecard-like document), valid and broken; jsonschema never imported
# here while the copy answers
VERDICTS = r"""
from grader import schema
def verdicts(docs):
    answers = []
    for kind, doc in docs:
        try:
            schema.validate(kind, doc)
            answers.append(None)
        except schema.SchemaError as exc:
            answers.append([type(exc).__name__, str(exc)])
    return answers
"""
SIDE_BY_SIDE = (
    VERDICTS
    + r"""
import json, os, sys
from pathlib import Path
from grader import schema, schema_beside
docs = json.loads(sys.argv[1])
beside = schema_beside.start()
assert beside is not None and schema.elsewhere is beside
answers = verdicts(docs)
assert schema.elsewhere is beside, "the copy stopped answering"
imported_here = "jsonschema" in sys.modules
schema_beside.stop()
try:
    os.waitpid(beside.pid, 0)
    reaped = False
except ChildProcessError:
    reaped = True
print(json.dumps({"answers": answers, "imported_here": imported_here, "reaped": reaped}))
"""
)


def _documents() -> list[tuple[str, object]]:
    manifest = json.loads((ROOT / "assignments.json").read_text())
    broken = json.loads(json.dumps(manifest))
    broken["assignments"][0]["exercises"][0]["points"] = "ten"
    return [
        ("assignments", manifest),
        ("assignments", broken),
        ("assignments", {**manifest, "schema_version": 99}),  # decided here: the version check
        ("scorecard", {"schema_version": 3}),
        ("proof", {"schema_version": 1, "key": 5}),
        ("assignments", [1, 2]),
    ]


def _in_process(docs: list[tuple[str, object]]) -> list[list[str] | None]:
    found: dict[str, Any] = {}
    exec(VERDICTS, found)  # the same code the fresh interpreter runs, here without a copy
    verdicts: list[list[str] | None] = found["verdicts"](docs)
    return verdicts


def _fresh(script: str, *args: str) -> dict:
    done = subprocess.run(
        [sys.executable, "-I", "-c", script, *args],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_the_copy_answers_as_this_process_and_ends_with_the_command():
    if len(os.sched_getaffinity(0)) < 2:
        pytest.skip("the copy is made only where a spare core runs it")
    docs = _documents()
    seen = _fresh(SIDE_BY_SIDE, json.dumps(docs))
    expected = _in_process(docs)
    assert seen["answers"] == expected
    assert expected[0] is None and all(answer is not None for answer in expected[1:])
    assert expected[2][0] == "SchemaVersionError"
    assert not seen["imported_here"]  # every check was made in the copy
    assert seen["reaped"]  # stop() left no zombie


# a copy that dies, and one that answers nonsense: the check is made here, the same verdict
FAILING = r"""
import json, os, signal, sys
from grader import schema, schema_beside
manifest = json.loads(open("assignments.json").read())
out = {}
beside = schema_beside.start()
os.kill(beside.pid, signal.SIGKILL)
schema.validate("assignments", manifest)
try:
    schema.validate("assignments", {**manifest, "assignments": "none"})
except schema.SchemaError as exc:
    out["dead"] = str(exc)
out["dropped"] = schema.elsewhere is None
schema_beside.stop()
beside = schema_beside.start()
read, write = os.pipe()
os.write(write, (7).to_bytes(4, "little") + b'"valid"')
beside._answers = read  # the copy's answer replaced by a malformed one
try:
    schema.validate("assignments", {**manifest, "assignments": "none"})
except schema.SchemaError as exc:
    out["malformed"] = str(exc)
out["dropped_again"] = schema.elsewhere is None
print(json.dumps(out))
"""


def test_a_copy_that_cannot_answer_leaves_the_check_to_this_process():
    if len(os.sched_getaffinity(0)) < 2:
        pytest.skip("the copy is made only where a spare core runs it")
    manifest = json.loads((ROOT / "assignments.json").read_text())
    [expected] = _in_process([("assignments", {**manifest, "assignments": "none"})])
    assert expected is not None
    seen = _fresh(FAILING)
    assert seen == {
        "dead": expected[1],
        "dropped": True,
        "malformed": expected[1],
        "dropped_again": True,
    }


# a process forked from the command (the review's copy, the canary's) forgets the copy: its own
# checks are made in itself, never on the command's pipes
FORKED_LATER = r"""
import json, os, sys
from grader import schema, schema_beside
beside = schema_beside.start()
read, write = os.pipe()
pid = os.fork()
if pid == 0:
    os.write(write, b"1" if schema.elsewhere is None else b"0")
    os._exit(0)
os.waitpid(pid, 0)
forgot = os.read(read, 1) == b"1"
manifest = json.loads(open("assignments.json").read())
schema.validate("assignments", manifest)  # the command's own copy still answers
print(json.dumps({"forgot": forgot, "still": schema.elsewhere is beside}))
schema_beside.stop()
"""


def test_a_process_forked_later_forgets_the_copy():
    if len(os.sched_getaffinity(0)) < 2:
        pytest.skip("the copy is made only where a spare core runs it")
    assert _fresh(FORKED_LATER) == {"forgot": True, "still": True}


def test_no_copy_is_forked_from_a_process_running_threads():
    stop = threading.Event()
    thread = threading.Thread(target=stop.wait)
    thread.start()
    try:
        assert schema_beside.start() is None and schema.elsewhere is None
    finally:
        stop.set()
        thread.join()


FAST = ("--no-canary", "--isolation", "none", "--out")


def test_grader_grade_checks_its_scorecard_in_the_copy_and_leaves_no_process(tmp_path):
    """End to end: the command's scorecard is checked, and no copy outlives the command."""
    out = tmp_path / "card.json"
    done = subprocess.run(
        [sys.executable, "-I", "-m", "grader", "grade", str(ROOT / "solutions"), *FAST, str(out)],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    card = json.loads(out.read_text())
    assert card["status"] == "graded" and card["score"] == card["max_score"]
    left = subprocess.run(
        ["pgrep", "-f", f"grade {ROOT / 'solutions'} --no-canary --isolation none --out {out}"],
        capture_output=True,
        text=True,
    )
    assert left.stdout.strip() == ""  # neither the command nor its copy is left


def test_stop_without_a_copy_is_nothing():
    assert schema.elsewhere is None
    schema_beside.stop()
    assert schema.elsewhere is None


def test_a_stuck_copy_is_killed_by_close():
    """close() never waits for the copy to finish a request: it is killed and reaped."""
    pid = os.fork()
    if pid == 0:  # pragma: no cover - a stand-in for a copy stuck in a request
        signal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGTERM])
        os.execv("/bin/sleep", ["sleep", "60"])
    ask_r, ask_w = os.pipe()
    answer_r, answer_w = os.pipe()
    schema_beside.Beside(pid, ask_w, answer_r).close()
    with pytest.raises(ChildProcessError):
        os.waitpid(pid, 0)
    for fd in (ask_r, answer_w):
        os.close(fd)


# Ctrl-C while the command line is built (the copy is forked first): an interruption (exit 130),
# and the copy is ended and reaped on the way out
INTERRUPTED = r"""
import json, os
from grader import schema
from grader.cli import main as cli
started = []
import grader.schema_beside as beside_module
original = beside_module.start
def start():
    started.append(original())
    return started[-1]
beside_module.start = start
def interrupted():
    raise KeyboardInterrupt
cli.build_parser = interrupted
code = cli.main(["grade", "solutions"])
try:
    os.waitpid(started[0].pid, 0)
    reaped = False
except ChildProcessError:
    reaped = True
print(json.dumps({"code": int(code), "started": started[0] is not None, "reaped": reaped,
                  "forgotten": schema.elsewhere is None}))
"""


def test_ctrl_c_while_the_command_line_is_built_ends_the_copy():
    if len(os.sched_getaffinity(0)) < 2:
        pytest.skip("the copy is made only where a spare core runs it")
    assert _fresh(INTERRUPTED) == {"code": 130, "started": True, "reaped": True, "forgotten": True}
