"""Versioned JSON Schemas (draft 2020-12): load, check, validate, with clear version errors.

jsonschema is imported lazily: with the optional ``rfc3987_syntax`` installed (nbgrader brings it)
``import jsonschema`` costs about 1.3 s instead of 0.13 s, and we use no IRI formats, so we block
it.
"""

from __future__ import annotations

import functools
import json
import sys
import threading
from importlib import resources
from types import ModuleType
from typing import Any, Protocol

SCHEMAS = {
    "assignments": 1,
    # 2: the attested isolation record, integrity findings' `severity`; 3: `error` tied to `status`
    "scorecard": 3,
    # 2: `cuda` (who was graded with CUDA); 3: integrity findings' `construct` and `severity`
    "summary": 3,
    "shard": 1,  # grader batch --shard's manifest, read by grader merge
    "proof": 1,  # the canary's cached proof (grader.proofs)
    "github-classroom": None,
    "gradescope-results": None,  # the whole results.json contract (grader release --gradescope)
    "classroom50-result": None,  # Classroom 50's result.json (grader release --classroom50)
}

# Older versions a reader still accepts, checked against the current schema: only where a bump added
# rules that every document of that version this grader wrote already met (scorecard 3 ties `error`
# to `status`, and our writers always did), so a hand-edited one that breaks them is refused like a
# current one. Writers emit SCHEMAS'.
OLDER: dict[str, tuple[int, ...]] = {"scorecard": (2,)}


class SchemaError(ValueError):
    """A document does not match its schema; the message names the first offending path."""


class SchemaVersionError(SchemaError):
    """A document declares a schema version this grader cannot read."""

    def __init__(
        self, kind: str, actual: object, expected: int, older: tuple[int, ...] = ()
    ) -> None:
        self.actual_version, self.expected_version = actual, expected
        if isinstance(actual, int) and actual < expected:
            hint = "it is too old: regenerate it with this grader"
        elif isinstance(actual, int):
            hint = "it is too new: upgrade the grader (pip install -U attention-grader)"
        else:
            hint = "it has no usable schema_version"
        accepted = " or ".join(str(v) for v in sorted({expected, *older}))
        super().__init__(f"{kind} schema_version {actual!r} is not {accepted}: {hint}")


# Format libraries jsonschema's format module imports, if installed, for formats our schemas never
# use (they use "date-time" only): nbgrader's dependencies bring them all, 40 of the 100 ms of
# `import jsonschema`. Hidden while it is imported, so their checkers are simply not registered, and
# only then: other code in this process (nbgrader, an LMS client) may still import them. Not while
# another thread runs: its own first import of one of them would fail meanwhile.
UNUSED_FORMAT_LIBRARIES = (
    "fqdn",
    "idna",
    "rfc3987",
    "rfc3986_validator",
    "webcolors",
    "jsonpointer",
    "uri_template",
    "isoduration",
)


def _jsonschema() -> ModuleType:
    sys.modules.setdefault("rfc3987_syntax", None)  # type: ignore[arg-type]  # see module docstring
    alone = "jsonschema" not in sys.modules and threading.active_count() == 1
    hidden = [name for name in UNUSED_FORMAT_LIBRARIES if alone and name not in sys.modules]
    for name in hidden:
        sys.modules[name] = None  # type: ignore[assignment]  # `import name` raises ImportError
    try:
        import jsonschema
    finally:
        for name in hidden:
            if sys.modules.get(name, 0) is None:
                del sys.modules[name]

    # untyped (no py.typed, no stubs installed): typed here as what it is
    module: ModuleType = jsonschema
    return module


def load_schema(kind: str) -> dict[str, Any]:
    """Return the schema document for ``kind`` (``assignments``, ``scorecard``, ...)."""
    if kind not in SCHEMAS:
        raise KeyError(f"unknown schema {kind!r}; known: {', '.join(sorted(SCHEMAS))}")
    text = resources.files("grader.schemas").joinpath(f"{kind}.schema.json").read_text("utf-8")
    schema: dict[str, Any] = json.loads(text)  # our own packaged file: an object by construction
    return schema


@functools.cache
def _validator(kind: str) -> Any:
    js = _jsonschema()
    schema = load_schema(kind)  # our own packaged file, checked against the metaschema by the tests
    return js.Draft202012Validator(schema, format_checker=js.Draft202012Validator.FORMAT_CHECKER)


def validate(kind: str, document: object, *, writing: bool = False) -> None:
    """Raise :class:`SchemaVersionError` or :class:`SchemaError` unless ``document`` is valid. A
    reader accepts the current version and those in :data:`OLDER` (under the current rules);
    ``writing``: only the current."""
    expected = SCHEMAS[kind]
    if expected is not None and isinstance(document, dict):
        older = () if writing else OLDER.get(kind, ())
        version = document.get("schema_version")
        if version != expected:
            if not (version in older and type(version) is int):
                raise SchemaVersionError(kind, version, expected, older)
            document = {
                **document,
                "schema_version": expected,
            }  # an older one, read by today's rules
    message = _checked_elsewhere(kind, document)
    if message is _UNANSWERED:
        message = check(kind, document)
    if message is not None:
        raise SchemaError(str(message))


def check(kind: str, document: object) -> str | None:
    """``document`` against ``kind``'s schema (no version check: :func:`validate` makes it): None
    when valid, else the message of the first offending path."""
    js = _jsonschema()
    error = js.exceptions.best_match(_validator(kind).iter_errors(document))
    return None if error is None else _message(kind, error)


class Elsewhere(Protocol):
    """Where :func:`check` may be made instead of here (:mod:`grader.schema_beside`)."""

    def check(self, kind: str, document: object) -> str | None: ...

    def close(self) -> None: ...


# set for one command by grader.schema_beside: its checks made in a copy that imported jsonschema
elsewhere: Elsewhere | None = None
_UNANSWERED = object()


def _checked_elsewhere(kind: str, document: object) -> object:
    """:data:`elsewhere`'s answer, or ``_UNANSWERED`` (none set, or it failed to answer: then it is
    dropped for the rest of the command and every check is made here)."""
    global elsewhere
    there = elsewhere
    if there is None:
        return _UNANSWERED
    try:
        return there.check(kind, document)
    except (OSError, ValueError, EOFError, TypeError):
        elsewhere = None
        there.close()
        return _UNANSWERED


def _message(kind: str, error: Any) -> str:
    """The first offending path and what is wrong there; a rule tied to another field
    (``if``/``then``) also says the rule, from the failing subschema's description."""
    where = "/".join(str(p) for p in error.absolute_path) or "(top level)"
    tied = {"then", "else"} & set(map(str, error.absolute_schema_path))
    rule = error.schema.get("description") if tied and isinstance(error.schema, dict) else None
    return f"{kind}: at {where}: {error.message}" + (f" ({rule})" if rule else "")
