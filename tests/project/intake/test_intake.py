"""Where a submission enters: layouts, hostile archives rejected with a reason, caps that hold while streaming.

The streaming figures (``peak_mib``): before, a 1 MiB .tar.gz declaring a 1 GiB GNU long name took 88 s
and 8.2 GB of memory before being refused, 300,000 empty tar members 12.5 s, a zip listing 1,000,000
members 13.6 s and 0.5 GB; now each is refused in under 0.1 s with no memory beyond the interpreter's.
"""

from __future__ import annotations

import gzip
import io
import struct
import tarfile
import zipfile

import pytest

from grader.intake import submission as intake
from grader.intake.submission import IntakeError
from tests.project.support.hostile_inputs import (
    long_header_tgz,
    outcome,
    peak_mib,
    zip64_with_entries,
    zip_of,
)

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
    with pytest.raises(
        intake.IntakeError, match=r"s\.zip: not a valid zip"
    ):  # a folder of one zip is that zip
        intake.take(tmp_path, modules=MODULES)
    (tmp_path / "empty").mkdir()
    with pytest.raises(intake.IntakeError, match="no Python files"):
        intake.take(tmp_path / "empty", modules=MODULES)
    with pytest.raises(intake.IntakeError, match="unsupported"):
        (tmp_path / "x.rar").write_text("?")
        intake.take(tmp_path / "x.rar", modules=MODULES)


# --- archive caps hold while streaming (a bomb costs no memory) ------------------------------------------------------


@pytest.mark.parametrize("kind", ["gnu-longname", "pax"])
def test_an_oversized_extended_header_is_refused_before_it_is_read(tmp_path, kind):
    path = long_header_tgz(tmp_path / "long.tar.gz", kind, 48 << 20)
    peak, result = peak_mib(lambda: intake.take(path, modules=MODULES))
    assert isinstance(result, IntakeError) and "extended header" in str(result), result
    assert peak < 8, f"{peak:.1f} MiB held while refusing a {kind} header"


def test_the_member_count_cap_holds_while_streaming_a_tar(tmp_path):
    header = tarfile.TarInfo("a.py").tobuf()
    path = tmp_path / "many.tar.gz"
    path.write_bytes(gzip.compress(header * 100_000 + b"\0" * 1024, compresslevel=1))
    peak, result = peak_mib(lambda: intake.take(path, modules=MODULES))
    assert isinstance(result, IntakeError) and "more than 1000 members" in str(result), result
    assert peak < 8, f"{peak:.1f} MiB held: the headers were read before the count was checked"


def test_the_zip_member_count_is_read_from_the_end_record_before_the_directory(tmp_path):
    path = zip64_with_entries(tmp_path / "many.zip", 100_000)
    peak, result = peak_mib(lambda: intake.take(path, modules=MODULES))
    assert isinstance(result, IntakeError) and "100000 members" in str(result), result
    assert peak < 8, (
        f"{peak:.1f} MiB held: the central directory was parsed before the count was checked"
    )


def test_a_tar_unpacking_past_the_size_cap_stops_at_the_cap(tmp_path):
    path = tmp_path / "zeros.tar.gz"
    with tarfile.open(path, "w:gz", compresslevel=1) as tf:
        for n in range(10):
            info = tarfile.TarInfo(f"data{n}.bin")
            info.size = 8 << 20
            tf.addfile(info, io.BytesIO(bytes(info.size)))
    result = outcome(path)
    assert isinstance(result, IntakeError) and "more than 64 MiB" in str(result), result


def test_a_zip_member_shorter_than_it_declares_is_refused(tmp_path):
    raw = bytearray(zip_of(tmp_path / "ok.zip", {"softmax.py": b"x = 1\n" * 50}).read_bytes())
    at = raw.index(b"PK\x01\x02")
    size = struct.unpack_from("<L", raw, at + 24)[0]
    struct.pack_into(
        "<L", raw, at + 24, size + 100
    )  # the central directory now overstates the member
    (tmp_path / "liar.zip").write_bytes(bytes(raw))
    assert isinstance(outcome(tmp_path / "liar.zip"), IntakeError)
