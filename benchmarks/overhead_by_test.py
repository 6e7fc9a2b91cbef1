"""Where a sandboxed grade's CPU goes beyond the in-process floor, test by test, and the least it could cost.

One submission graded in-process and sandboxed (workers forked from this user's zygote, as a batch slot
makes them, one torch thread), in turn for ``--rounds`` rounds after one warm grade of each (the
machine's load moves both alike). For every test, CPU seconds: in-process, this process's (the
student's code included); sandboxed, this process's (the trusted side) plus the worker's (the cards'
``cpu_s``, read from the sandbox's cgroup); and the requests it sent to the worker. The sandbox's CPU
outside every test (its start before the first request, its end) is the cgroup's total at the kill
less the tests' share. The overhead (sandboxed minus in-process) is then split:

- **worker start and end**: the tests during which a worker was started (forked, isolated,
  attested, the submission loaded) or ended (the last test's teardown closes the sandbox), with the
  sandbox's CPU outside the tests;
- **measured calls**: the tests that asked for a call's memory (``measure()``): the figure is read
  from the sandbox's memory cgroup, under the fixed malloc threshold that keeps it honest
  (``grader/sandbox/workerenv.py``), where the in-process grade reads a dispatch mode;
- **round trips**: every other test: its requests' wire round trips (the CPU a request printed is
  this share over their count).

The last line is a bound, not a measurement: the grade's CPU if every test that calls the student
sent one request (the fewest it can), each at the CPU a request costs now, with the start, end and
measured calls as they are.

    python benchmarks/overhead_by_test.py [--submission solutions] [--assignment NAME] [--rounds 4] [--top 8]
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import torch

from grader.grade import grade
from grader.options import GradeOptions, launch_spec
from grader.sandbox import session, workerproc
from grader.sandbox.remote import SandboxBackend
from grader.sandbox.starters import SlotStarters
from grader.student.inprocess import InProcessBackend

ROOT = Path(__file__).resolve().parents[1]
LEVELS = ("inprocess", "namespace")


class Meter:
    """Per test of the grade running now: this process's CPU, the in-process student's CPU, the
    requests sent, and which tests started or ended a worker or measured a call (the backends'
    own methods, wrapped)."""

    def __init__(self) -> None:
        self.test, self.mark = "", 0.0
        self.cpu: Counter[str] = Counter()
        self.student: Counter[str] = Counter()
        self.sent: Counter[str] = Counter()
        self.sandbox_cpu = 0.0  # the cgroup's total at each kill
        self.started: set[str] = set()
        self.measured: set[str] = set()
        self._wrap()

    def new_grade(self) -> None:
        for counter in (self.cpu, self.student, self.sent):
            counter.clear()
        self.test, self.mark, self.sandbox_cpu = "", time.process_time(), 0.0

    def switch(self, nodeid: str) -> None:
        """Charge this process's CPU since the last switch to the test that ran (``""`` ends it)."""
        now = time.process_time()
        if self.test:
            self.cpu[self.test] += now - self.mark
        self.test, self.mark = nodeid.split("::")[-1], now

    def _wrap(self) -> None:
        meter = self
        for backend in (SandboxBackend, InProcessBackend):
            begin = backend.begin_test

            def begin_test(b: Any, nodeid: str, *args: Any, _begin: Any = begin, **kw: Any) -> None:
                meter.switch(nodeid)
                _begin(b, nodeid, *args, **kw)

            backend.begin_test = begin_test  # type: ignore[method-assign]
        timed, exchange = InProcessBackend._timed, session.WorkerSession._exchange
        start, close, kill = (
            session.WorkerSession._start,
            SandboxBackend.close,
            workerproc.WorkerProcess.kill,
        )

        def student(b: InProcessBackend, *args: Any) -> Any:
            c = time.process_time()
            try:
                return timed(b, *args)
            finally:
                meter.student[meter.test] += time.process_time() - c

        def counted(w: session.WorkerSession, request: dict[str, Any]) -> Any:
            meter.sent[meter.test] += 1
            if request.get("op") == "measure":
                meter.measured.add(meter.test)
            return exchange(w, request)

        def started(w: session.WorkerSession) -> Any:
            meter.started.add(meter.test)
            return start(w)

        def closed(b: SandboxBackend) -> None:
            if b.channel is not None:
                meter.started.add(meter.test)
            close(b)

        def killed(w: workerproc.WorkerProcess) -> None:
            meter.sandbox_cpu += w.cpu_seconds()
            kill(w)

        InProcessBackend._timed = student  # type: ignore[method-assign]
        session.WorkerSession._exchange = counted  # type: ignore[method-assign]
        session.WorkerSession._start = started  # type: ignore[method-assign]
        SandboxBackend.close = closed  # type: ignore[method-assign]
        workerproc.WorkerProcess.kill = killed  # type: ignore[method-assign]


Figures = dict[str, dict[str, list[float]]]


def graded(sub: Path, rounds: int, meter: Meter, assignment_name: str | None) -> Figures:
    """Per kind of figure, per test: CPU seconds of each round."""
    options = GradeOptions(assignment=assignment_name, isolation="namespace", seed=0, threads=1)
    assignment = options.load()
    starts = SlotStarters(
        lambda slot: launch_spec(assignment, "namespace", slot=slot, threads=1),
        0,
        "fork",
        shared_wait_s=30,
    )
    out: Figures = defaultdict(lambda: defaultdict(list))
    try:
        for n in range(rounds + 1):
            for level in LEVELS:
                meter.new_grade()
                card = grade(
                    sub,
                    isolation=level,
                    seed=n,
                    assignment=assignment,
                    starter=starts.next() if level == "namespace" else None,
                )
                meter.switch("")
                if level == "namespace":
                    starts.done()
                if n:  # not the warm grade of each
                    keep(out, level, card, meter)
    finally:
        starts.close()
    return out


def keep(out: Figures, level: str, card: dict[str, Any], meter: Meter) -> None:
    tests = {t["id"].split("::")[-1]: t for e in card["exercises"] for t in e["tests"]}
    for name in tests:
        out[level][name].append(meter.cpu[name])
        if level == "inprocess":
            out["student"][name].append(meter.student[name])
        else:
            out["worker"][name].append(tests[name].get("cpu_s") or 0.0)
            out["sent"][name].append(meter.sent[name])
    if level == "namespace":
        in_tests = sum(t.get("cpu_s") or 0.0 for t in tests.values())
        out["outside"]["sandbox"].append(max(0.0, meter.sandbox_cpu - in_tests))


def report(figures: Figures, meter: Meter, top: int) -> None:
    mean = {
        kind: {k: statistics.mean(v) for k, v in tests.items()} for kind, tests in figures.items()
    }
    inproc, student = sum(mean["inprocess"].values()), sum(mean["student"].values())
    trusted, worker = sum(mean["namespace"].values()), sum(mean["worker"].values())
    outside = mean["outside"]["sandbox"]
    sandboxed = trusted + worker + outside
    over = {
        k: mean["namespace"][k] + mean["worker"][k] - mean["inprocess"].get(k, 0.0)
        for k in mean["namespace"]
    }
    print(
        f"CPU a grade ({len(over)} tests): in-process {inproc:.3f} s (the student's code {student:.3f}); sandboxed "
        f"{sandboxed:.3f} s: trusted {trusted:.3f}, worker {worker:.3f} in the tests and {outside:.3f} outside them "
        f"({sandboxed / inproc:.2f}x); overhead {sandboxed - inproc:.3f} s, {sum(mean['sent'].values()):.0f} requests"
    )
    groups = {"worker start, end": meter.started, "measured calls": meter.measured - meter.started}
    groups["round trips"] = set(over) - groups["worker start, end"] - groups["measured calls"]
    shares = {label: sum(over.get(k, 0.0) for k in names) for label, names in groups.items()}
    shares["worker start, end"] += outside
    sent = sum(mean["sent"][k] for k in groups["round trips"])
    per_request = shares["round trips"] / sent if sent else 0.0
    for label, names in groups.items():
        extra = (
            f", {per_request * 1e3:.3f} ms a request over {sent:.0f}"
            if label == "round trips"
            else ""
        )
        print(
            f"  {label:17s}: {shares[label]:6.3f} s ({shares[label] / (sandboxed - inproc):4.0%}) in {len(names)} "
            f"test(s){extra}"
        )
    calling = sum(1 for k in over if mean["sent"][k] > 0)
    least = inproc + shares["worker start, end"] + shares["measured calls"] + per_request * calling
    print(
        f"bound: one request for each of the {calling} tests that call the student, each at "
        f"{per_request * 1e3:.3f} ms: {least:.3f} s a grade, {least / inproc:.2f}x the in-process grade"
    )
    print(
        f"the {top} tests with the most overhead (CPU ms: sandboxed trusted + worker, in-process, requests)"
    )
    for name in sorted(over, key=lambda k: -over[k])[:top]:
        print(
            f"  {over[name] * 1e3:+7.1f}  {mean['namespace'][name] * 1e3:6.1f} + {mean['worker'][name] * 1e3:6.1f}"
            f"  {mean['inprocess'].get(name, 0) * 1e3:6.1f}  {mean['sent'][name]:3.0f}  {name[:70]}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--submission", type=Path, default=ROOT / "solutions")
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--top", type=int, default=8)
    parser.add_argument(
        "--assignment", default=None, help="an assignment of assignments.json (default: the first)"
    )
    args = parser.parse_args()
    torch.set_num_threads(1)  # as a slot does
    meter = Meter()
    figures = graded(args.submission.resolve(), args.rounds, meter, args.assignment)
    print(f"{args.submission}: {args.rounds} rounds, each graded in-process and sandboxed in turn")
    report(figures, meter, args.top)


if __name__ == "__main__":
    main()
