"""What the project depends on and what it ships.

- Every import the grader, its sandboxed worker and the released student repository make is the
  standard library, ``grader`` itself, or a dependency that is *declared* (so a clean venv has it):
  numpy was once used by the wire format without being declared, and every student scored 0.
- The trust wall, pinned from imports: ``grader.inside`` and ``grader.protocol`` (bound into the
  sandbox) import only each other, the standard library and torch.
- An installed wheel never carries ``solutions/`` or the hidden tests.
"""

from __future__ import annotations

import ast
import importlib.metadata as md
import re
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest

from grader.release import repository as release
from grader.release import texts

ROOT = Path(__file__).resolve().parents[3]
GRADER = ROOT / "grader"
# modules that may use an optional extra (named in pyproject), and which one
EXTRA_USERS = {
    "grader/course/build.py": "build",
    **{
        f"grader/cluster/{m}.py": "distributed"
        for m in ("admission", "connect", "grading", "worker")
    },
}


def _imports(path: Path) -> set[str]:
    """Top-level names of every absolute import in ``path`` (function-level imports included)."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text("utf-8"))):
        if isinstance(node, ast.Import):
            names |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module.split(".")[0])
    return names


def _import_names(requirements: list[str]) -> set[str]:
    """The import names the given requirement strings provide (from the installed distributions' metadata)."""
    wanted = {
        re.split(r"[<>=!~\[ ;]", r, maxsplit=1)[0].lower().replace("_", "-") for r in requirements
    }
    provided = set()
    for name, dists in md.packages_distributions().items():
        if any(d.lower().replace("_", "-") in wanted for d in dists):
            provided.add(name)
    return provided


def _project() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text("utf-8"))["project"]


def _undeclared(files: list[Path], allowed: set[str]) -> dict[str, set[str]]:
    std = set(sys.stdlib_module_names) | {"grader"}
    out = {}
    for path in files:
        rel = path.relative_to(ROOT).as_posix() if path.is_relative_to(ROOT) else path.name
        extra = EXTRA_USERS.get(rel)
        ok = allowed | (
            _import_names(_project()["optional-dependencies"][extra]) if extra else set()
        )
        missing = _imports(path) - std - ok
        if missing:
            out[rel] = missing
    return out


def test_every_grader_import_is_a_declared_dependency():
    # templates (a Classroom 50 autograder with @PLACEHOLDERS@) run elsewhere, installed from their own bundle
    files = sorted(p for p in GRADER.rglob("*.py") if "templates" not in p.parts)
    assert len(files) > 40
    assert _undeclared(files, _import_names(_project()["dependencies"])) == {}


def test_the_check_catches_an_undeclared_import(tmp_path, monkeypatch):
    """The check itself works: numpy (installed here or not) is not declared, so a module importing it fails."""
    # outside the repository: under xdist another worker may be scanning grader/ at this moment
    fake = tmp_path / "_tmp_undeclared_probe.py"
    fake.write_text("import numpy\n")
    assert _undeclared([fake], _import_names(_project()["dependencies"])) == {
        "_tmp_undeclared_probe.py": {"numpy"}
    }


def test_the_released_student_repo_declares_what_its_runtime_imports():
    declared = re.search(r"dependencies = \[(.*?)\]", texts.PYPROJECT.template, re.S)
    assert declared is not None
    requirements = re.findall(r'"([^"]+)"', declared.group(1))
    files = [GRADER / name for name in release.RUNTIME if name.endswith(".py")]
    assert _undeclared(files, _import_names(requirements)) == {}


def test_the_inside_of_the_wall_imports_nothing_from_the_trusted_side():
    inside = sorted((GRADER / "inside").glob("*.py")) + sorted((GRADER / "protocol").glob("*.py"))
    assert {p.name for p in inside} >= {
        "worker.py",
        "executor.py",
        "wire.py",
        "values.py",
        "errors.py",
    }
    for path in inside:
        for node in ast.walk(ast.parse(path.read_text("utf-8"))):
            module = node.module if isinstance(node, ast.ImportFrom) and node.level == 0 else None
            names = (
                [a.name for a in node.names]
                if isinstance(node, ast.Import)
                else [module]
                if module
                else []
            )
            for name in names:
                top = name.split(".")[0]
                assert (
                    top in sys.stdlib_module_names
                    or top == "torch"
                    or name.startswith(("grader.inside", "grader.protocol"))
                ), (
                    f"{path.relative_to(ROOT)} imports {name}: the inside may import only grader.inside/grader.protocol"
                )


@pytest.mark.slow
def test_the_wheel_ships_no_solutions_and_no_tests(tmp_path):
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "-q",
            "-w",
            str(tmp_path),
            str(ROOT),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    (wheel,) = tmp_path.glob("*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert any(n.startswith("grader/inside/") for n in names) and any(
        n.startswith("grader/protocol/") for n in names
    )
    leaked = [n for n in names if n.split("/")[0] in ("solutions", "tests")]
    assert leaked == []


def test_the_released_runtime_holds_every_grader_module_it_and_the_public_tests_import():
    shipped = {name for name in release.RUNTIME if name.endswith(".py")}
    files = [GRADER / name for name in shipped] + sorted((ROOT / "tests" / "public").glob("*.py"))
    missing: dict[str, list[str]] = {}
    for path in files:
        for node in ast.walk(ast.parse(path.read_text("utf-8"))):
            if (
                isinstance(node, ast.ImportFrom)
                and node.level == 0
                and (node.module or "").startswith("grader")
            ):
                targets = [node.module, *(f"{node.module}.{a.name}" for a in node.names)]
            elif isinstance(node, ast.Import):
                targets = [a.name for a in node.names if a.name.startswith("grader")]
            else:
                continue
            needed = {_module_file(t) for t in targets} - {None}
            missing.setdefault(path.relative_to(ROOT).as_posix(), []).extend(
                sorted(needed - shipped)
            )
    missing = {k: [m for m in v if (k, m) not in INSTRUCTOR_ONLY] for k, v in missing.items()}
    missing = {k: v for k, v in missing.items() if v}
    assert missing == {}


# imports inside the instructor's `grader release` command, which the student CLI never registers
INSTRUCTOR_ONLY = {  # the wrong-answer digests of a grade (backend_factory given); `grader check` runs without one
    ("grader/scoring/runner.py", "scoring/answers.py")
}


def _module_file(dotted: str) -> str | None:
    """``grader.x.y`` as a path relative to the grader folder, if such a module or package exists."""
    parts = dotted.split(".")[1:]
    if not parts:
        return "__init__.py"
    rel = Path(*parts)
    for candidate in (rel.with_suffix(".py"), rel / "__init__.py"):
        if (GRADER / candidate).is_file():
            return candidate.as_posix()
    return None


def test_ci_runs_exactly_the_readmes_test_command():
    """`.ci/run` builds a fresh venv and must then run the README's own test command, word for word."""
    readme = re.findall(
        r"^(python -m pytest [^#\n]*?)\s*(?:#.*)?$", (ROOT / "README.md").read_text(), re.M
    )
    ci = [
        line.strip()
        for line in (ROOT / ".ci" / "run").read_text().splitlines()
        if line.startswith("python -m pytest")
    ]
    assert readme and ci == readme[:1], (readme, ci)


def test_the_version_is_written_once_and_the_changelog_names_it():
    """`grader.__version__` is the one place: pyproject reads it, the installed metadata says it, and CHANGELOG.md's
    latest entry is it (on 4ad1d57 pyproject and the package each wrote 0.1.0, and there was no changelog)."""
    import grader

    project = tomllib.loads((ROOT / "pyproject.toml").read_text("utf-8"))
    assert "version" not in project["project"] and "version" in project["project"]["dynamic"]
    assert project["tool"]["setuptools"]["dynamic"]["version"] == {"attr": "grader.__version__"}
    assert md.version("attention-grader") == grader.__version__
    headings = re.findall(r"^## (\S+)", (ROOT / "CHANGELOG.md").read_text("utf-8"), re.MULTILINE)
    assert headings and headings[0] == grader.__version__, headings
    assert len(set(headings)) == len(headings)


def test_the_pythons_said_to_be_tested_are_the_classifiers_and_gradescope_s_choices():
    """The instructors' docs say what runs on which Python (issue 28.13; 4ad1d57 claimed >= 3.11 and ran 3.11
    alone): its table, the classifiers and the Pythons Gradescope's setup.sh picks from agree, and the script that
    ran the other versions is valid shell."""
    page = (ROOT / "docs" / "instructors" / "grading.md").read_text("utf-8")
    section = page[page.index("## Python versions") :].split("\n## ", 1)[0]
    rows = dict(re.findall(r"^\| (3\.\d+) \| .*\| ([^|]+) \|$", section, re.MULTILINE))
    tested = {v for v, result in rows.items() if "untested" not in result}
    project = tomllib.loads((ROOT / "pyproject.toml").read_text("utf-8"))["project"]
    classified = {
        c.rsplit(" :: ", 1)[1]
        for c in project["classifiers"]
        if c.startswith("Programming Language :: Python :: 3.")
    }
    assert tested == classified and {"3.11", "3.12", "3.13", "3.14"} <= set(rows), rows
    assert (
        project["requires-python"]
        == f">={min(tested, key=lambda v: tuple(map(int, v.split('.'))))}"
    )
    setup = (GRADER / "release" / "templates" / "setup.sh").read_text("utf-8")
    picked = set(
        re.findall(r"python(3\.\d+)", setup.split("for candidate in", 1)[1].split(";", 1)[0])
    )
    assert picked and picked <= tested, picked
    assert (
        subprocess.run(["bash", "-n", str(ROOT / "benchmarks" / "python_checks.sh")]).returncode
        == 0
    )
