"""A Python environment every user may run: what a test needs to run the grader as another (non-root) user, and
what a root grader's leased uids would need if this machine's interpreter were not readable (pyenv's lives under
/root, 0700). A ``--without-pip`` venv from a same-version interpreter that others can reach, in a folder anyone
may enter, seeing this checkout and its packages through a ``.pth`` file (as ``pip install`` does in ``/opt``)."""

from __future__ import annotations

import shutil
import stat
import subprocess
import sys
import sysconfig
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from grader.sandbox import mirror
from tests.project.support.common import ROOT

SKIP = (".git", ".venv*", "__pycache__", ".pytest_cache")  # what another uid needs none of


def reachable(path: Path) -> bool:
    """Every folder above ``path`` lets others through (so another uid can exec and import from it)."""
    return all(p.stat().st_mode & stat.S_IXOTH for p in [*path.parents][:-1] if p != Path("/"))


def _for_others(path: Path, linked: Path) -> Path:
    """``path`` where another uid can reach it; else a tree of hard links to its files in ``linked`` (nothing copied):
    a checkout or venv inside a folder others cannot enter (a 0700 home, ``mktemp -d``) must still be importable.
    The links are the grader's own (:func:`grader.sandbox.mirror.link_tree`, as its torch mirrors are made)."""
    if reachable(path / "x"):
        return path
    linked.mkdir(mode=0o755)
    linked.chmod(0o755)
    mirror.link_tree(str(path), linked / path.name, skip=SKIP)
    return linked / path.name


def interpreter() -> Path | None:
    minor = f"python{sys.version_info.major}.{sys.version_info.minor}"
    for candidate in (
        Path(sys._base_executable).resolve(),
        Path("/usr/bin") / minor,
        Path("/usr/local/bin") / minor,
    ):
        if (
            candidate.is_file()
            and reachable(candidate)
            and reachable(candidate.parent.parent / "lib" / minor)
        ):
            return candidate
    return None


@contextmanager
def venv() -> Iterator[Path | None]:
    """The venv's ``bin/python`` (None where no such interpreter exists), removed afterwards."""
    base = interpreter()
    if base is None:
        yield None
        return
    folder = Path(tempfile.mkdtemp(prefix="gs-venv-"))
    folder.chmod(0o755)
    try:
        subprocess.run([str(base), "-m", "venv", "--without-pip", str(folder)], check=True)
        site = next(folder.glob("lib/python3*/site-packages"))
        seen = [
            _for_others(Path(p), folder / f"linked-{n}")
            for n, p in enumerate((ROOT, sysconfig.get_paths()["purelib"]))
        ]
        (site / "course.pth").write_text("".join(f"{p}\n" for p in seen))
        yield folder / "bin" / "python"
    finally:
        shutil.rmtree(folder, ignore_errors=True)
