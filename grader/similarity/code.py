"""A submission's code for one exercise, as the token stream the comparison reads (renaming and
layout undone).

The source is read as Python reads it (its coding cookie or BOM, else UTF-8; a file Python cannot
decode has no code to compare). :func:`tokens` keeps what a student cannot change without changing
the program: keywords, operators, numbers, attribute names (``.exp``, ``.masked_fill``: the torch
API; not those the file assigns, ``self.hd = ...``) and keyword-argument names; every other
identifier (variables, parameters, functions, classes, import aliases, attributes of its own)
becomes ``V``, every string ``S``. Comments, docstrings, blank lines and indentation are dropped, so
renaming, re-commenting and re-spacing change nothing. Each token keeps its line, for the fragments
the report shows.

A file holding every exercise (one ``.py`` or notebook) is cut per exercise: the top-level
definitions the exercise's stub names, and the helpers they use (:func:`exercise_source`).
"""

from __future__ import annotations

import ast
import builtins
import io
import keyword
import re
import tokenize
from dataclasses import dataclass

from grader.similarity import canon

# per file and exercise: a generated 1 MB file is compared on its first 20,000 tokens
MAX_TOKENS = 20_000
# characters: a bigger file (no student's attention code) is read as it is, not parsed
MAX_CANONICAL = 128 * 1024
_DROP = {"COMMENT", "NL", "INDENT", "DEDENT", "ENCODING", "ENDMARKER", "TYPE_COMMENT"}
_STATEMENT_START = {"NEWLINE", "INDENT", "DEDENT", "ENCODING", None}
_OPEN, _CLOSE = frozenset("([{"), frozenset(")]}")
_KEEP_NAMES = (  # ``_`` is a soft keyword only inside ``match``: elsewhere a name like any
    frozenset(dir(builtins)) | frozenset(keyword.kwlist) | frozenset(keyword.softkwlist)
) - {"_"}


@dataclass(frozen=True)
class Token:
    text: str  # the normalised token
    line: int  # 1-based line in the student's file where it starts
    end: int  # line where it ends


def decode(data: bytes) -> str | None:
    """``data`` as Python would decode the module (``None``: it cannot)."""
    try:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
        return data.decode(encoding)
    except (SyntaxError, LookupError, UnicodeDecodeError):
        return None


def tokens(
    source: str,
    lines: set[int] | None = None,
    keep: frozenset[str] = frozenset(),
    attrs: frozenset[str] = frozenset(),
    canonical: bool = False,
) -> list[Token]:
    """The normalised tokens of ``source`` (only those starting on ``lines`` when given); ``keep``:
    names that stay as they are (:func:`prescribed_names`), ``attrs``: attribute names that do
    (:func:`given_names`). A file that stops tokenizing part-way is read up to there. ``canonical``
    (off: it lowered both precision and recall on the benchmark, see ``benchmarks/similarity.py``):
    code that parses is read in its canonical form (:mod:`grader.similarity.canon`), each token
    keeping the lines of the statement it came from."""
    if not canonical or len(source) > MAX_CANONICAL:
        return raw_tokens(source, lines, keep, attrs)
    found, cut = canon.canonical(source, lines), 0  # cut: the first line read as written (0: none)
    if (
        found is None
        # a file that stops parsing (on purpose?): the part before in canonical form, then as
        # written
    ):
        cut = _bad_line(source)
        head = "".join(source.splitlines(keepends=True)[: cut - 1])
        found = canon.canonical(head, lines) if 1 < cut <= source.count("\n") + 1 else None
    if found is None:
        return raw_tokens(source, lines, keep, attrs)
    text, spans = found
    out = [
        Token(t.text, spans[t.line - 1][0], spans[t.end - 1][1])
        for t in raw_tokens(text, None, keep, attrs)
    ]
    if cut:
        rest = {n for n in range(cut, source.count("\n") + 2) if lines is None or n in lines}
        out += raw_tokens(source, rest, keep, attrs)
    return out[:MAX_TOKENS]


def _bad_line(source: str) -> int:
    """The line where ``source`` stops parsing (past its end: it parses, or fails for depth, not a
    line)."""
    try:
        ast.parse(source)
    except SyntaxError as exc:
        return exc.lineno or 1
    except (ValueError, RecursionError, MemoryError):
        return 1
    return source.count("\n") + 2


def raw_tokens(
    source: str, lines: set[int] | None, keep: frozenset[str], attrs: frozenset[str]
) -> list[Token]:
    """:func:`tokens` of ``source`` as it is written (no canonical form)."""
    out: list[Token] = []
    raw: list[tokenize.TokenInfo] = []
    try:
        for tok in tokenize.generate_tokens(io.StringIO(source).readline):
            raw.append(tok)
            if len(raw) > 4 * MAX_TOKENS:
                break
    except (
        tokenize.TokenError,
        SyntaxError,
        ValueError,
    ):  # unterminated string, bad dedent, null byte...
        pass
    kinds = [tokenize.tok_name[t.type] for t in raw]
    defined = _assigned_attributes(raw, kinds) - attrs
    depth = 0
    for i, tok in enumerate(raw):
        kind = kinds[i]
        if kind in _DROP or (lines is not None and tok.start[0] not in lines):
            continue
        if kind == "OP":
            depth = (
                depth + 1
                if tok.string in _OPEN
                else max(depth - 1, 0)
                if tok.string in _CLOSE
                else depth
            )
        text = _normal(raw, kinds, i, depth, defined, keep)
        if text and not (
            text == ";" and (not out or out[-1].text == ";")
        ):  # one ; for blank or docstring lines
            out.append(Token(text, tok.start[0], tok.end[0]))
            if len(out) >= MAX_TOKENS:
                break
    return out


def _assigned_attributes(raw: list[tokenize.TokenInfo], kinds: list[str]) -> set[str]:
    """Attribute names the file itself assigns (``self.head_dim = ...``): the student's names,
    renamed like any."""
    return {
        raw[i].string
        for i in range(1, len(raw) - 1)
        if kinds[i] == "NAME" and raw[i - 1].string == "." and raw[i + 1].string == "="
    }


def _normal(
    raw: list[tokenize.TokenInfo],
    kinds: list[str],
    i: int,
    depth: int,
    defined: set[str],
    keep: frozenset[str],
) -> str:
    """The normalised text of token ``i`` ("" to drop it)."""
    tok, kind = raw[i], kinds[i]
    if kind == "NAME":
        before = _significant(raw, kinds, i, -1)
        after = _significant(raw, kinds, i, 1)
        attribute = before is not None and before.string == "."
        kept = (
            tok.string in _KEEP_NAMES
            or tok.string in keep
            or (attribute and tok.string not in defined)
            or (depth > 0 and after is not None and after.string == "=")
        )
        return tok.string if kept else "V"
    if kind == "STRING" or kind.startswith("FSTRING"):
        return (
            ""
            if _is_docstring(raw, kinds, i)
            else ("S" if kind in ("STRING", "FSTRING_START") else "")
        )
    if kind == "NEWLINE":
        return ";"
    return tok.string.strip()  # operators, numbers, and what does not tokenize (``$``)


def _significant(
    raw: list[tokenize.TokenInfo], kinds: list[str], i: int, step: int
) -> tokenize.TokenInfo | None:
    j = i + step
    while 0 <= j < len(raw) and kinds[j] in _DROP:
        j += step
    return raw[j] if 0 <= j < len(raw) else None


def _is_docstring(raw: list[tokenize.TokenInfo], kinds: list[str], i: int) -> bool:
    """A string that is a statement on its own (a docstring, or a string used as a comment)."""
    j = i - 1
    while j >= 0 and kinds[j] in ("NL", "COMMENT"):
        j -= 1
    starts = j < 0 or kinds[j] in _STATEMENT_START
    k = i + 1
    while k < len(raw) and kinds[k] in ("STRING", "COMMENT"):  # implicit concatenation
        k += 1
    return starts and (k >= len(raw) or kinds[k] in ("NEWLINE", "ENDMARKER"))


def exercise_lines(source: str, names: set[str]) -> set[int] | None:
    """Lines of the top-level definitions named ``names`` and of the top-level definitions they use,
    transitively (``None``: the file does not parse, so it is compared whole)."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    defined = {
        n.name: n
        for n in tree.body
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
    }
    wanted, todo = set(), [n for n in names if n in defined]
    while todo:
        name = todo.pop()
        if name in wanted:
            continue
        wanted.add(name)
        todo += [
            n.id for n in ast.walk(defined[name]) if isinstance(n, ast.Name) and n.id in defined
        ]
    lines: set[int] = set()
    for name in wanted:
        node = defined[name]
        first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
        lines.update(range(first, (node.end_lineno or node.lineno) + 1))
    return lines


def given_names(stub: str) -> frozenset[str]:
    """Every word of the exercise's stub, its docstrings included: the attribute names the exercise
    prescribes (``self.W_query``, ``self.mask``) are the same in every submission, and kept after a
    ``.``, not turned into ``V``. A local variable named like a word of the docstring (``queries``,
    ``T``) is the student's choice: renamed."""
    return frozenset(re.findall(r"[A-Za-z_][A-Za-z0-9_]*", stub))


def prescribed_names(stub: str) -> frozenset[str]:
    """The names the stub's code makes every submission use wherever they appear: its top-level
    functions and classes (the grader imports them) and the modules it imports (``torch``, ``nn``,
    ``math``)."""
    try:
        tree = ast.parse(stub)
    except SyntaxError:
        return frozenset()
    names = set(stub_names(stub))
    for node in tree.body:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((a.asname or a.name).split(".")[0] for a in node.names)
    return frozenset(names)


def stub_names(stub: str) -> set[str]:
    """The top-level functions and classes a stub asks for."""
    try:
        tree = ast.parse(stub)
    except SyntaxError:
        return set()
    return {
        n.name
        for n in tree.body
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
    }
