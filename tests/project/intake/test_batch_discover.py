"""`grader batch` intake: every class layout gives the right student ids; a clash is reported, never a crash."""

from __future__ import annotations

import zipfile

import pytest

from grader.intake.classfolder import DiscoveryError, discover, safe_id


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
        "alice": "folder",
        "bob": "folder",
        "carol": "zip",
        "dave": "tar.gz",
        "erin": "tgz",
        "frank": "py",
    }
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
        paths = {
            e.key: e.path.relative_to(tmp_path / "submitted").as_posix() for e in found.entries
        }
        assert paths == {
            "alice": "alice/attention-basics",
            "bob": "bob/attention-basics",
            "carol": "carol/attention-basics",
        }


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


def test_links_fifos_and_devices_in_a_class_folder_are_kept_as_intake_errors_naming_them(tmp_path):
    import os

    _touch(tmp_path / "alice" / "softmax.py")
    with zipfile.ZipFile(tmp_path / "carol.zip", "w") as zf:
        zf.writestr("carol/softmax.py", "x = 1\n")
    (tmp_path / "bob").symlink_to(tmp_path / "alice")  # would grade Alice's work as Bob's
    (tmp_path / "dave.zip").symlink_to(tmp_path / "carol.zip")
    (tmp_path / "eve").symlink_to("/proc/self/cwd/solutions")
    os.mkfifo(tmp_path / "frank.zip")  # once hung intake in open()
    (tmp_path / "notes").symlink_to(tmp_path / "alice" / "softmax.py")
    found = {e.key: e for e in discover(tmp_path).entries}
    assert set(found) == {"alice", "bob", "carol", "dave", "eve", "frank", "notes"}
    assert not found["alice"].clash and not found["carol"].clash
    for key, what in (
        ("bob", "symbolic link"),
        ("dave", "symbolic link"),
        ("eve", "symbolic link"),
        ("frank", "FIFO"),
        ("notes", "symbolic link"),
    ):
        assert what in found[key].clash and found[key].path.name in found[key].clash, (
            key,
            found[key].clash,
        )


def test_links_are_refused_in_classroom_and_nbgrader_layouts_too(tmp_path):
    root = tmp_path / "attention-basics-submissions"
    _touch(root / "attention-basics-octocat" / "exercises" / "softmax.py")
    (root / "attention-basics-hubot").symlink_to(root / "attention-basics-octocat")
    found = {e.student: e.clash for e in discover(root).entries}
    assert found["octocat"] == "" and "symbolic link" in found["hubot"]
    nb = tmp_path / "course" / "submitted"
    _touch(nb / "alice" / "attention-basics" / "softmax.py")
    (nb / "bob").mkdir()
    (nb / "bob" / "attention-basics").symlink_to(nb / "alice" / "attention-basics")
    (nb / "carol").symlink_to(nb / "alice")
    found = {e.student: e.clash for e in discover(nb, assignment="attention-basics").entries}
    assert (
        found["alice"] == ""
        and "symbolic link" in found["bob"]
        and "symbolic link" in found["carol"]
    )


def test_student_ids_from_hostile_folder_names_are_safe_text(tmp_path):
    import os

    forged = "eve\n[2 of 2] mallory: 6 of 6 in 0.1 s"
    _touch(tmp_path / forged / "softmax.py")
    os.makedirs(os.path.join(os.fsencode(tmp_path), b"b\xffb"))
    _touch(tmp_path / "-1+B2" / "softmax.py")
    entries = discover(tmp_path).entries
    for entry in entries:
        assert "\n" not in entry.student and entry.student.encode("utf-8") and "/" not in entry.key
    assert {e.student for e in entries} == {
        "eve\\x0a[2 of 2] mallory: 6 of 6 in 0.1 s",
        "b\\udcffb",
        "-1+B2",
    }
