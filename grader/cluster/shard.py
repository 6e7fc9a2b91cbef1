"""Which part of a class one machine grades: ``--shard K/N`` (or ``--shard auto``) and the stable
split.

Shards are numbered **1..N**. A submission belongs to shard ``sha256(key) mod N + 1``, where ``key``
is the name :mod:`grader.intake.classfolder` gives its scorecard (the safe student id): the same on
every machine and every Python (never ``hash()``, which is salted per process), so N machines that
see the same class folder split it into N disjoint parts that together are the whole class.

``--shard auto`` reads, in this order:

- ``GRADER_SHARD=K/N`` (a GitHub Actions matrix, ssh, anything that can set a variable);
- ``SLURM_ARRAY_TASK_ID`` with ``SLURM_ARRAY_TASK_COUNT`` (or ``SLURM_ARRAY_TASK_MAX``), offset by
  ``SLURM_ARRAY_TASK_MIN`` (0 when unset) and ``SLURM_ARRAY_TASK_STEP`` (1): ``--array=0-3`` and
  ``--array=1-4`` both give shards 1..4;
- ``JOB_COMPLETION_INDEX`` (a Kubernetes Indexed Job, 0-based) with the count from ``--shards N`` or
  ``GRADER_SHARDS=N``: Kubernetes does not export ``spec.completions`` to the pod.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TypeVar

from grader.errors import UsageError

PARTITION = "sha256(key) mod count + 1"  # recorded in every shard manifest; merge refuses another
COUNT_ENV = "GRADER_SHARDS"
SHARD_ENV = "GRADER_SHARD"
_FORM = re.compile(r"\s*(-?\d+)\s*/\s*(-?\d+)\s*")
T = TypeVar("T")


@dataclass(frozen=True)
class Shard:
    """Shard ``index`` of ``count`` (1-based); ``source`` says where it came from (for the
    manifest)."""

    index: int
    count: int
    source: str = "--shard"

    @property
    def label(self) -> str:
        return f"{self.index}/{self.count}"

    def owns(self, key: str) -> bool:
        return shard_of(key, self.count) == self.index

    def select(self, items: Sequence[T], key: str = "key") -> list[T]:
        """The items (discovered entries) whose ``key`` attribute falls in this shard, order
        kept."""
        return [item for item in items if self.owns(getattr(item, key))]


def shard_of(key: str, count: int) -> int:
    """The 1-based shard of ``key`` among ``count``: stable across machines, processes and Python
    versions."""
    digest = hashlib.sha256(key.encode("utf-8", "surrogatepass")).digest()
    return int.from_bytes(digest[:8], "big") % count + 1


def parse(text: str, source: str = "--shard") -> Shard:
    """``K/N`` with ``1 <= K <= N``; a :class:`UsageError` naming the mistake otherwise."""
    match = _FORM.fullmatch(text)
    if not match:
        raise UsageError(
            f"{source} {text!r}: give K/N, shard K of N numbered from 1 (e.g. 1/4), or auto"
        )
    return _checked(int(match[1]), int(match[2]), f"{source} {text!r}", source)


def _checked(index: int, count: int, what: str, source: str) -> Shard:
    if count < 1:
        raise UsageError(f"{what}: the number of shards N must be at least 1")
    if index == 0 and source in ("--shard", SHARD_ENV):
        raise UsageError(
            f"{what}: shards are numbered from 1 (1/{count} .. {count}/{count}); "
            "a 0-based index (JOB_COMPLETION_INDEX, a Slurm array from 0) is read by --shard auto"
        )
    if not 1 <= index <= count:
        raise UsageError(f"{what}: shard K={index} must be between 1 and N={count}")
    return Shard(index, count, source)


def resolve(value: str, *, shards: int | None = None, env: Mapping[str, str]) -> Shard:
    """The shard ``--shard value`` names (``auto``: from ``env``); ``shards`` is ``--shards N``."""
    if shards is not None and shards < 1:
        raise UsageError(f"--shards {shards}: the number of shards must be at least 1")
    shard = _from_env(env, shards) if value.strip().lower() == "auto" else parse(value)
    if shards is not None and shards != shard.count:
        raise UsageError(
            f"--shards {shards} disagrees with shard {shard.label} (from {shard.source})"
        )
    return shard


def _from_env(env: Mapping[str, str], shards: int | None) -> Shard:
    if env.get(SHARD_ENV, "").strip():
        return parse(env[SHARD_ENV], SHARD_ENV)
    if env.get("SLURM_ARRAY_TASK_ID", "").strip():
        return _slurm(env)
    if env.get("JOB_COMPLETION_INDEX", "").strip():
        return _indexed_job(env, shards)
    raise UsageError(
        f"--shard auto: none of {SHARD_ENV}, SLURM_ARRAY_TASK_ID or JOB_COMPLETION_INDEX is set; "
        "run under a Slurm job array or a Kubernetes Indexed Job, set GRADER_SHARD=K/N, or give --shard K/N"
    )


def _int(env: Mapping[str, str], name: str, default: int | None = None) -> int | None:
    raw = env.get(name, "").strip()
    if not raw:
        return default
    if not re.fullmatch(r"-?\d+", raw):
        raise UsageError(f"--shard auto: {name}={raw!r} is not a whole number")
    return int(raw)


def _slurm(env: Mapping[str, str]) -> Shard:
    """A Slurm job array's task: a contiguous range (``--array=A-B[:S]``) of COUNT tasks."""
    task = _int(env, "SLURM_ARRAY_TASK_ID")
    low, step = _int(env, "SLURM_ARRAY_TASK_MIN", 0), _int(env, "SLURM_ARRAY_TASK_STEP", 1)
    high, count = _int(env, "SLURM_ARRAY_TASK_MAX"), _int(env, "SLURM_ARRAY_TASK_COUNT")
    assert task is not None and low is not None and step is not None  # set, or defaulted above
    if step < 1:
        raise UsageError(f"--shard auto: SLURM_ARRAY_TASK_STEP={step} must be at least 1")
    span = None if high is None else (high - low) // step + 1
    if count is None and span is None:
        raise UsageError(
            "--shard auto: SLURM_ARRAY_TASK_ID is set but neither SLURM_ARRAY_TASK_COUNT nor "
            "SLURM_ARRAY_TASK_MAX is: set GRADER_SHARD=K/N instead"
        )
    if count is not None and span is not None and count != span:
        raise UsageError(
            f"--shard auto: the Slurm array has gaps ({count} tasks between {low} and {high}); "
            "submit a contiguous range such as --array=0-{count - 1}, or set GRADER_SHARD=K/N"
        )
    total = count if count is not None else span
    assert total is not None
    offset = task - low
    if offset % step:
        raise UsageError(
            f"--shard auto: SLURM_ARRAY_TASK_ID={task} is not on the array's step {step} from {low}"
        )
    source = f"SLURM_ARRAY_TASK_ID={task}"
    return _checked(
        offset // step + 1,
        total,
        f"--shard auto: {source} (array {low}..{low + (total - 1) * step})",
        source,
    )


def _indexed_job(env: Mapping[str, str], shards: int | None) -> Shard:
    """A Kubernetes Indexed Job's pod: a 0-based index; the count is ours to be told."""
    index = _int(env, "JOB_COMPLETION_INDEX")
    count = shards if shards is not None else _int(env, COUNT_ENV)
    assert index is not None
    if count is None:
        raise UsageError(
            "--shard auto: JOB_COMPLETION_INDEX is set but Kubernetes does not export the number of "
            f"completions: give --shards N or set {COUNT_ENV}=N (the Job's spec.completions)"
        )
    source = f"JOB_COMPLETION_INDEX={index}"
    return _checked(
        index + 1,
        count,
        f"--shard auto: {source} with {count} shards (indexes 0..{count - 1})",
        source,
    )
