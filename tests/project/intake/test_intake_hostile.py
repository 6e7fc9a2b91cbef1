"""Intake against hostile submissions, by class: links and special files, odd inputs, archive bombs, names.

Every case must end in a :class:`Submission` or an :class:`IntakeError` (which becomes an intake-error
scorecard), never in another exception, a hang or gigabytes of memory. Links, FIFOs, sockets and
devices cannot live in git, so they are built here in ``tmp_path``; hostile notebooks a student
could send are in ``tests/corpus/hostile/intake/``.
"""

from __future__ import annotations

import gzip
import io
import json
import os
import random
import socket
import stat
import tarfile
from pathlib import Path

import pytest

from grader.intake import submission as intake
from grader.intake.submission import IntakeError, Submission
from tests.project.support.common import CORPUS, ROOT
from tests.project.support.hostile_inputs import MODULES, mutants, outcome, solution, tgz_of, zip_of

NOTEBOOKS = sorted((CORPUS / "hostile" / "intake").glob("*.ipynb"))


# --- 1. links, FIFOs, sockets and devices, anywhere ---------------------------------------------


def _fifo(path: Path) -> None:
    os.mkfifo(path)


def _socket(path: Path) -> None:
    sock = socket.socket(socket.AF_UNIX)
    sock.bind(str(path))
    sock.close()


def _device(path: Path) -> None:
    os.mknod(path, stat.S_IFCHR | 0o600, os.makedev(1, 3))  # /dev/null's numbers


def _build(case: str, tmp: Path) -> tuple[Path, str]:
    """A hostile submission and the name its error must show."""
    alice = solution(tmp / "alice" / "exercises")
    sub = tmp / "mallory"
    sub.mkdir()
    if case == "exercises -> /proc/self/cwd/solutions":
        (sub / "exercises").symlink_to("/proc/self/cwd/solutions")
        return sub, "exercises"
    if case == "exercises -> ../alice/exercises":
        (sub / "exercises").symlink_to(alice)
        return sub, "exercises"
    if case == "module is a link":
        (sub / "softmax.py").symlink_to(alice / "softmax.py")
        return sub, "softmax.py"
    if case == "dangling link":
        solution(sub)
        (sub / "masks.py").symlink_to(tmp / "nowhere.py")
        return sub, "masks.py"
    if case == "link deep inside":
        solution(sub)
        (sub / "docs" / "notes").mkdir(parents=True)
        (sub / "docs" / "notes" / "etc").symlink_to("/etc")
        return sub, "docs/notes/etc"
    if case == "submission folder is a link":
        (tmp / "bob").symlink_to(alice.parent)
        return tmp / "bob", "bob"
    if case == "single file is a link":
        (tmp / "bob.py").symlink_to(ROOT / "solutions" / "softmax.py")
        return tmp / "bob.py", "bob.py"
    maker = {"fifo": _fifo, "socket": _socket, "device": _device}[case.split()[0]]
    if case.endswith("named x.zip"):
        maker(tmp / "x.zip")
        return tmp / "x.zip", "x.zip"
    solution(sub / "exercises")
    maker(sub / "exercises" / "masks.py")
    return sub, "masks.py"


LINK_CASES = [
    "exercises -> /proc/self/cwd/solutions",
    "exercises -> ../alice/exercises",
    "module is a link",
    "dangling link",
    "link deep inside",
    "submission folder is a link",
    "single file is a link",
    "fifo named x.zip",
    "fifo in the exercises folder",
    "socket in the exercises folder",
    "device named x.zip",
    "device in the exercises folder",
]


@pytest.mark.parametrize("case", LINK_CASES)
def test_links_fifos_sockets_and_devices_are_refused_by_name_and_never_opened(
    tmp_path, case, monkeypatch
):
    monkeypatch.chdir(
        ROOT
    )  # /proc/self/cwd/solutions: the instructor's solutions, once graded 100/100
    try:
        path, shown = _build(case, tmp_path)
    except PermissionError:
        pytest.skip("this machine does not let us make a device node")
    result = outcome(path)
    assert isinstance(result, IntakeError), f"{case}: intake took it ({result})"
    assert shown in str(result) and "is a" in str(result) and "regular files" in str(result), str(
        result
    )


# --- 2. every failure is an IntakeError: hostile notebooks, odd inputs, mutated archives ----------


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_hostile_notebooks_are_intake_errors(tmp_path, notebook):
    result = outcome(notebook)
    assert isinstance(result, IntakeError), result
    assert notebook.name in str(result) and ("notebook" in str(result) or "cell" in str(result))


def _cell(source: object) -> dict:
    return {"cell_type": "code", "metadata": {}, "outputs": [], "source": source}


WRONG_TYPES = [None, 1, 1.5, True, "text", [], {}, [1], [None], {"a": 1}]


def test_a_wrong_type_at_every_level_of_a_notebook_is_an_intake_error_or_ignored(tmp_path):
    shapes = [
        lambda v: v,
        lambda v: {"cells": v},
        lambda v: {"cells": [v]},
        lambda v: {"cells": [_cell(v)]},
        lambda v: {"cells": [{"cell_type": v, "source": "x = 1"}]},
        lambda v: {"cells": [_cell(["x = 1\n", v])]},
        lambda v: {"worksheets": v},
        lambda v: {"worksheets": [v]},
        lambda v: {"worksheets": [{"cells": v}]},
        lambda v: {"cells": [{"cell_type": "code", "input": v}]},
    ]
    seen = 0
    for i, shape in enumerate(shapes):
        for j, value in enumerate(WRONG_TYPES):
            path = tmp_path / f"nb{i}_{j}.ipynb"
            path.write_text(json.dumps(shape(value)))
            assert isinstance(outcome(path), (Submission, IntakeError))
            seen += 1
    assert seen == len(shapes) * len(WRONG_TYPES)


def test_odd_inputs_are_taken_or_refused_with_a_reason(tmp_path):
    binary = tmp_path / "binary"
    binary.mkdir()
    (binary / "softmax.py").write_bytes(bytes(range(256)) * 4)
    sub = outcome(binary)
    assert (
        isinstance(sub, Submission) and sub.files[0]["bytes"] == 1024
    )  # it fails at import, in the sandbox
    (tmp_path / "zero.zip").write_bytes(b"")
    (tmp_path / "zero.tar.gz").write_bytes(b"")
    (tmp_path / "gz-of-nothing.tgz").write_bytes(gzip.compress(b""))
    whole = tgz_of(
        tmp_path / "t.tar.gz", {"softmax.py": random.Random(1).randbytes(4000)}
    ).read_bytes()
    (tmp_path / "truncated.tar.gz").write_bytes(whole[: len(whole) // 2])
    cases = {
        "empty.zip": zip_of(tmp_path / "empty.zip", {}),
        "empty.tar.gz": tgz_of(tmp_path / "empty.tar.gz", {}),
        "folder-only.zip": zip_of(tmp_path / "folder-only.zip", {"alice/": None}),
        "folder-only.tar.gz": tgz_of(
            tmp_path / "folder-only.tar.gz", {"alice": None, "alice/exercises": None}
        ),
        "nested.zip": zip_of(
            tmp_path / "nested.zip",
            {"inner.zip": zip_of(tmp_path / "inner.zip", {"softmax.py": b"x = 1\n"}).read_bytes()},
        ),
        "zero.zip": tmp_path / "zero.zip",
        "zero.tar.gz": tmp_path / "zero.tar.gz",
        "gz-of-nothing.tgz": tmp_path / "gz-of-nothing.tgz",
        "truncated.tar.gz": tmp_path / "truncated.tar.gz",
    }
    for name, path in cases.items():
        result = outcome(path)
        assert isinstance(result, IntakeError), f"{name}: {result}"
        assert name in str(result) or "no Python files" in str(result), str(result)


def test_a_zip_whose_utf8_flagged_name_is_not_utf8_is_an_intake_error(tmp_path):
    good = zip_of(tmp_path / "good.zip", {"softmax.py": b"x = 1\n"}).read_bytes()
    bad = good.replace(
        b"softmax.py", b"softm\xffx.py"
    )  # the UTF-8 flag is set below, in both headers
    bad = bad.replace(b"PK\x03\x04\x14\x00\x00\x00", b"PK\x03\x04\x14\x00\x00\x08")
    bad = bad.replace(b"PK\x01\x02\x14\x03\x14\x00\x00\x00", b"PK\x01\x02\x14\x03\x14\x00\x00\x08")
    (tmp_path / "bad.zip").write_bytes(bad)
    result = outcome(tmp_path / "bad.zip")
    assert isinstance(result, IntakeError) and "bad.zip" in str(result), result


@pytest.mark.parametrize("suffix", [".zip", ".tar.gz"])
def test_mutated_archives_are_taken_or_refused_never_crash(tmp_path, suffix):
    members = {
        "alice/": None,
        "alice/exercises/softmax.py": b"def softmax(x):\n    return x\n" * 20,
        "alice/exercises/masks.ipynb": json.dumps(
            {"cells": [_cell("def f():\n    return 1\n")]}
        ).encode(),
    }
    make = zip_of if suffix == ".zip" else tgz_of
    original = make(tmp_path / f"original{suffix}", members).read_bytes()
    rng = random.Random(20240610)
    kinds = set()
    for n, data in enumerate(mutants(original, rng, 150)):
        path = tmp_path / f"m{n}{suffix}"
        path.write_bytes(data)
        kinds.add(type(outcome(path)).__name__)
        path.unlink()
    assert kinds <= {"Submission", "IntakeError"} and "IntakeError" in kinds


# --- 3. names are sanitised at the boundary --------------------------------------------------------


def test_non_utf8_and_control_character_names_are_recorded_as_safe_text(tmp_path):
    folder = tmp_path / "eve"
    solution(folder)
    os.close(
        os.open(os.path.join(os.fsencode(folder), b"helper\xff\xfe.py"), os.O_CREAT | os.O_WRONLY)
    )
    (folder / "line\nbreak\u202e.py").write_text("x = 1\n")
    sub = outcome(folder)
    assert isinstance(sub, Submission)
    names = [f["name"] for f in sub.files]
    json.dumps(names, ensure_ascii=False).encode("utf-8")  # a lone surrogate would raise here
    assert "helper\\udcff\\udcfe.py" in names and "line\\x0abreak\\u202e.py" in names
    assert all("\n" not in n for n in names) and sub.path.encode("utf-8")


def test_non_utf8_archive_member_names_are_recorded_as_safe_text(tmp_path):
    path = tmp_path / "eve.tar.gz"
    with tarfile.open(
        path, "w:gz", format=tarfile.GNU_FORMAT, encoding="utf-8", errors="surrogateescape"
    ) as tf:
        for name in ("eve/softmax.py", "eve/b\udcffd.py"):
            info = tarfile.TarInfo(name)
            info.size = 6
            tf.addfile(info, io.BytesIO(b"x = 1\n"))
    sub = outcome(path)
    assert isinstance(sub, Submission) and "b\\udcffd.py" in [f["name"] for f in sub.files]


def test_a_notebook_name_cannot_inject_a_line_into_the_module(tmp_path):
    path = tmp_path / "nb\nimport os.ipynb"
    path.write_text(json.dumps({"cells": [_cell("def f():\n    return 1\n")]}))
    sub = intake.take(path, modules=MODULES)
    try:
        module = next(sub.box.iterdir()).read_text()
    finally:
        sub.cleanup()
    assert "nb" not in module and "import os" not in module  # the name never reaches the module
