"""Every shape a student uploads is taken (issue 28): files, a folder or a zip one level down, a zip inside the
submission folder, a repository with the folders its tools made; and identical work hashes the same whatever the
student named the file, so the batch flags it.

Before: a folder holding a zip, or a zipped folder as Gradescope extracts it (one level down), gave "no Python
files found"; a repository's ``.venv`` (links to its interpreter) refused the whole submission; two students'
identical single files hashed apart because the file name was hashed with the content.
"""

from __future__ import annotations

import io
import json
import os
import sys
import tarfile
from pathlib import Path

import pytest

from grader.exports import outputs
from grader.intake import submission as intake
from grader.intake.submission import IntakeError, Submission
from tests.project.support.common import ROOT
from tests.project.support.hostile_inputs import MODULES, outcome, solution, tgz_of, zip_of

SOFTMAX = (ROOT / "solutions" / "softmax.py").read_bytes()


def _shape(name: str, root: Path) -> Path:
    """``root``, a folder holding the student's softmax.py as uploaded in shape ``name``."""
    root.mkdir()
    if name == "a zip of the files":
        zip_of(root / "submission.zip", {"softmax.py": SOFTMAX})
    elif name == "a zip of a folder, with macOS's litter":
        zip_of(
            root / "hw.zip", {"hw/softmax.py": SOFTMAX, "__MACOSX/hw/._softmax.py": b"\0\5\26\7"}
        )
    elif name == "a tar.gz of a folder":
        tgz_of(root / "hw.tar.gz", {"hw/exercises/softmax.py": SOFTMAX})
    elif name == "a folder one level down":
        solution(root / "attention-hw")
        (root / ".DS_Store").write_bytes(b"\0")
    elif name == "a folder two levels down":
        solution(root / "attention-hw" / "attention-hw")
    return root


SHAPES = [
    "a zip of the files",
    "a zip of a folder, with macOS's litter",
    "a tar.gz of a folder",
    "a folder one level down",
    "a folder two levels down",
]


@pytest.mark.parametrize("shape", SHAPES)
def test_every_shape_of_upload_is_taken(tmp_path, shape):
    sub = outcome(_shape(shape, tmp_path / "submission"))
    assert isinstance(sub, Submission), sub
    assert [f["name"] for f in sub.files] == ["softmax.py"] and sub.single_module is None


def test_a_lone_file_of_every_exercise_in_a_folder_is_that_file(tmp_path):
    """Gradescope puts an uploaded file in the submission folder: all exercises in one file, as a single file."""
    (tmp_path / "submission").mkdir()
    (tmp_path / "submission" / "my_attention.py").write_bytes(SOFTMAX)
    sub = outcome(tmp_path / "submission")
    assert (
        isinstance(sub, Submission)
        and sub.single_module == "my_attention"
        and sub.layout == "in-folder:single-file"
    )


def test_an_archive_is_opened_once_and_folders_of_modules_are_not_descended(tmp_path):
    inner = zip_of(tmp_path / "inner.zip", {"softmax.py": SOFTMAX}).read_bytes()
    (tmp_path / "twice").mkdir()
    zip_of(tmp_path / "twice" / "outer.zip", {"inner.zip": inner})
    refused = outcome(tmp_path / "twice")
    assert isinstance(refused, IntakeError) and "no Python files" in str(refused)
    solution(
        tmp_path / "both"
    )  # its own softmax.py and a folder: the folder is not what it stands for
    solution(tmp_path / "both" / "old", "masks")
    sub = outcome(tmp_path / "both")
    assert isinstance(sub, Submission) and [f["name"] for f in sub.files] == ["softmax.py"]


def _tools(repo: Path) -> None:
    """The folders a student's tools make, with the links a virtual environment holds."""
    (repo / ".venv" / "bin").mkdir(parents=True)
    (repo / ".venv" / "bin" / "python").symlink_to(sys.executable)
    (repo / ".venv" / "lib64").symlink_to("lib")
    (repo / ".venv" / "junk").mkdir()
    for n in range(11_000):  # more than the walk's cap: never walked
        os.close(os.open(repo / ".venv" / "junk" / f"{n}.py", os.O_CREAT | os.O_WRONLY))
    for tool in (".git", "__pycache__", ".pytest_cache", "exercises/.ipynb_checkpoints"):
        (repo / tool).mkdir(parents=True, exist_ok=True)
        (repo / tool / "link").symlink_to("/etc")
        os.mkfifo(repo / tool / "fifo")


def test_a_repository_with_its_tools_folders_is_taken_and_they_are_never_read(tmp_path):
    repo = tmp_path / "attention-student"
    solution(repo / "exercises")
    (repo / "exercises" / ".ipynb_checkpoints").mkdir()
    _tools(repo)
    sub = outcome(repo)
    assert isinstance(sub, Submission), sub
    assert sub.layout == "exercises-folder" and [f["name"] for f in sub.files] == ["softmax.py"]
    (repo / "exercises" / "evil").symlink_to(
        "/etc"
    )  # outside the tools' folders a link still refuses it
    assert "symbolic link" in str(outcome(repo))


def test_an_archive_of_a_repository_skips_its_tools_folders(tmp_path):
    path = tmp_path / "repo.tar.gz"
    with tarfile.open(path, "w:gz") as tf:
        info = tarfile.TarInfo("repo/exercises/softmax.py")
        info.size = len(SOFTMAX)
        tf.addfile(info, io.BytesIO(SOFTMAX))
        link = tarfile.TarInfo("repo/.venv/bin/python")
        link.type, link.linkname = tarfile.SYMTYPE, "/usr/bin/python3"
        tf.addfile(link)
    sub = outcome(path)
    assert isinstance(sub, Submission) and sub.layout == "tar.gz:exercises-folder", sub
    assert [f["name"] for f in sub.files] == ["softmax.py"]


def _nb(source: bytes) -> bytes:
    return json.dumps(
        {
            "nbformat": 4,
            "metadata": {},
            "cells": [
                {"cell_type": "code", "metadata": {}, "outputs": [], "source": source.decode()}
            ],
        }
    ).encode()


@pytest.mark.parametrize("suffix", [".py", ".ipynb"])
def test_identical_single_files_hash_the_same_whatever_their_names_and_are_flagged(
    tmp_path, suffix
):
    named = []
    for student in ("alice", "bob", "carol"):
        path = tmp_path / f"{student}_attention{suffix}"
        data = SOFTMAX + (b"\nMINE = 1\n" if student == "carol" else b"")
        path.write_bytes(data if suffix == ".py" else _nb(data))
        sub = intake.take(path, modules=MODULES)
        sub.cleanup()
        named.append((student, {"submission": {"sha256": sub.sha256}}))
    assert outputs.identical(named) == [
        {"sha256": named[0][1]["submission"]["sha256"], "students": ["alice", "bob"]}
    ]
    for module in (
        "softmax",
        "masks",
    ):  # in a folder the name is which exercise it is: it still counts
        (tmp_path / module).mkdir()
        (tmp_path / module / f"{module}.py").write_bytes(SOFTMAX)
    assert (
        intake.take(tmp_path / "softmax", modules=MODULES).sha256
        != intake.take(tmp_path / "masks", modules=MODULES).sha256
    )
