"""``grader release --gradescope ZIP``: the autograder zip Gradescope expects.

At the zip's root: ``setup.sh`` (run once, as root, when Gradescope builds the image: Python ≥ 3.11,
CPU torch, the grader from the source copy in the zip, then permissions), ``run_autograder`` (run
per submission: :mod:`grader.release.gradescope_run`), ``gradescope.json`` (settings an instructor
may edit before uploading) and the course checkout (manifest, solutions, stubs, both suites, the
grader's source). Gradescope unpacks the zip into ``/autograder/source``.
"""

from __future__ import annotations

import json
import re
from importlib import resources
from pathlib import Path

from grader.course import manifest
from grader.release import course, texts

CONFIG_NAME = "gradescope.json"
DEFAULT_CONFIG = {
    "assignment": manifest.DEFAULT_ASSIGNMENT,
    # Gradescope: shown once the instructor publishes grades
    "hidden_visibility": "after_published",
    # the strongest backend the container allows (`process` + a leased uid as root)
    "isolation": "auto",
    "canary": True,  # grade solutions and stubs first: a broken image never scores anyone
}


def fill(name: str, **values: str) -> str:
    """A template of ``grader/release/templates`` with each ``@KEY@`` replaced (shell scripts: no
    ``$`` games)."""
    text = resources.files("grader.release").joinpath("templates", name).read_text("utf-8")
    for key, value in values.items():
        text = text.replace(f"@{key}@", value)
    if re.search(r"@[A-Z_]+@", text):
        raise ValueError(f"template {name}: a placeholder was left unfilled")
    return text


def build_zip(out: Path, *, assignment: manifest.Assignment) -> Path:
    """Write the autograder zip of ``assignment`` to ``out`` and return it."""
    config = {**DEFAULT_CONFIG, "assignment": assignment.id}
    generated = {
        "setup.sh": (fill("setup.sh", TORCH=texts.torch_version(), INDEX=texts.CPU_INDEX), 0o755),
        "run_autograder": (fill("run_autograder"), 0o755),
        CONFIG_NAME: (json.dumps(config, indent=2) + "\n", 0o644),
    }
    return course.write_zip(out, course.course_files(assignment.root, assignment), generated)
