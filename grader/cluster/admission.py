"""Which Dask workers may grade this run: at least one has joined (one offering the GPU when asked),
and every worker's self-check (:func:`grader.cluster.worker.self_check`) is judged before anything
is sent.

Kept apart from :mod:`grader.cluster.grading` (sending the submissions and taking the scorecards
back): this is the admission decision alone, which refuses by name every worker that may not grade
and why.
"""

from __future__ import annotations

from typing import Any

from distributed import Client

from grader import canary, safetext
from grader.cluster import messages as wire
from grader.cluster.worker import self_check
from grader.errors import UsageError

WAIT_FOR_WORKERS_S = 120.0


class WorkerRefused(UsageError):
    """A Dask worker may not grade (the message names each worker and why): nothing was graded."""


def joined(client: Client, *, gpu: bool) -> None:
    """At least one worker has joined, and one offers the ``GPU`` resource when the run asks for
    it."""
    try:
        client.wait_for_workers(1, timeout=WAIT_FOR_WORKERS_S)
    except TimeoutError:
        raise UsageError(
            f"no Dask worker joined the scheduler within {WAIT_FOR_WORKERS_S:.0f} s"
        ) from None
    workers = client.scheduler_info()["workers"].values()
    if gpu and not any((w.get("resources") or {}).get("GPU") for w in workers):
        raise WorkerRefused(
            "no Dask worker offers the GPU resource: start the GPU hosts' workers with "
            "--resources GPU=1 (tasks that ask for it would wait forever)"
        )


def preflight(
    client: Client, name: str, *, fingerprint: str, gpu: bool, canary_required: bool
) -> dict[str, dict[str, Any]]:
    """Every worker's self-check, judged: the records by worker address, or :class:`WorkerRefused` /
    ``CanaryFailed`` naming each worker that may not grade and why."""
    texts = client.run(self_check, name, on_error="return")
    records, refused, failed = {}, [], []
    for address, text in sorted(texts.items()):
        try:
            record = wire.read_record(text)
        except (wire.MessageError, ValueError) as exc:
            refused.append(
                f"Dask worker {address}: its self-check could not be read ({safetext.name(exc, 300)})"
            )
            continue
        who = f"Dask worker {address} (host {safetext.name(record.get('hostname', '?'))}, pid {record.get('pid', '?')})"
        offers_gpu = bool((record.get("resources") or {}).get("GPU"))
        refused += [
            f"{who}: {p}"
            for p in wire.problems(record, fingerprint=fingerprint, gpu=gpu and offers_gpu)
        ]
        problem = wire.canary_problem(record) if canary_required else ""
        failed += [f"{who}: {problem}"] if problem else []
        records[address] = record
    if refused:
        raise WorkerRefused(
            "refusing to grade on this Dask cluster (nothing was graded):\n"
            + "\n".join(f"  - {r}" for r in refused)
        )
    if failed:
        raise canary.CanaryFailed("on the Dask cluster:\n" + "\n".join(f"  - {f}" for f in failed))
    return records
