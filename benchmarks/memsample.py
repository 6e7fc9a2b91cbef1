"""Peak resident memory by role of a running ``grader batch`` (benchmarks/batch.py and batch_modes.py)."""

from __future__ import annotations

import os
import threading
from pathlib import Path


class MemorySampler:
    """Peak resident memory (VmHWM) of the batch's own process, of each slot, each zygote and each worker, read from
    /proc every half second while the batch runs, and the batch process's resident size at each sample (so growth
    with the number of submissions shows). Also the CPU seconds of the zygotes that fork the batch's workers, their
    reaped children included (every worker's whole life, its start-up too), from the first sample that sees each."""

    def __init__(self, root: int) -> None:
        self.root, self.peaks, self.trusted_rss = root, {}, []
        self.zygote_cpu: dict[int, list[float]] = {}  # pid -> [first reading, last reading]
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(0.5):
            for pid, role in self._tree().items():
                if role == "zygote":
                    readings = self.zygote_cpu.setdefault(pid, [_cpu(pid)] * 2)
                    readings[1] = _cpu(pid) or readings[1]
                hwm = _status_kb(pid, "VmHWM")
                if hwm:
                    self.peaks[pid] = (role, max(hwm, self.peaks.get(pid, (role, 0))[1]))
            rss = _status_kb(self.root, "VmRSS")
            if rss:
                self.trusted_rss.append(rss)

    def _tree(self) -> dict[int, str]:
        """The batch's processes by role: its slots (and any zygote of their own), the sandboxed workers (every
        process in one of the slots' cgroups, ``attention-grader/p<slot pid>-slot-<n>``), and the zygote they were
        forked from (this user's shared one is no child of the batch: it outlives it; other graders' are not ours)."""
        roles, children, parent, cmds = {self.root: "trusted"}, {}, {}, {}
        for entry in os.listdir("/proc"):
            if entry.isdigit():
                try:
                    stat = Path(f"/proc/{entry}/stat").read_text()
                    cmds[int(entry)] = Path(f"/proc/{entry}/cmdline").read_bytes()
                except OSError:
                    continue
                parent[int(entry)] = int(stat.rsplit(")", 1)[1].split()[1])
                children.setdefault(parent[int(entry)], []).append(int(entry))
        todo = [self.root]
        while todo:
            for pid in children.get(todo.pop(), []):
                roles[pid] = (
                    "zygote"
                    if b"zygote.py" in cmds[pid]
                    else "slot"
                    if b"grader.batch.slot" in cmds[pid]
                    else "other"
                )
                todo.append(pid)
        marks = tuple(f"p{pid}-slot-".encode() for pid, role in roles.items() if role == "slot")
        for pid in cmds if marks else ():
            if any(mark in _cgroups(pid) for mark in marks):
                roles[pid] = "worker"
                up = parent.get(pid, 0)
                while up > 1 and b"zygote.py" not in cmds.get(up, b"zygote.py"):
                    up = parent.get(up, 0)
                if up > 1:
                    roles[up] = "zygote"
        return roles

    def workers_cpu(self) -> float:
        """CPU seconds the batch's zygotes and the workers they forked used while it was sampled."""
        return sum(last - first for first, last in self.zygote_cpu.values())

    def stop(self) -> dict[str, float]:
        self._stop.set()
        self._thread.join()
        for pid, readings in self.zygote_cpu.items():
            readings[1] = _cpu(pid) or readings[1]
        by_role: dict[str, list[int]] = {}
        for role, kb in self.peaks.values():
            by_role.setdefault(role, []).append(kb)
        return {role: max(kbs) / 1024 for role, kbs in by_role.items()}


def _cpu(pid: int) -> float:
    """utime + stime + cutime + cstime of ``pid`` in seconds (0 once it is gone)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return sum(int(f) for f in fields[11:15]) / os.sysconf("SC_CLK_TCK")


def _cgroups(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cgroup").read_bytes()
    except OSError:
        return b""


def _status_kb(pid: int, key: str) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(key + ":"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


def machine_busy() -> float:
    """CPU seconds every core of this machine has spent busy (``/proc/stat``: all but idle and
    iowait). Around a batch on a quiet machine it counts what per-process readings miss: the
    workers of this user's shared zygote, which runs in a session of its own, outside the batch's
    process tree."""
    fields = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    return (sum(fields) - fields[3] - fields[4]) / os.sysconf("SC_CLK_TCK")
