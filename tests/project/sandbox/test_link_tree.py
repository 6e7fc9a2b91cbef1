"""One tree of hard links (:func:`grader.sandbox.mirror.link_tree`): torch's mirrors for leased uids, and the test
helper that lets another uid import a checkout inside a folder it cannot enter (tests.project.support.readable)."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from grader.sandbox import mirror
from tests.project.support import readable

KEPT = ("pkg/__init__.py", "pkg/sub/mod.py", "pkg/secret.txt", "setup.cfg")
SKIPPED = (".git/config", ".venv-gpu/bin/python", "__pycache__/a.pyc", "pkg/sub/__pycache__/m.pyc")


@pytest.fixture
def scratch() -> Iterator[Path]:
    """A folder others may enter (pytest's tmp_path is 0700), on one filesystem for the links."""
    folder = Path(tempfile.mkdtemp(prefix="link-tree-"))
    folder.chmod(0o755)
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


def _checkout(root: Path) -> Path:
    for name in (*KEPT, *SKIPPED):
        (root / name).parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        (root / name).write_text(f"# {name}\n")
    (root / "pkg/secret.txt").chmod(0o600)
    return root


def test_every_file_is_the_same_inode_every_folder_0755_and_skipped_names_go_at_any_depth(scratch):
    source = _checkout(scratch / "src")
    mirror.link_tree(str(source), scratch / "dest", skip=readable.SKIP)
    dest = scratch / "dest"
    assert sorted(str(p.relative_to(dest)) for p in dest.rglob("*") if p.is_file()) == sorted(KEPT)
    assert all(os.path.samefile(source / name, dest / name) for name in KEPT)  # linked, not copied
    assert (
        stat.S_IMODE((dest / "pkg/secret.txt").stat().st_mode) == 0o600
    )  # a file keeps its own mode
    folders = [dest, *(p for p in dest.rglob("*") if p.is_dir())]
    assert {stat.S_IMODE(p.stat().st_mode) for p in folders} == {0o755}


def test_a_single_file_is_one_link_and_no_skip_keeps_everything(scratch):
    source = _checkout(scratch / "src")
    mirror.link_tree(str(source / "setup.cfg"), scratch / "one.cfg")
    assert os.path.samefile(source / "setup.cfg", scratch / "one.cfg")
    mirror.link_tree(str(source), scratch / "all")
    found = {
        str(p.relative_to(scratch / "all")) for p in (scratch / "all").rglob("*") if p.is_file()
    }
    assert found == {*KEPT, *SKIPPED}


def _read_as_nobody(path: Path) -> subprocess.CompletedProcess[str]:
    drop = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]
    return subprocess.run([*drop, "cat", str(path)], capture_output=True, text=True, check=False)


@pytest.mark.skipif(
    os.name != "posix" or os.geteuid() != 0 or shutil.which("setpriv") is None,
    reason="reading as another uid needs root and setpriv",
)
def test_a_checkout_others_cannot_enter_is_readable_by_another_uid_through_the_links(scratch):
    closed = scratch / "home"
    closed.mkdir(mode=0o700)
    source = _checkout(closed / "checkout")
    for folder in [source, *(p for p in source.rglob("*") if p.is_dir())]:
        folder.chmod(0o755)  # only the folder above it is closed, as a 0700 home is
    assert _read_as_nobody(source / "pkg/sub/mod.py").returncode != 0  # the premise
    seen = readable._for_others(source, scratch / "linked-0")
    assert seen == scratch / "linked-0" / "checkout"
    done = _read_as_nobody(seen / "pkg/sub/mod.py")
    assert (done.returncode, done.stdout) == (0, "# pkg/sub/mod.py\n"), done.stderr
    assert not (seen / ".git").exists() and not (seen / "pkg/sub/__pycache__").exists()
    assert readable._for_others(scratch, scratch / "unused") == scratch  # reachable: used as it is
    assert not (scratch / "unused").exists()
