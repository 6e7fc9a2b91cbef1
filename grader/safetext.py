"""Student-controlled text made safe once, at the boundary where it enters the trusted side.

Everything a submission can influence (file and member names, student ids taken from folder
names, exception messages, notebook text) passes through :func:`text` or :func:`name` before it
is stored in a scorecard, printed on a progress line or rendered in a report. What is removed:

- lone surrogates (they make ``str.encode("utf-8")`` raise, which once killed a whole report);
- C0 and C1 control characters (terminal escapes; a newline in a name forged progress lines);
- bidirectional overrides and isolates (a name that reads differently from what it is).

Each is replaced by a visible escape (``\\x1b``, ``\\u202e``) so an instructor still sees it was
there.
"""

from __future__ import annotations

import re

_BIDI = "\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069"
_UNSAFE_TEXT = re.compile(f"[\x00-\x08\x0b-\x1f\x7f-\x9f{_BIDI}\ud800-\udfff]")
_UNSAFE_NAME = re.compile(f"[\x00-\x1f\x7f-\x9f{_BIDI}\ud800-\udfff]")


def _escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def text(value: object, limit: int = 4000) -> str:
    """Multi-line text (messages): newlines and tabs kept, everything unsafe escaped, length
    capped."""
    return _UNSAFE_TEXT.sub(_escape, _str(value))[:limit]


def name(value: object, limit: int = 200) -> str:
    """One-line text (ids, file names): newlines and tabs escaped too, length capped."""
    return _UNSAFE_NAME.sub(_escape, _str(value))[:limit]


def _str(value: object) -> str:
    if isinstance(value, bytes):
        return value.decode("utf-8", "backslashreplace")
    try:
        return str(value)
    except Exception:  # noqa: BLE001 - a hostile __str__ must not break the caller
        return "<unprintable>"
