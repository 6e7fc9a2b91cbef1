"""Just enough PNG decoding (8-bit RGB/RGBA, not interlaced: what Chromium's screenshots are) to compare a
screenshot's content without numpy or Pillow."""

from __future__ import annotations

import struct
import zlib
from collections import Counter
from pathlib import Path


def _paeth(a: int, b: int, c: int) -> int:
    p = a + b - c
    pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
    return a if pa <= pb and pa <= pc else (b if pb <= pc else c)


def _unfilter(kind: int, line: bytearray, prev: bytes, bpp: int) -> bytearray:
    for i in range(len(line)):
        left = line[i - bpp] if i >= bpp else 0
        if kind == 1:
            line[i] = (line[i] + left) & 0xFF
        elif kind == 2:
            line[i] = (line[i] + prev[i]) & 0xFF
        elif kind == 3:
            line[i] = (line[i] + ((left + prev[i]) >> 1)) & 0xFF
        elif kind == 4:
            line[i] = (line[i] + _paeth(left, prev[i], prev[i - bpp] if i >= bpp else 0)) & 0xFF
    return line


def colours(path: Path) -> tuple[int, int, Counter[tuple[int, int, int]]]:
    """(width, height, how many pixels of each RGB colour)."""
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    pos, idat, header = 8, b"", b""
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos : pos + 8])
        chunk = data[pos + 8 : pos + 8 + length]
        header = chunk if kind == b"IHDR" else header
        idat += chunk if kind == b"IDAT" else b""
        pos += 12 + length
    width, height, depth, ctype, _, _, interlace = struct.unpack(">IIBBBBB", header)
    assert depth == 8 and ctype in (2, 6) and interlace == 0, (depth, ctype, interlace)
    bpp = 3 if ctype == 2 else 4
    raw, stride, prev = zlib.decompress(idat), width * bpp, bytes(width * bpp)
    counts: Counter[tuple[int, int, int]] = Counter()
    for y in range(height):
        start = y * (stride + 1)
        line = _unfilter(raw[start], bytearray(raw[start + 1 : start + 1 + stride]), prev, bpp)
        counts.update(zip(line[0::bpp], line[1::bpp], line[2::bpp]))
        prev = bytes(line)
    return width, height, counts
