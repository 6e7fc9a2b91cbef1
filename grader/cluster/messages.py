"""What crosses between the coordinator of ``grader batch --dask`` and a Dask worker: plain data,
bounded, checked.

Nothing here imports Dask. Three things cross, and each is checked by the side that receives it:

- **a submission** (coordinator → worker): the intake's normalised file map (module name → bytes, at
  most :data:`MAX_PAYLOAD_BYTES` in all), the single-module name and the layout. The coordinator
  reads the submission (:func:`take`), so no worker needs the coordinator's file system; the worker
  checks the map again (:func:`check_payload`) and writes it back as a folder or a single file
  (:func:`unpack`), which its own intake takes exactly as the original (same files, same hash, same
  single module).
- **a result** (worker → coordinator): one JSON text of at most :data:`MAX_RESULT_BYTES`, parsed
  strictly (no NaN, no duplicate keys) and checked by :func:`accept`: its shape, its key, and a
  scorecard that is schema-valid, for this assignment and exercises, for the very content that was
  sent (its hash), with a score inside its maximum. Anything else raises :class:`ResultRejected`: a
  grader error, never a grade.
- **a worker's self-check** (:mod:`grader.batch.hostcheck`), judged by :func:`problems` on both
  sides.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from grader import safetext, schema
from grader.intake import submission as intake
from grader.sandbox.levels import Level

# a submission's modules, all together (intake's one size budget)
MAX_PAYLOAD_BYTES = intake.MAX_SUBMISSION_BYTES
MAX_RESULT_BYTES = 8 << 20  # one task's JSON reply (a scorecard is tens of KiB)
MAX_RECORD_BYTES = 64 << 10  # one worker's self-check
REQUIRED_LEVEL: Level = "namespace"
REPLY_KEYS = {"key", "worker", "wall_s", "warm", "card", "refused", "fault", "canary"}
NUMBER = (int, float)
CANARY_KEYS: dict[str, type | tuple[type, ...]] = {
    "key": str,
    "solutions": NUMBER,
    "stubs": NUMBER,
    "max_score": NUMBER,
    "cached": bool,
}


class MessageError(ValueError):
    """Data that crossed does not have the shape agreed: the message says what is wrong."""


class ResultRejected(MessageError):
    """A task's result is not a scorecard we can accept for that submission (a grader error)."""


@dataclass(frozen=True)
class Payload:
    """A submission as its normalised modules: what a worker needs to grade it, and nothing else."""

    files: dict[str, bytes]
    single_module: str | None
    layout: str
    sha256: str

    def plain(self) -> dict[str, Any]:
        return {
            "files": dict(self.files),
            "single_module": self.single_module,
            "layout": self.layout,
            "sha256": self.sha256,
        }


def take(path: Path, *, modules: set[str]) -> Payload:
    """Read ``path`` through the intake (raises ``intake.IntakeError``; its size budget bounds the
    payload)."""
    sub = intake.take(path, modules=modules)
    try:
        files = {f.name: f.read_bytes() for f in sorted(sub.box.iterdir())}
    finally:
        sub.cleanup()
    return Payload(files, sub.single_module, sub.layout, sub.sha256)


def check_payload(plain: object) -> Payload:
    """The worker's own check of a payload: names that are plain module files, sizes within the
    intake's caps."""
    if not isinstance(plain, dict) or set(plain) != {"files", "single_module", "layout", "sha256"}:
        raise MessageError("a payload is a mapping of files, single_module, layout and sha256")
    files, single = plain["files"], plain["single_module"]
    if not isinstance(files, dict) or not 0 < len(files) <= intake.MAX_FILES:
        raise MessageError(f"a payload holds 1 to {intake.MAX_FILES} files")
    for name, data in files.items():
        if not (
            isinstance(name, str)
            and _module_file(name)
            and isinstance(data, bytes)
            and len(data) <= intake.MAX_FILE_BYTES
        ):
            raise MessageError(
                f"not a module file of at most {intake.MAX_FILE_BYTES} bytes: {safetext.name(name)}"
            )
    if sum(map(len, files.values())) > MAX_PAYLOAD_BYTES:
        raise MessageError(f"a payload holds at most {MAX_PAYLOAD_BYTES} bytes")
    if single is not None and (not isinstance(single, str) or set(files) != {f"{single}.py"}):
        raise MessageError("single_module names the payload's one file")
    if not isinstance(plain["layout"], str) or not isinstance(plain["sha256"], str):
        raise MessageError("layout and sha256 are text")
    return Payload(files, single, plain["layout"][:200], plain["sha256"][:64])


def _module_file(name: str) -> bool:
    return (
        name.endswith(".py")
        and "/" not in name
        and "\0" not in name
        and not name.startswith(".")
        and len(name.encode("utf-8", "surrogateescape")) <= 255
    )


def unpack(payload: Payload, folder: Path) -> Path:
    """Write ``payload`` under ``folder`` (empty, ours) as what to grade: its single module as a
    file, else a folder."""
    if payload.single_module is not None:
        path = folder / f"{payload.single_module}.py"
        path.write_bytes(payload.files[path.name])
        return path
    path = folder / "submission"
    path.mkdir()
    for name, data in payload.files.items():
        (path / name).write_bytes(data)
    return path


def strict_json(text: str) -> Any:
    """``json.loads`` that refuses NaN and infinities and duplicate keys (the parse our checks rely
    on)."""

    def pairs(items: list[tuple[str, Any]]) -> dict[str, Any]:
        keys = [k for k, _ in items]
        if len(set(keys)) != len(keys):
            raise MessageError("duplicate keys")
        return dict(items)

    def constant(name: str) -> None:
        raise MessageError(f"{name} is not JSON")

    return json.loads(text, object_pairs_hook=pairs, parse_constant=constant)


def accept(
    text: object, *, key: str, sha256: str, assignment: str, exercises: list[str]
) -> dict[str, Any]:
    """The reply of the task that graded ``key``, checked (see the module docstring); raises
    :class:`ResultRejected`."""
    if not isinstance(text, str):
        raise ResultRejected(f"the task returned {type(text).__name__}, not JSON text")
    if len(text) > MAX_RESULT_BYTES:
        raise ResultRejected(
            f"the task returned {len(text)} characters, more than the {MAX_RESULT_BYTES} allowed"
        )
    try:
        reply = strict_json(text)
    except ValueError as exc:
        raise ResultRejected(
            f"the task returned malformed JSON ({safetext.name(exc, 200)})"
        ) from None
    _check_reply(reply, key)
    if "card" in reply:
        _check_card(reply["card"], sha256=sha256, assignment=assignment, exercises=exercises)
    return dict(reply)


def _check_reply(reply: object, key: str) -> None:
    if not isinstance(reply, dict) or not set(reply) <= REPLY_KEYS:
        raise ResultRejected(f"the reply is not a mapping of {', '.join(sorted(REPLY_KEYS))}")
    if reply.get("key") != key:
        raise ResultRejected(
            f"the reply is for {safetext.name(reply.get('key'), 120)!r}, not {key!r}"
        )
    if sum(k in reply for k in ("card", "refused", "fault")) != 1:
        raise ResultRejected("the reply holds not exactly one of card, refused, fault")
    wall = reply.get("wall_s", 0.0)
    if not isinstance(wall, (int, float)) or isinstance(wall, bool) or not 0 <= wall < math.inf:
        raise ResultRejected("wall_s is not a duration")
    for name, kind in (("worker", str), ("warm", bool), ("refused", str), ("fault", str)):
        if name in reply and not isinstance(reply[name], kind):
            raise ResultRejected(f"{name} is not {kind.__name__}")
    if reply.get("canary") is not None and not is_canary(reply["canary"]):
        raise ResultRejected("canary is not a canary record")


def _check_card(card: object, *, sha256: str, assignment: str, exercises: list[str]) -> None:
    try:
        schema.validate("scorecard", card)
    except schema.SchemaError as exc:
        raise ResultRejected(
            f"the scorecard failed its schema ({safetext.name(exc, 300)})"
        ) from None
    assert isinstance(card, dict)  # the schema's root type
    if card["assignment"] != assignment:
        raise ResultRejected(
            f"the scorecard is for assignment {safetext.name(card['assignment'], 80)!r}"
        )
    if card["submission"]["sha256"] != sha256:
        raise ResultRejected(
            "the scorecard grades other content than was sent (its sha256 differs)"
        )
    if not 0 <= card["score"] <= card["max_score"]:
        raise ResultRejected(f"the score {card['score']!r} is outside 0..{card['max_score']!r}")
    if not {e["id"] for e in card["exercises"]} <= set(exercises):
        raise ResultRejected("the scorecard grades exercises that were not asked for")


def is_canary(record: object) -> bool:
    """``record`` has the shape of a canary record (:meth:`grader.canary.Proof.record`)."""
    return (
        isinstance(record, dict)
        and set(record) == set(CANARY_KEYS)
        and all(
            isinstance(record[k], t) and (t is bool or not isinstance(record[k], bool))
            for k, t in CANARY_KEYS.items()
        )
    )


def read_record(text: object) -> dict[str, Any]:
    """A worker's self-check (JSON text from :mod:`grader.batch.hostcheck`), bounded and strictly
    parsed."""
    if not isinstance(text, str) or len(text) > MAX_RECORD_BYTES:
        raise MessageError("a self-check is JSON text of at most 64 KiB")
    return check_record(strict_json(text))


def check_record(record: object) -> dict[str, Any]:
    """``record`` if it has the shape of a self-check (a mapping with a sandbox level)."""
    if not isinstance(record, dict) or not isinstance(record.get("level"), str):
        raise MessageError("a self-check is a mapping with a sandbox level")
    return record


def problems(record: dict[str, Any], *, fingerprint: str, gpu: bool = False) -> list[str]:
    """Why a worker with this self-check must not grade, its canary aside (empty when it may)."""
    if record.get("error"):
        return [f"its self-check failed: {safetext.name(record['error'], 600)}"]
    level = record["level"]
    if level != REQUIRED_LEVEL:
        return [
            f"its sandbox level is {safetext.name(level, 40)!r}, below the {REQUIRED_LEVEL!r} a cluster "
            "requires (run the Dask worker as root on Linux, where namespaces are available)"
        ]
    found = []
    network = record.get("network")
    reached = (
        [t for t, outcome in network.items() if outcome == "connected"]
        if isinstance(network, dict)
        else []
    )
    if reached or not network:
        found.append(
            f"its sandbox can reach the network ({', '.join(map(safetext.name, reached)) or 'not probed'}): "
            "student code could talk to the Dask worker's port"
        )
    if record.get("fingerprint") != fingerprint:
        found.append(
            "it grades with other grading inputs (grader, manifest, solutions or suites differ from the "
            "coordinator's): install the same grader and checkout on every host"
        )
    if gpu and not record.get("gpus"):
        found.append("it offers the GPU resource but has no GPU device")
    return found


def canary_problem(record: dict[str, Any]) -> str:
    """Why this worker's canary proves nothing ("" when it proved the worker grades correctly)."""
    if is_canary(record.get("canary")):
        return ""
    return f"its canary failed: {safetext.name(record.get('canary_error') or 'no proof', 600)}"
