"""Unpack a hostile ``.zip`` or ``.tar.gz`` with every cap checked while streaming, never after.

``tarfile.getmembers()`` and ``extractall()`` read a whole archive before any check can run: a 1 MiB
``.tar.gz`` declaring a 1 GiB GNU long name cost 1.3 GB of memory, 300,000 empty members 15 s. So
tar is read as a stream (``r|``) over a decompressed source that refuses to give more than the
size cap, extended headers (pax, GNU long names) larger than :data:`MAX_HEADER_BYTES` are refused
before they are read, and members are counted as they come. A zip's member count and central
directory size are read from its end record before :class:`zipfile.ZipFile` parses the directory,
and each member is copied in chunks with its real size compared to the declared one. Only regular
files and folders are written (by this module, not by ``extract``), inside ``dest``; members inside
the folders a student's tools make (``.venv`` with its links, ``.git``) are counted against the caps
and skipped.
"""

from __future__ import annotations

import bz2
import gzip
import io
import lzma
import tarfile
import zipfile
from pathlib import Path, PurePosixPath
from typing import IO, BinaryIO

from grader import safetext
from grader.safefs import (
    MAX_MEMBERS,
    MAX_NAME_CHARS,
    MAX_RATIO,
    MAX_TOTAL_BYTES,
    TOOL_FOLDERS,
    IntakeError,
    label,
    open_regular,
)

MAX_HEADER_BYTES = 64 << 10  # one pax header or GNU long name/link
MAX_DIRECTORY_BYTES = 1 << 20  # a zip's central directory
_STREAM_BYTES = MAX_TOTAL_BYTES + (MAX_MEMBERS + 8) * 8 * tarfile.BLOCKSIZE  # + headers and padding
_CHUNK = 1 << 16
_EXTENDED = (
    tarfile.GNUTYPE_LONGNAME,
    tarfile.GNUTYPE_LONGLINK,
    tarfile.XHDTYPE,
    tarfile.XGLTYPE,
    tarfile.SOLARIS_XHDTYPE,
)


def unpack(path: Path, dest: Path, kind: str) -> None:
    """Unpack archive ``path`` (``zip`` or ``tar.gz``) into the empty folder ``dest``."""
    try:
        with open_regular(path) as fh:
            (_unzip if kind == "zip" else _untar)(fh, dest)
    except IntakeError:
        raise
    except Exception as exc:  # noqa: BLE001 - whatever a malformed archive raises, it is the student's archive
        raise IntakeError(
            f"{label(path)}: not a valid {kind} archive ({type(exc).__name__}: "
            f"{safetext.name(exc, 300)}); make it again with zip or tar"
        ) from None


class _Budget:
    """Members and bytes taken so far; every cap is checked as each member arrives."""

    def __init__(self) -> None:
        self.members = self.bytes = 0

    def admit(self, name: str, size: int, compressed: int | None = None) -> PurePosixPath:
        self.members += 1
        if self.members > MAX_MEMBERS:
            raise IntakeError(f"archive has more than {MAX_MEMBERS} members")
        shown = safetext.name(name)
        if len(name) > MAX_NAME_CHARS or "\x00" in name:
            raise IntakeError(
                f"archive member {shown!r}: name longer than {MAX_NAME_CHARS} characters or holding NUL"
            )
        pure = PurePosixPath(name.replace("\\", "/"))
        if pure.is_absolute() or ".." in pure.parts or name.startswith(("/", "\\")):
            raise IntakeError(
                f"archive member {shown!r} escapes the archive (absolute path or '..')"
            )
        self.bytes += max(size, 0)
        if self.bytes > MAX_TOTAL_BYTES:
            raise IntakeError(f"archive unpacks to more than {MAX_TOTAL_BYTES >> 20} MiB")
        if compressed is not None and size > 1 << 16 and size > MAX_RATIO * max(compressed, 1):
            raise IntakeError(
                f"archive member {shown!r} has a compression ratio over {MAX_RATIO} (zip bomb?)"
            )
        return pure


def _target(dest: Path, pure: PurePosixPath) -> Path | None:
    parts = [p for p in pure.parts if p not in ("", ".")]
    return dest.joinpath(*parts) if parts else None


def _write(src: IO[bytes], dest: Path, pure: PurePosixPath, declared: int) -> None:
    """Copy one member in chunks; more or fewer bytes than declared is refused."""
    target = _target(dest, pure)
    if target is None:
        return
    target.parent.mkdir(parents=True, exist_ok=True)
    written = 0
    with open(target, "wb") as out:  # our own folder, holding only what this module wrote
        while chunk := src.read(min(_CHUNK, declared - written + 1)):
            written += len(chunk)
            if written > declared:
                raise IntakeError(
                    f"archive member {safetext.name(str(pure))!r} is larger than it declares"
                )
            out.write(chunk)
    if written != declared:
        raise IntakeError(f"archive member {safetext.name(str(pure))!r} is truncated")


def _mkdir(dest: Path, pure: PurePosixPath) -> None:
    target = _target(dest, pure)
    if target is not None:
        target.mkdir(parents=True, exist_ok=True)


def _tools(pure: PurePosixPath) -> bool:
    """A member inside a folder a student's tools made (a ``.venv`` and its links, ``.git``):
    counted, never written."""
    return not TOOL_FOLDERS.isdisjoint(pure.parts)


def _link_or_device(name: str) -> IntakeError:
    return IntakeError(
        f"archive member {safetext.name(name)!r} is a link or device; "
        "archive regular files and folders only"
    )


# --- zip ---------------------------------------------------------------------------------------


def _unzip(fh: BinaryIO, dest: Path) -> None:
    _check_directory(fh)
    budget = _Budget()
    with zipfile.ZipFile(fh) as zf:
        for info in zf.infolist():
            pure = budget.admit(info.filename, info.file_size, info.compress_size)
            if _tools(pure):
                continue
            if (info.external_attr >> 16) & 0o170000 not in (0, 0o100000, 0o040000):
                raise _link_or_device(info.filename)
            if info.is_dir():
                _mkdir(dest, pure)
                continue
            with zf.open(info) as src:
                _write(src, dest, pure, info.file_size)


def _check_directory(fh: BinaryIO) -> None:
    """Member count and central directory size from the end record, before anything parses the
    directory."""
    # zipfile's private end-record reader and field indexes: typeshed has no stubs for them
    end = zipfile._EndRecData(fh)  # type: ignore[attr-defined]
    if end is None:
        raise zipfile.BadZipFile("no end of central directory record")
    members = end[zipfile._ECD_ENTRIES_TOTAL]  # type: ignore[attr-defined]
    if members > MAX_MEMBERS:
        raise IntakeError(f"archive has {members} members, more than {MAX_MEMBERS}")
    if end[zipfile._ECD_SIZE] > MAX_DIRECTORY_BYTES:  # type: ignore[attr-defined]
        raise IntakeError(
            f"archive's central directory is larger than {MAX_DIRECTORY_BYTES >> 20} MiB"
        )
    fh.seek(0)


# --- tar ---------------------------------------------------------------------------------------


class _CappedInfo(tarfile.TarInfo):
    """A tar header whose extended headers (pax, GNU long names) are size-checked before being
    read."""

    def _proc_member(self, tarfile_: tarfile.TarFile) -> tarfile.TarInfo:
        if self.type in _EXTENDED and self.size > MAX_HEADER_BYTES:
            raise IntakeError(
                f"archive has an extended header (long name or pax) of {self.size} bytes, "
                f"more than {MAX_HEADER_BYTES >> 10} KiB"
            )
        info: tarfile.TarInfo = super()._proc_member(tarfile_)  # type: ignore[misc]  # private: not in typeshed
        return info


class _Bounded(io.RawIOBase):
    """The decompressed archive, refusing to give more than ``limit`` bytes (decompression
    bombs)."""

    def __init__(self, raw: BinaryIO, limit: int) -> None:
        super().__init__()
        self.raw, self.left = raw, limit

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: bytearray | memoryview) -> int:  # type: ignore[override]
        if self.left <= 0:
            raise IntakeError(f"archive unpacks to more than {MAX_TOTAL_BYTES >> 20} MiB")
        data = self.raw.read(min(len(buffer), self.left, _CHUNK))
        buffer[: len(data)] = data
        self.left -= len(data)
        return len(data)


def _decompressed(fh: BinaryIO) -> BinaryIO:
    head = fh.read(6)
    fh.seek(0)
    if head.startswith(b"\x1f\x8b"):
        return gzip.GzipFile(fileobj=fh, mode="rb")  # type: ignore[return-value]
    if head.startswith(b"BZh"):
        return bz2.BZ2File(fh)  # type: ignore[return-value]
    if head.startswith(b"\xfd7zXZ\x00"):
        return lzma.LZMAFile(fh)  # type: ignore[return-value]
    return fh


def _untar(fh: BinaryIO, dest: Path) -> None:
    budget = _Budget()
    source = _Bounded(_decompressed(fh), _STREAM_BYTES)
    with tarfile.open(fileobj=source, mode="r|", tarinfo=_CappedInfo) as tf:
        while (
            member := tf.next()
        ) is not None:  # one header at a time: caps hold before the next is read
            pure = budget.admit(member.name, member.size)
            if _tools(pure):
                pass
            elif member.isdir():
                _mkdir(dest, pure)
            elif member.isfile():
                _write(tf.extractfile(member) or io.BytesIO(), dest, pure, member.size)
            else:
                raise _link_or_device(member.name)
            tf.members.clear()  # type: ignore[attr-defined]  # a stream needs no index of what has gone by (not in typeshed)
