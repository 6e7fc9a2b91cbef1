"""Code similarity (grader.similarity): a disguised copy is found, independent work and the stubs are not.

Oracles: copies made here by hand from the reference (every identifier the file chooses renamed, the two classes
swapped, comments gone, statements reordered), the project's independently written honest corpus, and the
released stubs.
"""

from __future__ import annotations

import ast
import io
import re
import tokenize
from dataclasses import replace
from pathlib import Path

import pytest

from grader.course import manifest
from grader.similarity import code, match, source
from grader.similarity import summary as evidence
from tests.project.support.common import CORPUS, ROOT

ASSIGNMENT = manifest.load(None, "attention-basics")
RENAMES = {
    "queries": "qs",
    "keys": "ks",
    "values": "vs",
    "scores": "att",
    "weights": "probs",
    "context": "out",
    "allowed": "visible",
    "causal": "lower",
    "B": "nb",
    "T": "nt",
    "H": "nh",
    "hd": "width",
    "x": "inp",
}


def disguised(text: str) -> str:
    """``text`` renamed (:data:`RENAMES`), comments and docstrings dropped, its top-level classes in reverse."""
    out = []
    for tok in tokenize.generate_tokens(io.StringIO(text).readline):
        if tok.type == tokenize.COMMENT:
            continue
        out.append(
            (
                tok.type,
                RENAMES.get(tok.string, tok.string) if tok.type == tokenize.NAME else tok.string,
            )
        )
    renamed = tokenize.untokenize(out)
    tree = ast.parse(renamed)
    classes = [n for n in tree.body if isinstance(n, ast.ClassDef)]
    others = [n for n in tree.body if not isinstance(n, ast.ClassDef)]
    for node in ast.walk(tree):  # docstrings go too
        body = getattr(node, "body", None)
        if (
            isinstance(body, list)
            and body
            and isinstance(body[0], ast.Expr)
            and isinstance(body[0].value, ast.Constant)
        ):
            node.body = body[1:] or [ast.Pass()]  # type: ignore[attr-defined]
    tree.body = others + classes[::-1]
    return ast.unparse(tree)


def folder(root: Path, name: str, files: dict[str, str]) -> tuple[str, Path]:
    (root / name).mkdir(parents=True)
    for module, text in files.items():
        (root / name / f"{module}.py").write_text(text, "utf-8")
    return name, root / name


def reference(module: str) -> str:
    return (ROOT / "solutions" / f"{module}.py").read_text("utf-8")


def test_a_renamed_reordered_copy_is_paired_with_its_original(tmp_path):
    original = reference("multihead_attention")
    copy = disguised(original)
    assert "queries" not in copy and copy.index("class MultiHeadAttention(") < copy.index(
        "class MultiHeadAttentionWrapper"
    )
    honest = CORPUS / "honest" / "mha_einsum_fused" / "multihead_attention.py"
    entries = [
        folder(tmp_path, "orig", {"multihead_attention": original}),
        folder(tmp_path, "copy", {"multihead_attention": copy}),
        folder(tmp_path, "other", {"multihead_attention": honest.read_text("utf-8")}),
    ]
    pairs, unread = evidence.code_pairs(
        entries=entries, assignment=ASSIGNMENT, exercise_ids=["multihead_attention"]
    )
    assert unread == []
    assert [(p["a"], p["b"], p["exercise"]) for p in pairs] == [
        ("copy", "orig", "multihead_attention")
    ]
    assert pairs[0]["share"] >= 0.9 and pairs[0]["matched_tokens"] >= 200
    fragment = pairs[0]["fragments"][0]
    assert any(
        new in fragment["a"]["text"] and old in fragment["b"]["text"]
        for old, new in RENAMES.items()
    )  # side by side, each as written


def test_independent_solutions_are_not_paired(tmp_path):
    """The reference solutions beside every honest-corpus style: the only pairs are the single-file homework's (the
    reference cut into one file), the one that is not independent work."""
    entries = [("reference", ROOT / "solutions")]
    entries += [(p.name, p) for p in sorted((CORPUS / "honest").iterdir()) if p.is_dir()]
    assert len(entries) > 30
    pairs, unread = evidence.code_pairs(entries=entries, assignment=ASSIGNMENT)
    assert unread == []
    homework = {
        p["exercise"] for p in pairs if (p["a"], p["b"]) == ("reference", "single_file_homework")
    }
    # softmax: the reference's few lines are what two honest authors of this corpus wrote alike (the course's
    # idiom, left out in a class this small): equal to honest work is no evidence of copying
    assert homework == set(ASSIGNMENT.ids()) - {"softmax"}
    others = [
        (p["exercise"], p["a"], p["b"])
        for p in pairs
        if "single_file_homework" not in (p["a"], p["b"])
    ]
    # the one author's two styles share only one-line functions, which (these folders being the idiom's own
    # corpus) are idiom: not listed (benchmarks/plagiarism_small.py measures with the idiom held out)
    assert others == []


def test_the_stub_is_given_code_never_evidence():
    stub = (ROOT / "exercises" / "softmax.py").read_text("utf-8")
    [ex] = source.exercises(ASSIGNMENT, ["softmax"])
    keep, given = {"keep": ex.keep, "attrs": ex.attrs}, ex.given
    naive = "    return x.exp() / x.exp().sum(dim=dim, keepdim=True)"
    one = stub.replace(
        '    raise NotImplementedError("TODO: implement softmax_naive in softmax.py")', naive, 1
    )
    assert one != stub
    docs = [
        match.doc("stub1", stub, **keep),
        match.doc("stub2", stub, **keep),
        match.doc("one", one, **keep),
        match.doc(
            "two",
            one.replace(naive, "    e = torch.exp(x)\n    return e / e.sum(dim, keepdim=True)"),
            **keep,
        ),
    ]
    assert (
        match.compare(docs, given) == []
    )  # the whole stub shared by all four, untouched or filled in (own ways)
    same = [
        match.Doc(k, code.tokens(text, None, canonical=True, **keep), text.splitlines())
        for k, text in (("one", one), ("two", one.replace("x.exp()", "torch.exp(x)")))
    ]
    canon_given = code.tokens(stub, None, canonical=True, **keep)
    assert [(p.a.key, p.b.key) for p in match.compare(same, canon_given)] == [
        ("one", "two")
    ]  # torch.exp(x) is x.exp()
    assert (
        match.compare(docs, []) != []
    )  # the same class with nothing given: the stub alone pairs them


def test_the_untouched_stubs_pair_with_no_one(tmp_path):
    entries = [("s1", ROOT / "exercises"), ("s2", ROOT / "exercises"), ("ref", ROOT / "solutions")]
    pairs, _ = evidence.code_pairs(entries=entries, assignment=ASSIGNMENT)
    assert pairs == []


def test_a_single_file_is_cut_per_exercise(tmp_path):
    homework = CORPUS / "honest" / "single_file_homework"
    [py] = sorted(homework.glob("*.py"))
    found = source.exercises(ASSIGNMENT)
    source.read_class([("one", py), ("two", py)], found)
    per = {ex.id: len(ex.docs) for ex in found}
    text = py.read_text("utf-8")
    for ex in found:  # an exercise the file defines: both students; one it does not: neither
        assert per[ex.id] == (2 if ex.names & code.stub_names(text) else 0), ex.id


@pytest.mark.parametrize("encoding", ["latin-1", "utf-8-sig", "cp1252"])
def test_odd_encodings_are_read_as_python_reads_them(tmp_path, encoding):
    text = disguised(reference("causal_attention"))
    cookie = "" if encoding == "utf-8-sig" else f"# -*- coding: {encoding} -*-\n"
    body = cookie + "# café, naïve\n" + text
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "causal_attention.py").write_bytes(body.encode(encoding))
    entries = [
        ("a", tmp_path / "a"),
        folder(tmp_path, "b", {"causal_attention": reference("causal_attention")}),
    ]
    pairs, unread = evidence.code_pairs(
        entries=entries, assignment=ASSIGNMENT, exercise_ids=["causal_attention"]
    )
    assert unread == [] and [(p["a"], p["b"]) for p in pairs] == [("a", "b")]


def test_undecodable_and_untokenizable_files_are_skipped_not_fatal(tmp_path):
    bad = {"causal_attention": "x = '''never closed\n" + "y = 1\n" * 50}
    entries = [folder(tmp_path, "unterminated", bad), ("ref", ROOT / "solutions")]
    (tmp_path / "utf16").mkdir()
    (tmp_path / "utf16" / "causal_attention.py").write_bytes(
        reference("causal_attention").encode("utf-16")
    )
    entries.append(("utf16", tmp_path / "utf16"))
    pairs, unread = evidence.code_pairs(
        entries=entries, assignment=ASSIGNMENT, exercise_ids=["causal_attention"]
    )
    assert pairs == [] and unread == []
    assert code.decode(reference("causal_attention").encode("utf-16")) is None


def test_a_huge_copied_file_is_bounded(tmp_path):
    body = disguised(reference("causal_attention"))
    huge = (
        body + "\n" + "".join(f"v{i} = inp_{i} * {i} + {i % 7}\n" for i in range(120_000))
    )  # > 2 MB
    assert len(huge) > 2_000_000
    entries = [
        folder(tmp_path, "big", {"causal_attention": huge + "#" + "é" * 300_000}),
        folder(tmp_path, "ref", {"causal_attention": reference("causal_attention")}),
    ]
    found = source.exercises(ASSIGNMENT, ["causal_attention"])
    source.read_class(entries, found)
    assert len(found[0].docs[0].tokens) <= code.MAX_TOKENS
    pairs, _ = evidence.code_pairs(
        entries=entries, assignment=ASSIGNMENT, exercise_ids=["causal_attention"]
    )
    for p in pairs:
        for f in p["fragments"]:
            for side in (f["a"], f["b"]):
                assert side["text"].count("\n") < evidence.FRAGMENT_LINES
                assert max(map(len, side["text"].split("\n"))) <= evidence.LINE_CHARS + 1


def test_hostile_text_in_matched_code_stays_text_in_the_fragments(tmp_path):
    payload = '"</pre><script>alert(1)</script>"'
    hostile = re.sub(
        r"(\n\s+)(return )", r"\1tag = " + payload + r"\1\2", reference("causal_attention"), count=1
    )
    assert payload in hostile
    entries = [
        folder(tmp_path, "a", {"causal_attention": hostile}),
        folder(tmp_path, "b", {"causal_attention": disguised(hostile)}),
    ]
    pairs, _ = (
        evidence.code_pairs(  # without the idiom, whose gaps cut the payload's fragment short
            entries=entries,
            assignment=ASSIGNMENT,
            exercise_ids=["causal_attention"],
            settings=replace(match.Settings(), idiom=False),
        )
    )
    assert any(
        "<script>" in s["text"] for p in pairs for f in p["fragments"] for s in (f["a"], f["b"])
    )  # as written


def test_the_example_class_shows_peggys_copy_of_bob():
    klass = ROOT / "examples" / "submissions"
    entries = [(p.name.split(".")[0], p) for p in sorted(klass.iterdir())]
    pairs, unread = evidence.code_pairs(entries=entries, assignment=ASSIGNMENT)
    assert unread == []
    peggy = [(p["exercise"], p["a"], p["b"]) for p in pairs if "peggy" in (p["a"], p["b"])]
    assert peggy == [
        ("multihead_attention", "bob", "peggy")
    ]  # her softmax and causal attention are her own


@pytest.mark.parametrize(
    "hostile",
    [
        "x = "
        + "(" * 300
        + "1"
        + ")" * 300
        + "\n",  # deeper than the parser allows: read as written
        "y = "
        + " + ".join(["a"] * 30_000)
        + "\n",  # parses, deeper than the rewrites' recursion: read as written
        "z = [" + "[" * 90 + "]" * 90 + "]\n" + "a\x00b = 1\n",  # a NUL byte: tokenized up to it
        "w = 1\n" * 100_000,  # 10^5 identical statements: over MAX_CANONICAL, bounded by MAX_TOKENS
    ],
)
def test_hostile_code_is_read_bounded_and_never_raises(hostile):
    for canonical in (False, True):
        toks = code.tokens(hostile, canonical=canonical)
        assert len(toks) <= code.MAX_TOKENS
        assert all(1 <= t.line <= t.end <= hostile.count("\n") + 1 for t in toks)


def test_a_hostile_copy_still_pairs_and_its_fragments_stay_in_the_file():
    body = (ROOT / "solutions" / "causal_attention.py").read_text("utf-8")
    noisy = (
        body.replace("torch.matmul(", "(").replace("keys.transpose(1, 2)", "keys.mT")
        + "def broken(:\n"
    )
    docs = [
        match.Doc(k, code.tokens(text, canonical=True), text.splitlines())
        for k, text in (("a", body), ("b", noisy))
    ]
    # b stops parsing at its end: read canonical up to there, as written after
    [pair] = match.compare(docs, [])
    for frag in pair.fragments:
        assert 1 <= frag.b[0] <= frag.b[1] <= noisy.count("\n") + 1
