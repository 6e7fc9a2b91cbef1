"""What a sandbox really is, read by the trusted side from the kernel before any student code runs.

The scorecard's isolation record used to say what the grader *asked for*. A launch path that went
wrong (a hijacked zygote, a uid drop that was never applied, a level that silently ran as root)
then graded under a label it did not deserve. Here the record comes from ``/proc``: after the
worker's "ready" frame and before its setup frame (so before the submission is even loaded), the
runner finds the processes of the sandbox (the launch's process and its descendants) and the one
that holds the request pipe, and reads each one's uid, gid, capabilities, ``NoNewPrivs``, seccomp
mode and namespaces. Every process below the launch must match what the launch promised; any
mismatch raises :class:`AttestationError`, a grader fault (an error scorecard, never a grade).
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from grader.errors import GraderFault
from grader.sandbox.privileges import CAP_FIELDS, status_fields

NAMESPACES = ("mnt", "net", "pid", "ipc", "uts", "user")


class AttestationError(GraderFault):
    """A sandbox is not what its launch promised (seen in /proc): nothing may be graded in it."""


@dataclass(frozen=True)
class Expected:
    """What every process of a sandbox must show."""

    uid: int
    seccomp: bool
    no_new_privs: bool
    namespaces: tuple[str, ...]  # kinds that must differ from the trusted side's own


@dataclass(frozen=True)
class Observed:
    pid: int
    uids: tuple[int, ...]
    gids: tuple[int, ...]
    capabilities: int  # inheritable | permitted | effective | ambient, or-ed
    no_new_privs: bool
    seccomp: int  # 0 none, 1 strict, 2 filter
    namespaces: tuple[str, ...]  # kinds that differ from ours

    def record(self) -> dict[str, object]:
        """The scorecard's view: what was seen, in the isolation record's own terms."""
        return {
            "uid": self.uids[0],
            "seccomp": self.seccomp == 2,
            "no_new_privs": self.no_new_privs,
            "capabilities": "none" if not self.capabilities else f"{self.capabilities:#x}",
            "namespaces": list(self.namespaces),
            "attested": True,
        }


def observe(pid: int) -> Observed:
    """One process's credentials and confinement (raises OSError when it is gone)."""
    fields = status_fields(f"/proc/{pid}/status")
    caps = 0
    for name in CAP_FIELDS:
        caps |= int(fields.get(name, ["0"])[0], 16)
    return Observed(
        pid,
        tuple(int(v) for v in fields["Uid:"]),
        tuple(int(v) for v in fields["Gid:"]),
        caps,
        fields.get("NoNewPrivs:") == ["1"],
        int(fields.get("Seccomp:", ["0"])[0]),
        tuple(kind for kind in NAMESPACES if _ns(pid, kind) != _ns(os.getpid(), kind)),
    )


def _ns(pid: int, kind: str) -> str:
    try:
        return os.readlink(f"/proc/{pid}/ns/{kind}")
    except OSError:
        return ""


def problems(seen: Observed, expected: Expected) -> list[str]:
    """How ``seen`` falls short of ``expected`` ([] when it matches)."""
    found = []
    if set(seen.uids) != {expected.uid} or set(seen.gids) != {expected.uid}:
        found.append(
            f"runs as uid {'/'.join(map(str, seen.uids))} gid {'/'.join(map(str, seen.gids))}, "
            f"not {expected.uid}"
        )
    if seen.capabilities:
        found.append(f"holds capabilities {seen.capabilities:#x}")
    if expected.no_new_privs and not seen.no_new_privs:
        found.append("no_new_privs is not set")
    if expected.seccomp and seen.seccomp != 2:
        found.append(f"seccomp mode is {seen.seccomp}, not 2 (filter)")
    missing = [kind for kind in expected.namespaces if kind not in seen.namespaces]
    if missing:
        found.append(f"shares the grader's {', '.join(missing)} namespace")
    return found


def attest(root: int, request_pipe: int, expected: Expected) -> Observed:
    """Check the sandbox launched as process ``root``; return what its worker showed.

    The worker is the process of the tree that holds the read end of ``request_pipe`` (our write
    end's fd): a launch's privileged parent lets go of its copy before its child may go on
    (:func:`grader.sandbox.launcher.fork_handing_over`), so a root holder is never a transient.
    Every descendant of ``root`` must match, and ``root`` itself when it is the worker (a cold
    ``process`` launch execs the worker in place); a ``root`` that is only a proxy never runs
    student code."""
    tree = [root, *descendants(root)]
    pipe = f"pipe:[{os.fstat(request_pipe).st_ino}]"
    workers = [pid for pid in tree if _holds(pid, pipe)]
    if not workers:
        raise AttestationError(
            "sandbox attestation: no process of the sandbox holds the request pipe"
        )
    failures = []
    for pid in sorted(set(tree[1:]) | set(workers)):
        try:
            wrong = problems(observe(pid), expected)
        except (OSError, KeyError, ValueError):
            wrong = ["could not be read in /proc"]
        failures += [f"process {pid} {what}" for what in wrong]
    if failures:
        raise AttestationError("sandbox attestation failed: " + "; ".join(failures))
    return observe(workers[0])


def _holds(pid: int, target: str) -> bool:
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return False
    for fd in fds:
        try:
            if os.readlink(f"/proc/{pid}/fd/{fd}") == target:
                return True
        except OSError:
            continue
    return False


def descendants(pid: int) -> list[int]:
    """Every process below ``pid`` (children of all its threads, transitively), parents first."""
    found, todo = [], [pid]
    while todo:
        current = todo.pop(0)
        for child in _children(current):
            if child not in found:
                found.append(child)
                todo.append(child)
    return found


def _children(pid: int) -> list[int]:
    """From each thread's ``children`` file; by a scan of every process's parent where the kernel
    has none."""
    kids: list[int] = []
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return kids
    for task in tasks:
        try:
            with open(f"/proc/{pid}/task/{task}/children", encoding="ascii") as fh:
                kids += [int(c) for c in fh.read().split()]
        except FileNotFoundError:
            return _children_by_scan(pid)  # a kernel without CONFIG_PROC_CHILDREN
        except (OSError, ValueError):
            continue
    return kids


def _children_by_scan(pid: int) -> list[int]:
    kids = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                if status_fields(f"/proc/{entry}/status").get("PPid:") == [str(pid)]:
                    kids.append(int(entry))
            except OSError:
                continue
    return kids
