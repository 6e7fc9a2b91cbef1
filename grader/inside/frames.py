"""A student's exception as the trusted side may see it: its message (bounded, even from a hostile
``__str__``) and only the traceback lines that point into the submission, never the grader's."""

from __future__ import annotations

import traceback
from pathlib import Path

__all__ = ["raised_in", "safe_str", "student_frames"]


def safe_str(exc: BaseException) -> str:
    try:
        return str(exc)[:2000]
    except BaseException:  # noqa: BLE001 - a hostile __str__
        return "<exception message could not be read>"


def student_frames(exc: BaseException, root: Path) -> tuple[str, ...]:
    """The traceback lines that point into the submission, oldest first (never grader frames)."""
    frames = []
    for fs in traceback.extract_tb(exc.__traceback__):
        # "<frozen importlib._bootstrap>" is no path: resolved against a cwd inside the submission
        # it would pass
        if not fs.filename.startswith("<") and _inside(fs.filename, root):
            frames.append(
                f"{Path(fs.filename).name}, line {fs.lineno}, in {fs.name}: {(fs.line or '').strip()}"
            )
    return tuple(frames[-8:])


def raised_in(exc: BaseException, root: Path) -> bool:
    tb = traceback.extract_tb(exc.__traceback__)
    return bool(tb) and not tb[-1].filename.startswith("<") and _inside(tb[-1].filename, root)


def _inside(filename: str, root: Path) -> bool:
    try:
        return Path(filename).resolve().is_relative_to(root)
    except (OSError, ValueError):
        return False
