"""What a batch leaves in its folder besides the scorecards: gradebook.csv, summary.json, LMS exports.

With a roster (:mod:`grader.intake.roster`) the gradebook gains the name, email and LMS id of each
student, and a roster student with no submission gets a row with 0 and status ``missing``; Canvas and
Moodle files come from :mod:`grader.exports.lms`.

Every output must survive any scorecard, old ones on disk included: each card is passed through
:func:`clean_tree` (:mod:`grader.safetext` on every string: no lone surrogate can break an encoder,
no control character reaches a page or a terminal) and files are written with encoding errors
escaped. CSV cells that a spreadsheet would run as a formula are escaped (OWASP CSV injection).
"""

from __future__ import annotations

import csv
import io
import json
import os
import re
import statistics
import tempfile
from collections import defaultdict
from pathlib import Path
from typing import Any

from grader import __version__, safetext, schema
from grader.course import manifest
from grader.errors import GraderFault
from grader.exports import gradescope, lms, students
from grader.exports import rows as exports
from grader.intake import submission as intake
from grader.intake.classfolder import safe_id
from grader.intake.roster import Student
from grader.sandbox.levels import BackendName
from grader.scoring import scorecard

FORMATS = ("gradescope", "github-classroom", "csv", *lms.FORMATS)
ROSTER_COLUMNS = ("name", "email", "lms_id")
_FORMULA = ("=", "+", "-", "@", "\t", "\r", "\n")  # OWASP: a cell starting so may run as a formula
_FILE_KEY = re.compile(r"[A-Za-z0-9_@+-][A-Za-z0-9._@+-]*")
Named = list[tuple[str, dict[str, Any]]]


def clean_tree(value: Any) -> Any:
    """``value`` with every string (keys too) passed through ``safetext.text``, uncapped."""
    if isinstance(value, str):
        return safetext.text(value, 1 << 30)
    if isinstance(value, dict):
        return {clean_tree(k): clean_tree(v) for k, v in value.items()}
    if isinstance(value, list):
        return [clean_tree(v) for v in value]
    return value


def _cleaned(named: Named) -> Named:
    return [(safetext.name(key), clean_tree(card)) for key, card in named]


def csv_cell(value: object) -> object:
    """A text cell starting with ``= + - @``, tab or CR gets a leading ``'``; numbers stay numbers."""
    if isinstance(value, str) and value.startswith(_FORMULA):
        return "'" + value
    return value


def write_text(path: Path, text: str) -> None:
    """Atomic write (temp file in the same folder, then rename)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", errors="backslashreplace", newline="") as fh:
            fh.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def gradebook_csv(
    named: Named, exercise_ids: list[str], roster: list[Student] | None = None
) -> str:
    """One row per student (``exports.csv_row``), keyed by the scorecard's name, every cell escaped.

    With ``roster``: its columns after ``student``, roster order first, a ``missing`` row (0) for each
    roster student without a submission, then the submissions whose login is not on the roster.
    """
    buffer = io.StringIO()
    fields = list(exports.csv_row(_blank(exercise_ids), exercise_ids))
    if roster is not None:
        fields[1:1] = ROSTER_COLUMNS
    writer = csv.DictWriter(buffer, fieldnames=[csv_cell(f) for f in fields], lineterminator="\n")
    writer.writeheader()
    cleaned = _cleaned(named)
    lines = (
        lms.join(cleaned, roster)
        if roster is not None
        else [lms.Line(k, c, None) for k, c in cleaned]
    )
    for line in lines:
        row = exports.csv_row(line.card, exercise_ids) if line.card else _missing(exercise_ids)
        row["student"] = line.key
        if roster is not None:
            row.update({c: getattr(line.student, c, "") for c in ROSTER_COLUMNS})
        writer.writerow({csv_cell(k): csv_cell(row.get(k, "")) for k in fields})
    return buffer.getvalue()


def _missing(exercise_ids: list[str]) -> dict[str, Any]:
    return {
        **{ex: 0 for ex in exercise_ids},
        "total": 0,
        "max_score": "",
        "status": "missing",
        "error": "",
        "isolation": "",
        "sha256": "",
        "seed": "",
    }


def _blank(exercise_ids: list[str]) -> dict[str, Any]:
    return {
        "exercises": [],
        "submission": {"path": "", "sha256": ""},
        "score": 0,
        "max_score": 0,
        "status": "graded",
        "error": None,
        "isolation": {"backend": "none"},
        "seed": 0,
    }


def export(
    named: Named,
    fmt: str,
    out: Path,
    exercise_ids: list[str],
    *,
    roster: list[Student] | None = None,
    title: str = "",
    points: float | None = None,
) -> list[Path]:
    """Write ``fmt`` exports of the cards into ``out``; return the files written (each validated).

    ``title`` and ``points`` name the LMS gradebook column (Canvas, Moodle) and its points possible.
    """
    if fmt == "csv":
        path = out / "gradebook.csv"
        write_text(path, gradebook_csv(named, exercise_ids, roster))
        return [path]
    if fmt in lms.FORMATS:
        lines = lms.join(_cleaned(named), roster)
        title = safetext.name(title or (named[0][1]["assignment"] if named else "grade"))
        points = (
            points if points is not None else max((c["max_score"] for _, c in named), default=0)
        )
        text = (
            lms.canvas(lines, title, points, csv_cell)
            if fmt == "canvas"
            else lms.moodle(lines, title, csv_cell)
        )
        path = out / f"{fmt}.csv"
        write_text(path, text)
        return [path]
    written = []
    for key, card in _cleaned(named):
        key = _file_key(key)
        if fmt == "gradescope":
            path, doc = out / key / "results.json", gradescope.document(card)
        else:
            path, doc = out / f"{key}.json", exports.to_github_classroom(card)
        write_text(path, json.dumps(doc, indent=2) + "\n")
        written.append(path)
    return written


def _file_key(key: str) -> str:
    """A scorecard name fit to name a file in ``out`` (``..`` or a separator made plain)."""
    return key if _FILE_KEY.fullmatch(key) else safe_id(key)


def identical(named: Named, *, ignore: str = "") -> list[dict[str, Any]]:
    """Groups of students whose submissions hash the same (``ignore``: the released stubs' hash)."""
    groups: dict[str, list[str]] = defaultdict(list)
    for key, card in named:
        sha = card["submission"]["sha256"]
        if sha and sha != ignore:
            groups[sha].append(key)
    return [
        {"sha256": sha, "students": sorted(set(keys))}
        for sha, keys in sorted(groups.items())
        if len(set(keys)) > 1
    ]


def stubs_sha256(assignment: manifest.Assignment) -> str:
    """The hash intake gives the untouched released stubs (``""`` when they are not here)."""
    try:
        sub = intake.take(
            assignment.root / "exercises", modules={e.module for e in assignment.exercises}
        )
    except (intake.IntakeError, GraderFault):
        return ""
    sub.cleanup()
    return sub.sha256


def _pct(card: dict[str, Any]) -> float:
    return 100.0 * card["score"] / card["max_score"] if card["max_score"] else 0.0


def summarize(
    named: Named,
    *,
    assignment: manifest.Assignment,
    backend: BackendName,
    slots: int,
    wall_s: float,
    skipped: int,
    timing: dict[str, Any] | None = None,
    roster: list[Student] | None = None,
    previous: dict[str, Any] | None = None,
    exercise_ids: list[str] | None = None,
) -> dict[str, Any]:
    """The ``summary`` document (schema ``summary``): counts, score distribution, pass rates, students, mistakes.

    ``previous`` is the summary this one replaces: when this run graded nothing (every submission
    unchanged), its ``last_graded_run`` figures are kept instead of a run that measured nothing.
    """
    named = _cleaned(named)
    cards = [c for _, c in named]
    graded = [c for c in cards if c["status"] == "graded"]
    pcts = [_pct(c) for c in graded]
    bins = [0] * 10
    for p in pcts:
        bins[min(int(p // 10), 9)] += 1
    timeouts = [(k, sum(i["kind"] == "timeout" for i in c["incidents"])) for k, c in named]
    max_score = max((c["max_score"] for c in graded or cards), default=assignment.max_points)
    groups = identical(named, ignore=stubs_sha256(assignment))
    ids = exercise_ids or assignment.ids()
    missing = [s for s in roster or [] if s.key not in dict(named)]
    doc = {
        "schema_version": 3,
        "assignment": assignment.id,
        "title": assignment.title,
        "grader": {"version": __version__},
        "generated": scorecard.now(),
        "isolation": backend,
        "slots": slots,
        "wall_s": round(wall_s, 3),
        "submissions_per_minute": _rate(len(cards) - skipped, wall_s),
        "counts": {
            "submissions": len(cards),
            "graded": len(graded),
            "errors": len(cards) - len(graded),
            "skipped": skipped,
            "timeouts": sum(1 for _, n in timeouts if n),
            "full_marks": sum(1 for c in graded if c["max_score"] and c["score"] >= c["max_score"]),
            "missing": len(missing),
        },
        "score": {
            "max_score": max_score,
            "mean": _r(statistics.fmean([c["score"] for c in graded])) if graded else 0,
            "median": _r(statistics.median([c["score"] for c in graded])) if graded else 0,
            "min": min((c["score"] for c in graded), default=0),
            "max": max((c["score"] for c in graded), default=0),
            "mean_percent": _r(statistics.fmean(pcts)) if pcts else 0,
        },
        "histogram": [{"from": 10 * i, "to": 10 * i + 10, "count": n} for i, n in enumerate(bins)],
        "exercises": _exercises(graded),
        "common_failures": students.common_mistakes(named),
        "errors": [
            {"student": k, "kind": c["error"]["kind"], "message": c["error"]["message"][:500]}
            for k, c in named
            if c["status"] == "error"
        ],
        "timeouts": [{"student": k, "count": n} for k, n in timeouts if n],
        "slowest": [
            {"student": k, "total_s": c["timings"]["total_s"]}
            for k, c in sorted(named, key=lambda kc: -kc[1]["timings"]["total_s"])[:10]
        ],
        "timing": timing or {},
        "cuda": cuda(named),
        "identical_submissions": groups,
        "students": students.rows(named, ids, groups)
        + [students.missing_row(s.key, s.login, ids, max_score) for s in missing],
        "last_graded_run": _last_graded_run(len(cards) - skipped, wall_s, slots, previous),
    }
    if roster is not None:
        doc["roster"] = {
            "students": len(roster),
            "missing": [s.key for s in missing],
            "not_on_roster": sorted(set(dict(named)) - {s.key for s in roster}),
        }
    schema.validate("summary", doc)
    return doc


def cuda(named: Named) -> dict[str, Any]:
    """Who was graded where CUDA was available: each graded card whose ``environment.cuda`` names a device."""
    found = [
        {"student": key, "device": card["environment"]["cuda"]}
        for key, card in named
        if card["status"] == "graded" and card["environment"].get("cuda")
    ]
    return {"graded": len(found), "submissions": found}


def _rate(count: int, wall_s: float) -> float:
    return round(60.0 * count / wall_s, 2) if wall_s > 0 and count > 0 else 0


def _last_graded_run(
    count: int, wall_s: float, slots: int, previous: dict[str, Any] | None
) -> dict[str, Any]:
    """This run's figures when it graded something, else the last real ones (an older summary's top level too)."""
    fresh = {
        "generated": scorecard.now(),
        "graded": max(count, 0),
        "wall_s": round(wall_s, 3),
        "submissions_per_minute": _rate(count, wall_s),
        "slots": slots,
    }
    if count > 0 or not previous:
        return fresh
    kept = previous.get("last_graded_run")
    if not isinstance(kept, dict):  # a summary written before the field: its own top-level figures
        raw_counts = previous.get("counts")
        counts: dict[str, Any] = raw_counts if isinstance(raw_counts, dict) else {}
        kept = {
            "generated": previous.get("generated"),
            "wall_s": previous.get("wall_s"),
            "submissions_per_minute": previous.get("submissions_per_minute"),
            "slots": previous.get("slots"),
            "graded": _int(counts.get("submissions")) - _int(counts.get("skipped")),
        }
    return kept if _is_run(kept) else fresh


def _int(value: object) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _is_run(run: dict[str, Any]) -> bool:
    """``run`` has the shape of ``last_graded_run`` and measured something (the old file may hold anything)."""
    numbers = [run.get(k) for k in ("wall_s", "submissions_per_minute")]
    return (
        set(run) == {"generated", "graded", "wall_s", "submissions_per_minute", "slots"}
        and isinstance(run["generated"], str)
        and _int(run["graded"]) > 0
        and _int(run["slots"]) >= 1
        and all(isinstance(n, (int, float)) and not isinstance(n, bool) and n >= 0 for n in numbers)
        and run["submissions_per_minute"] > 0
    )


def read_summary(path: Path) -> dict[str, Any] | None:
    """The summary a previous run left at ``path`` (any version: only what is checked is used)."""
    try:
        doc = json.loads(path.read_text("utf-8"))
    except (OSError, ValueError):
        return None
    return doc if isinstance(doc, dict) else None


def _r(x: float) -> float:
    return round(x, 3)


def _exercises(graded: list[dict[str, Any]]) -> list[dict[str, Any]]:
    order: dict[str, dict[str, Any]] = {}
    tests: dict[str, dict[str, list[int]]] = defaultdict(dict)
    names: dict[str, str] = {}
    for card in graded:
        for ex in card["exercises"]:
            e = order.setdefault(
                ex["id"],
                {
                    "id": ex["id"],
                    "title": ex["title"],
                    "max_score": ex["max_score"],
                    "scores": [],
                    "full": 0,
                },
            )
            e["scores"].append(ex["score"])
            e["full"] += ex["max_score"] > 0 and ex["score"] >= ex["max_score"]
            for t in ex["tests"]:
                if t["counted"]:
                    names[t["id"]] = t["name"]
                    tally = tests[ex["id"]].setdefault(t["id"], [0, 0])
                    tally[0] += t["outcome"] == "passed"
                    tally[1] += 1
    out = []
    for ex_id, e in order.items():
        n = len(e["scores"])
        out.append(
            {
                "id": ex_id,
                "title": e["title"],
                "max_score": e["max_score"],
                "mean_score": _r(statistics.fmean(e["scores"])) if n else 0,
                "pass_rate": _r(e["full"] / n) if n else 0,
                "tests": [
                    {
                        "id": tid,
                        "name": names[tid],
                        "passed": p,
                        "total": t,
                        "pass_rate": _r(p / t) if t else 0,
                    }
                    for tid, (p, t) in tests[ex_id].items()
                ],
            }
        )
    return out
