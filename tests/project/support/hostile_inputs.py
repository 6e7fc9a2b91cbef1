"""Hostile inputs for intake tests, built on the fly (links, FIFOs and bombs cannot live in git), and probes.

``outcome`` is the contract every intake test checks: a :class:`Submission` or an :class:`IntakeError`,
never another exception or a hang; ``peak_mib`` measures what refusing a bomb costs.
"""

from __future__ import annotations

import contextlib
import gzip
import io
import random
import signal
import struct
import tarfile
import tracemalloc
import zipfile
from collections.abc import Callable, Iterator
from pathlib import Path

from grader.intake import submission as intake
from grader.intake.submission import IntakeError, Submission
from tests.project.support.common import ROOT

MODULES = {"softmax", "masks"}


@contextlib.contextmanager
def deadline(seconds: int) -> Iterator[None]:
    """Fail instead of hanging (a FIFO opened for reading blocks until a writer comes)."""

    def expired(*_: object) -> None:
        raise TimeoutError(f"intake still running after {seconds} s")

    old = signal.signal(signal.SIGALRM, expired)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


def outcome(path: Path) -> Submission | IntakeError:
    """What intake makes of ``path``; any other exception fails the test."""
    with deadline(20):
        try:
            sub = intake.take(path, modules=MODULES)
        except IntakeError as exc:
            return exc
    sub.cleanup()
    return sub


def peak_mib(fn: Callable[[], object]) -> tuple[float, object]:
    """Peak Python memory (MiB) while ``fn`` runs, and what it returned or raised."""
    tracemalloc.start()
    try:
        result = fn()
    except Exception as exc:  # noqa: BLE001 - the caller asserts on it
        result = exc
    peak = tracemalloc.get_traced_memory()[1] / (1 << 20)
    tracemalloc.stop()
    return peak, result


def solution(folder: Path, module: str = "softmax") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{module}.py").write_text((ROOT / "solutions" / f"{module}.py").read_text())
    return folder


def zip_of(path: Path, members: dict[str, bytes | None]) -> Path:
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        for name, data in members.items():
            zf.writestr(zipfile.ZipInfo(name) if data is None else name, data or b"")
    return path


def tgz_of(path: Path, members: dict[str, bytes | None], fmt: int = tarfile.PAX_FORMAT) -> Path:
    with tarfile.open(path, "w:gz", format=fmt) as tf:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            if data is None:
                info.type = tarfile.DIRTYPE
            else:
                info.size = len(data)
            tf.addfile(info, io.BytesIO(data or b""))
    return path


def mutants(data: bytes, rng: random.Random, count: int) -> Iterator[bytes]:
    for n in range(count):
        if n % 3 == 0:
            yield data[: rng.randrange(len(data))]
        else:
            mutated = bytearray(data)
            for _ in range(1 + n % 4):
                mutated[rng.randrange(len(mutated))] = rng.randrange(256)
            yield bytes(mutated)


def long_header_tgz(path: Path, kind: str, size: int) -> Path:
    """A small .tar.gz whose first header declares a ``size``-byte GNU long name or pax record."""
    if kind == "gnu-longname":
        head = tarfile.TarInfo("././@LongLink")
        head.type, head.size, fmt = tarfile.GNUTYPE_LONGNAME, size, tarfile.GNU_FORMAT
        body = b"a" * size
    else:
        length = size + len(" path=\n")
        length += len(str(length + len(str(length))))
        head = tarfile.TarInfo("pax")
        head.type, head.size, fmt = tarfile.XHDTYPE, length, tarfile.USTAR_FORMAT
        body = f"{length} path=".encode() + b"a" * size + b"\n"
    with gzip.open(path, "wb", compresslevel=1) as gz:
        gz.write(head.tobuf(format=fmt) + body + b"\0" * (-len(body) % 512))
        gz.write(tarfile.TarInfo("softmax.py").tobuf() + b"\0" * 1024)
    return path


def zip64_with_entries(path: Path, entries: int) -> Path:
    """A zip whose central directory lists one empty member ``entries`` times (zip64 end records)."""
    one = io.BytesIO()
    with zipfile.ZipFile(one, "w") as zf:
        zf.writestr("a.py", "")
    raw = one.getvalue()
    at_dir, at_end = raw.index(b"PK\x01\x02"), raw.index(b"PK\x05\x06")
    local, directory = raw[:at_dir], raw[at_dir:at_end] * entries
    end64 = struct.pack(
        "<4sQ2H2L4Q", b"PK\x06\x06", 44, 45, 45, 0, 0, entries, entries, len(directory), len(local)
    )
    locator = struct.pack("<4sLQL", b"PK\x06\x07", 0, len(local) + len(directory), 1)
    end = struct.pack("<4s4H2LH", b"PK\x05\x06", 0, 0, 0xFFFF, 0xFFFF, 0xFFFFFFFF, 0xFFFFFFFF, 0)
    path.write_bytes(local + directory + end64 + locator + end)
    return path
