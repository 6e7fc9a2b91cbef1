"""``batch()``: discover, grade in parallel, then write gradebook, summary, report and exports."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from grader.batch import cards, engine
from grader.batch.progress import Progress
from grader.course import manifest
from grader.exports import lastrun, outputs, report
from grader.exports.summary import summarize
from grader.intake import classfolder as disc
from grader.intake.roster import Student


@dataclass
class Outcome:
    run: engine.Run
    summary: dict[str, Any]
    out: Path
    exported: list[Path]

    @property
    def grader_errors(self) -> int:
        return sum(r.grader_error for r in self.run.results)

    def error_kinds(self) -> dict[str, int]:
        """How many submissions ended in an error, by kind (grader, intake, isolation, ...)."""
        return self.run.error_kinds()


def batch(
    submissions: Path | str,
    *,
    out: Path | str,
    options: engine.Options | None = None,
    export: tuple[str, ...] = (),
    progress: Progress | None = None,
    roster: list[Student] | None = None,
    grading: engine.GradingFactory | None = None,
    similarity: bool = False,
) -> Outcome:
    """Grade every submission under ``submissions`` into ``out`` (see ``grader batch --help``);
    ``grading`` says where (default: this machine's slots; ``grader batch --dask``: a Dask cluster);
    ``similarity``: add the class's code similarity and same-wrong-answer groups to the summary and
    report (:mod:`grader.similarity`)."""
    options = options or engine.Options()
    out = Path(out)
    # once for the whole command: discovery, the engine, the canary and the summary
    assignment = options.load()
    found = disc.discover(submissions, assignment=assignment.id)
    entries = [
        e for e in found.entries if not _is_output(e.path, out)
    ]  # our own --out is never a student
    if not entries:
        raise disc.DiscoveryError(
            f"{submissions}: no submissions found (expected per-student folders, archives, "
            ".py or .ipynb files, nbgrader's submitted/ or a Classroom clone)"
        )
    progress = progress or Progress()
    with progress:
        run = engine.run(
            entries,
            out=out,
            options=options,
            assignment=assignment,
            on_result=progress.update,
            on_plan=progress.plan,
            grading=grading,
            on_phase=progress.say,
        )
    return finish(
        run,
        out=out,
        options=options,
        export=export,
        ignored=found.ignored,
        roster=roster,
        assignment=assignment,
        similarity=similarity,
    )


def _is_output(path: Path, out: Path) -> bool:
    """``path`` is the output folder itself (``--out`` given inside the class folder)."""
    return os.path.abspath(path) == os.path.abspath(out)


def finish(
    run: engine.Run,
    *,
    out: Path,
    options: engine.Options,
    export: tuple[str, ...] = (),
    ignored: list[str] | None = None,
    roster: list[Student] | None = None,
    assignment: manifest.Assignment | None = None,
    similarity: bool = False,
) -> Outcome:
    assignment = assignment or options.load()
    ids = options.exercises or assignment.ids()
    named = cards.Shelf(out, [r.entry.key for r in run.results])  # one card at a time
    outputs.write_text(out / "gradebook.csv", outputs.gradebook_csv(named, ids, roster))
    summary = summarize(
        named,
        assignment=assignment,
        backend=run.backend,
        slots=run.slots,
        wall_s=run.wall_s,
        skipped=sum(r.skipped for r in run.results),
        timing=_timing(run, ignored or []),
        roster=roster,
        previous=lastrun.read_summary(out / "summary.json"),
        exercise_ids=ids,
    )
    if run.meta.get("canary"):
        summary["canary"] = run.meta["canary"]
    if similarity:
        from grader.similarity import summary as evidence

        summary["similarity"] = evidence.compute(
            entries=[(r.entry.key, r.entry.path) for r in run.results if not r.entry.clash],
            cards=named,
            assignment=assignment,
            exercise_ids=ids,
        )
    outputs.write_text(out / "summary.json", json.dumps(summary, indent=2) + "\n")
    outputs.write_text(out / "report.html", report.render(summary))
    exported: list[Path] = []
    for fmt in export:
        exported += outputs.export(
            named,
            fmt,
            out / "exports" / fmt,
            ids,
            roster=roster,
            title=assignment.title,
            points=summary["score"]["max_score"],
        )
    return Outcome(run, summary, out, exported)


def _timing(run: engine.Run, ignored: list[str]) -> dict[str, Any]:
    graded = [r for r in run.graded if r.card["status"] == "graded"]
    warm = [r.wall_s for r in graded if r.warm]
    cold = [r.wall_s for r in graded if not r.warm]
    return {
        "mean_wall_s_warm": round(sum(warm) / len(warm), 4) if warm else None,
        "mean_wall_s_cold": round(sum(cold) / len(cold), 4) if cold else None,
        "warm_workers_used": len(warm),
        "slot_starts": run.meta.get("slot_starts", 0),
        "slot_deaths": run.meta.get("slot_deaths", 0),
        "ignored_files": len(ignored),
        **run.meta.get("timing", {}),
    }
