"""Where a submission enters: layouts, and hostile archives rejected with a reason."""

from __future__ import annotations

import io
import tarfile
import zipfile

import pytest

from grader import intake

MODULES = {"softmax", "masks"}


def test_folder_with_exercises_subfolder(tmp_path):
    (tmp_path / "exercises").mkdir()
    (tmp_path / "exercises" / "softmax.py").write_text("x = 1\n")
    (tmp_path / "README.md").write_text("hi")
    sub = intake.take(tmp_path, modules=MODULES)
    assert sub.layout == "exercises-folder" and [f["name"] for f in sub.files] == ["softmax.py"]
    assert len(sub.sha256) == 64
    sub.cleanup()


def test_single_file_named_like_a_module_or_not(tmp_path):
    (tmp_path / "softmax.py").write_text("x = 1\n")
    (tmp_path / "alice.py").write_text("x = 1\n")
    assert intake.take(tmp_path / "softmax.py", modules=MODULES).single_module is None
    assert intake.take(tmp_path / "alice.py", modules=MODULES).single_module == "alice"


def test_zip_and_tar_of_a_folder(tmp_path):
    buf = tmp_path / "s.zip"
    with zipfile.ZipFile(buf, "w") as zf:
        zf.writestr("alice/exercises/softmax.py", "x = 1\n")
    assert intake.take(buf, modules=MODULES).layout == "zip:exercises-folder"
    tgz = tmp_path / "s.tar.gz"
    with tarfile.open(tgz, "w:gz") as tf:
        data = b"x = 1\n"
        info = tarfile.TarInfo("bob/masks.py")
        info.size = len(data)
        tf.addfile(info, io.BytesIO(data))
    assert intake.take(tgz, modules=MODULES).layout == "tar.gz:directory"


@pytest.mark.parametrize("name", ["../evil.py", "/etc/evil.py", "a/../../evil.py"])
def test_zip_path_traversal_is_rejected(tmp_path, name):
    buf = tmp_path / "s.zip"
    with zipfile.ZipFile(buf, "w") as zf:
        zf.writestr(name, "x = 1\n")
    with pytest.raises(intake.IntakeError, match="escapes the archive"):
        intake.take(buf, modules=MODULES)


def test_zip_bomb_and_symlinks_are_rejected(tmp_path):
    bomb = tmp_path / "bomb.zip"
    with zipfile.ZipFile(bomb, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("softmax.py", b"0" * (8 << 20))
    with pytest.raises(intake.IntakeError, match="compression ratio"):
        intake.take(bomb, modules=MODULES)
    tgz = tmp_path / "link.tar.gz"
    with tarfile.open(tgz, "w:gz") as tf:
        info = tarfile.TarInfo("softmax.py")
        info.type, info.linkname = tarfile.SYMTYPE, "/etc/passwd"
        tf.addfile(info)
    with pytest.raises(intake.IntakeError, match="link or device"):
        intake.take(tgz, modules=MODULES)


def test_garbage_and_empty_inputs_say_what_to_do(tmp_path):
    bad = tmp_path / "s.zip"
    bad.write_bytes(b"not a zip")
    with pytest.raises(intake.IntakeError, match="not a valid zip"):
        intake.take(bad, modules=MODULES)
    with pytest.raises(intake.IntakeError, match="no Python files"):
        intake.take(tmp_path, modules=MODULES)
    with pytest.raises(intake.IntakeError, match="unsupported"):
        (tmp_path / "x.rar").write_text("?")
        intake.take(tmp_path / "x.rar", modules=MODULES)
