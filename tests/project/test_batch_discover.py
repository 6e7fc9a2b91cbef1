"""`grader batch` intake: every class layout gives the right student ids; a clash is reported, never a crash."""

from __future__ import annotations

import zipfile

import pytest

from grader.batch.discover import DiscoveryError, discover, safe_id


def _touch(path, text="def f():\n    return 1\n"):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def test_plain_folder_of_folders_archives_and_single_files(tmp_path):
    _touch(tmp_path / "alice" / "softmax.py")
    _touch(tmp_path / "bob" / "exercises" / "softmax.py")
    with zipfile.ZipFile(tmp_path / "carol.zip", "w") as zf:
        zf.writestr("carol/softmax.py", "x = 1\n")
    (tmp_path / "dave.tar.gz").write_bytes(b"not really a tarball")
    _touch(tmp_path / "erin.tgz", "")
    _touch(tmp_path / "frank.py")
    _touch(tmp_path / "README.md", "# notes")
    _touch(tmp_path / ".DS_Store", "")
    found = discover(tmp_path)
    assert found.layout == "folder"
    assert {e.key: e.layout for e in found.entries} == {
        "alice": "folder", "bob": "folder", "carol": "zip", "dave": "tar.gz", "erin": "tgz", "frank": "py"}
    assert found.ignored == ["README.md"]
    assert not any(e.clash for e in found.entries)


def test_nbgrader_submitted_layout(tmp_path):
    for student in ("alice", "bob"):
        _touch(tmp_path / "submitted" / student / "attention-basics" / "softmax.py")
    _touch(tmp_path / "submitted" / "carol" / "other" / "softmax.py")
    _touch(tmp_path / "submitted" / "carol" / "attention-basics" / "softmax.py")
    for root in (tmp_path, tmp_path / "submitted"):
        found = discover(root, assignment="attention-basics")
        assert found.layout == "nbgrader"
        paths = {e.key: e.path.relative_to(tmp_path / "submitted").as_posix() for e in found.entries}
        assert paths == {"alice": "alice/attention-basics", "bob": "bob/attention-basics",
                         "carol": "carol/attention-basics"}


def test_github_classroom_clone_strips_the_assignment_prefix(tmp_path):
    root = tmp_path / "attention-basics-submissions"
    _touch(root / "attention-basics-octocat" / "exercises" / "softmax.py")
    _touch(root / "hubot" / "exercises" / "softmax.py")
    found = discover(root)
    assert found.layout == "github-classroom"
    assert sorted(e.student for e in found.entries) == ["hubot", "octocat"]


def test_a_clash_marks_every_claimant_with_distinct_keys(tmp_path):
    _touch(tmp_path / "alice" / "softmax.py")
    _touch(tmp_path / "alice.py")
    (tmp_path / "alice.zip").write_bytes(b"PK")
    _touch(tmp_path / "bob.py")
    found = discover(tmp_path)
    clashing = [e for e in found.entries if e.clash]
    assert len(clashing) == 3 and len({e.key for e in clashing}) == 3
    assert all(e.student == "alice" and "claimed by 3 entries" in e.clash for e in clashing)
    assert [e.key for e in found.entries if not e.clash] == ["bob"]


def test_ids_are_safe_file_names_and_a_missing_folder_is_a_clear_error(tmp_path):
    assert safe_id("../evil/..") == "_evil_.."
    assert safe_id("José Ñ") == "Jos___"
    assert "/" not in safe_id("a/b") and not safe_id(".hidden").startswith(".")
    with pytest.raises(DiscoveryError, match="not a folder"):
        discover(tmp_path / "missing")
