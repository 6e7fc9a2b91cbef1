"""The README and docs/ tell no stale story: every ``grader`` command they show exists, every relative link
resolves (to a file, and to a heading where it names one), and every ``grader/`` or ``benchmarks/`` path they
put in code exists in this checkout.

Commands are run in-process (``grader.cli.main.main([cmd, "--help"])``, argparse's own exit 0), once each, so
the whole file stays well under a second or two; nothing is graded.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from grader.cli.main import main

ROOT = Path(__file__).resolve().parents[3]
PAGES = sorted([ROOT / "README.md", *(ROOT / "docs").rglob("*.md")])
FENCE = re.compile(r"^(```|~~~).*?^\1[ \t]*$", re.M | re.S)
SPAN = re.compile(r"`([^`\n]+)`")
COMMAND = re.compile(
    r"(?:^\s*|[|;&]\s*|\$ )grader ([a-z][a-z0-9-]*)\b", re.M
)  # where a shell reads a command
LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)\)")
CODE_PATH = re.compile(r"^((?:grader|benchmarks)/[\w./-]*)")


def _prose(text: str) -> str:
    """The page without its fenced blocks (a ``# comment`` there is no heading, a ``[x](y)`` no link)."""
    return FENCE.sub("", text)


def _code(text: str) -> list[str]:
    """Everything a page shows as code: its fenced blocks and its inline spans."""
    return [m.group(0) for m in FENCE.finditer(text)] + SPAN.findall(_prose(text))


def _commands() -> list[str]:
    found = {
        cmd
        for page in PAGES
        for code in _code(page.read_text("utf-8"))
        for cmd in COMMAND.findall(code)
    }
    return sorted(found)


def test_the_pages_exist_and_show_commands():
    """The tree the README lists is there, and the scan below has something to check."""
    names = {p.relative_to(ROOT).as_posix() for p in PAGES}
    assert {
        "README.md",
        "docs/students.md",
        "docs/performance.md",
        "docs/design/isolation.md",
    } <= names, names
    assert {"batch", "grade", "check", "release", "merge"} <= set(_commands()), _commands()


@pytest.mark.parametrize("command", _commands())
def test_every_command_shown_exists(command: str, capsys: pytest.CaptureFixture[str]):
    """`grader COMMAND --help` exits 0 (argparse exits 2 for a command it does not know)."""
    with pytest.raises(SystemExit) as exit_:
        main([command, "--help"])
    assert exit_.value.code == 0, (command, capsys.readouterr().err)
    assert f"grader {command}" in capsys.readouterr().out


def _slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation other than - and _ dropped, spaces to -."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def _anchors(page: Path) -> set[str]:
    return {_slug(h) for h in re.findall(r"^#{1,6} (.+)$", _prose(page.read_text("utf-8")), re.M)}


def _links() -> list[tuple[Path, str]]:
    return [
        (page, target)
        for page in PAGES
        for target in LINK.findall(_prose(page.read_text("utf-8")))
        if not re.match(r"[a-z]+:", target)
    ]


def test_every_relative_link_resolves():
    links = _links()
    assert len(links) > 20, links  # the README's page list alone has a dozen
    broken = []
    for page, target in links:
        path, _, anchor = target.partition("#")
        dest = (page.parent / path).resolve() if path else page
        if not dest.exists():
            broken.append(f"{page.relative_to(ROOT)}: {target} (no such file)")
        elif anchor and dest.suffix == ".md" and anchor not in _anchors(dest):
            broken.append(f"{page.relative_to(ROOT)}: {target} (no such heading)")
    assert not broken, "\n".join(broken)


def test_every_code_path_shown_exists():
    """A module named in the docs is one this checkout has (the layout moved once; the docs follow it)."""
    shown = {
        m.group(1).rstrip(".")
        for page in PAGES
        for code in _code(page.read_text("utf-8"))
        for m in map(CODE_PATH.match, code.split())
        if m
    }
    assert len(shown) > 20, shown
    missing = sorted(p for p in shown if not (ROOT / p).exists())
    assert not missing, missing
