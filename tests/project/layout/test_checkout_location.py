"""The leased-uid worker does not depend on where the checkout and its environment live (issue 28, item 12).

A venv inside a folder other users cannot enter (a 0700 home, ``mktemp -d``) used to stop every ``process``
worker of a root grader at its first import. Here such an environment grades under ``process`` as root: the
grader's own sandbox side comes from its private library, torch from a mirror of hard links any uid can reach.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.project.support.common import ROOT, solutions_copy

pytestmark = [
    pytest.mark.cost(40),
    pytest.mark.skipif(
        os.name != "posix" or os.geteuid() != 0, reason="leased uids are a root grader's"
    ),
]


@pytest.fixture(scope="module")
def closed_python() -> Iterator[Path]:
    """A venv in a 0700 folder whose site-packages holds torch (hard links to this environment's files)."""
    folder = Path(tempfile.mkdtemp(prefix="closed-"))  # 0700: no other user may enter
    try:
        subprocess.run(
            [sys._base_executable, "-m", "venv", "--without-pip", str(folder / "venv")], check=True
        )
        site = next((folder / "venv").glob("lib/python3*/site-packages"))
        site.rmdir()
        subprocess.run(["cp", "-al", sysconfig.get_paths()["purelib"], str(site)], check=True)
        for pth in site.glob(
            "*.pth"
        ):  # this checkout's editable install: the grader, from the checkout
            pth.unlink()
        (site / "checkout.pth").write_text(f"{ROOT}\n")
        yield folder / "venv" / "bin" / "python"
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def test_process_as_root_grades_from_an_environment_other_users_cannot_enter(
    closed_python, tmp_path
):
    assert oct(closed_python.parents[2].stat().st_mode & 0o777) == "0o700"
    out = tmp_path / "card.json"
    done = subprocess.run(
        [
            str(closed_python),
            "-I",
            "-m",
            "grader",
            "grade",
            str(solutions_copy(tmp_path / "sub")),
            "--isolation",
            "process",
            "--seed",
            "3",
            "--no-canary",
            "--out",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=1200,
        cwd="/",
        env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "GRADER_CACHE_DIR": str(tmp_path)},
    )
    assert done.returncode == 0, done.stderr[-3000:]
    card = json.loads(out.read_text())
    assert card["status"] == "graded" and card["score"] == card["max_score"] > 0, card["error"]
    assert card["isolation"]["attested"] is True and card["isolation"]["uid"] >= 60000
    assert card["isolation"]["file_view"] in ("landlock", "permissions")


def test_mirrors_go_once_their_site_folder_does_or_a_newer_one_has_settled(tmp_path, monkeypatch):
    """A mirror keeps its files' data alive after the venv it mirrors is deleted or upgraded: the sweep removes it."""
    from grader.sandbox import mirror

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    parent = tmp_path / f"attention-grader-mirror-{os.geteuid()}"
    site = tmp_path / "site"
    site.mkdir()
    for name, source in (("aa01", tmp_path / "gone"), ("bb01", site), ("bb02", site)):
        (parent / name).mkdir(parents=True)
        (parent / name / mirror.SOURCE).write_text(str(source))
    os.utime(parent / "bb01", (1, 1))  # the older mirror of a site that has a newer one
    assert (
        mirror.sweep(keep_s=3600.0) == 1 and not (parent / "aa01").exists()
    )  # the newer one is too recent
    os.utime(parent / "bb02", (2, 2))  # ... until it has settled
    assert mirror.sweep(keep_s=3600.0) == 1 and sorted(p.name for p in parent.iterdir()) == ["bb02"]
