"""What one launch looks like at a chosen isolation level: its limits, its uid, its configuration
and the isolation record the scorecard gets (the level itself is :mod:`grader.sandbox.choice`'s).

Student code never runs with the grader's authority: under every level a root grader runs it as
a leased, unprivileged uid with no capability (never an opt-in), and a non-root grader refuses
the levels where it would run as the instructor's own uid (``process``) unless ``none`` is asked
for by name, which the scorecard then records as unsandboxed (:func:`grader.sandbox.choice.choose`).
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from grader import safefs
from grader.sandbox import cgroups, choice, mirror, privlib, seccomp, uids, view
from grader.sandbox.attest import Expected
from grader.sandbox.levels import BackendName
from grader.sandbox.rootfs import INSIDE_PACKAGES

# the folder holding the `grader` package (the trusted side's)
LIB_ROOT = Path(__file__).resolve().parents[2]
UID_BASE = uids.FIRST  # sandbox uids are leased machine-wide from uids.FIRST on
NAMESPACE_KINDS = (
    "mnt",
    "net",
    "pid",
    "ipc",
    "uts",
)  # what a `namespace` worker must not share with us


@dataclass
class Limits:
    memory_mb: int = 4096
    processes: int = 64
    file_size_mb: int = 32
    cpu_s: int = 600
    output_bytes: int = 8 << 20

    def to_dict(self) -> dict[str, int]:
        return {
            "memory_mb": self.memory_mb,
            "processes": self.processes,
            "file_size_mb": self.file_size_mb,
            "cpu_s": self.cpu_s,
            "output_bytes": self.output_bytes,
        }


@dataclass
class LaunchSpec:
    """Everything needed to start one worker; ``describe()`` goes into the scorecard.

    Under ``namespace`` the uid is leased machine-wide (:mod:`grader.sandbox.uids`) on first use and
    held while this spec (or another of this process for the same slot) lives.
    """

    backend: BackendName
    slot: int = 0
    threads: int = 1
    limits: Limits = field(default_factory=Limits)
    _lease: uids.Lease | None = field(default=None, init=False, repr=False, compare=False)

    @property
    def uid(self) -> int:
        if not self.drops_uid:
            return os.getuid() if os.name == "posix" else 0
        if self._lease is None or not self._lease.held:
            self._lease = uids.lease_for_slot(self.slot)
        return self._lease.uid

    @property
    def drops_uid(self) -> bool:
        """Whether student code runs as a leased, unprivileged uid: always, under every level, when
        we are root (bwrap never runs as root: it maps its sandbox uid to root then, sandbox.md
        §2)."""
        return self.backend != "bwrap" and choice.is_root()

    @property
    def box_inside(self) -> str | None:
        """The worker's own ``/box`` (a private mount of ``namespace``/``bwrap``, filled as the
        sandbox is built); None where it reads the host folder, which it may not write."""
        return "/box" if self.backend in ("namespace", "bwrap") else None

    @property
    def file_view(self) -> str:
        """What limits the files the worker can reach: ``namespace``/``bwrap`` (a private mount
        tree), ``landlock`` (``process`` where the kernel has it), ``permissions`` (``process``
        without it: only the leased uid's file permissions, checked by
        :func:`grader.sandbox.secrets.check`), ``none``."""
        if self.backend == "process":
            return "landlock" if choice.landlock_abi() > 0 else "permissions"
        return self.backend

    def fingerprint(self) -> str:
        """What of this launch decides whether a proof made under it holds for another (the canary's
        cache key): without side effects (no uid is leased, no cgroup made)."""
        return json.dumps(
            {
                "backend": self.backend,
                "drops_uid": self.drops_uid,
                "file_view": self.file_view,
                "landlock": choice.landlock_abi(),
                "seccomp": self.seccomp,
                "threads": self.threads,
                "cgroups": self._wants_cgroups() and ("v2" if cgroups.unified() else "v1"),
                "limits": self.limits.to_dict(),
                "gpus": self.gpus(),
            },
            sort_keys=True,
        )

    def unreadable(self) -> list[str]:
        """What this launch's worker needs but its leased uid cannot read ([] when it can, or keeps
        our uid, or gets a view of its own)."""
        if not self.drops_uid or self.backend not in ("process", "none"):
            return []
        return mirror.unreachable()

    def expected(self) -> Expected:
        """What every process of a worker launched under this spec must show in /proc
        (:mod:`attest`)."""
        return Expected(
            uid=self.uid,
            seccomp=self.seccomp,
            no_new_privs=self.backend != "none",
            namespaces=NAMESPACE_KINDS
            if self.backend == "namespace"
            else ("user", *NAMESPACE_KINDS)
            if self.backend == "bwrap"
            else (),
        )

    def _wants_cgroups(self) -> bool:
        # a root `process` sandbox is held by the cgroups as much as `namespace` (the leased uid's
        # RLIMIT_NPROC too)
        return self.backend == "namespace" or (self.backend == "process" and choice.is_root())

    def cgroup_paths(self) -> list[str]:
        if not self._wants_cgroups():
            return []
        return cgroups.slot_groups(
            self.slot, memory_mb=self.limits.memory_mb, processes=self.limits.processes
        )

    @property
    def seccomp(self) -> bool:
        """Whether the launch installs the filter (it then fails, exit 125, rather than run without
        it)."""
        return self.backend in ("namespace", "process") and seccomp.supported()

    def gpus(self) -> list[str]:
        return gpu_devices() if self.backend in ("namespace", "process") else []

    def describe(self) -> dict[str, Any]:
        """The isolation record as launched; ``attested`` turns true once /proc confirmed it
        (:mod:`attest`)."""
        groups = self.cgroup_paths()
        record = {
            "backend": self.backend,
            "uid": self.uid,
            "limits": self.limits.to_dict(),
            "cgroup": ("v2" if cgroups.unified() else "v1") if groups else "none",
            "seccomp": self.seccomp,
            "threads": self.threads,
            "file_view": self.file_view,
            "attested": False,
        }
        if self.gpus():
            record["gpu"] = gpu_record(self.gpus(), self.limits, bool(groups))
        return record

    def config(
        self, box: Path, response_fd: int, status_fd: int | None, root_dir: str, scratch: str = ""
    ) -> dict[str, Any]:
        gpus = self.gpus()
        lib = str(privlib.ensure())
        cfg: dict[str, Any] = {
            "mode": self.backend,
            "python": sys.executable,
            "lib": lib,
            "site_dirs": site_dirs(),
            "threads": self.threads,
            "response_fd": response_fd,
            "box": str(box),
            "uid": self.uid,
            "limits": self.limits.to_dict(),
            "root_dir": root_dir,
            "seccomp": self.seccomp,
            "address_space_limit": not gpus,
            "extra_env": gpu_env(gpus, self.limits),
            "scratch": scratch,
            "box_bytes": safefs.BOX_BYTES,
            "box_inodes": safefs.BOX_INODES,
        }  # the one size budget, intake's
        cfg["cgroups"] = self.cgroup_paths()
        cfg["drop_uid"] = self.drops_uid
        if self.drops_uid and self.backend in (
            "process",
            "none",
        ):  # a leased uid without a view of its own
            cfg["python"] = view.worker_python() or sys.executable
        if self.file_view == "landlock":
            cfg["landlock"] = view.landlock_rules(
                box, scratch, lib, bool(gpus), sites=mirror.site_dirs(), entries=mirror.packages()
            )
        if self.backend == "namespace":
            cfg.update(
                status_fd=status_fd,
                python=view.interpreter(),
                binds=view.binds(bool(gpus)),
                masks=list(view.masks(bool(gpus))),
                packages=mirror.packages(),
                gpu_devices=gpus,
            )
        if self.backend == "bwrap":
            cfg.update(python=view.interpreter(), bwrap_argv=bwrap_argv(box))
        return cfg


def site_dirs() -> list[str]:
    """The worker's package folders (after its own lib): where torch and its dependency closure
    live, or their mirrors where a leased uid cannot reach them (:mod:`grader.sandbox.mirror`)."""
    return mirror.site_dirs()


def gpu_devices() -> list[str]:
    return sorted(p.name for p in Path("/dev").glob("nvidia*") if not p.is_dir())


def gpu_env(gpus: list[str], limits: Limits) -> dict[str, str]:
    """The worker's GPU memory cap (read by ``grader.inside.gpu``): only when a GPU is exposed."""
    return {"GRADER_GPU_MEMORY_MB": str(limits.memory_mb)} if gpus else {}


def gpu_record(gpus: list[str], limits: Limits, cgroup: bool) -> dict[str, Any]:
    """What the isolation record says about a GPU sandbox, honestly: which limits the kernel
    enforces.

    CUDA initialisation fails under RLIMIT_AS (4 and 16 GiB measured on an H100), so host memory is
    held by RLIMIT_DATA instead (CUDA starts under it; private anonymous memory, torch's CPU
    tensors, stays capped) and by the cgroup where one is writable (it also holds shared and kernel
    memory). GPU memory has no kernel-enforced per-process limit without MIG/MPS: the worker sets
    torch's per-process memory fraction, which student code can raise again.
    """
    return {
        "devices": gpus,
        "address_space_limit": False,
        "host_memory": "cgroup+data-rlimit" if cgroup else "data-rlimit",
        "gpu_memory_mb": limits.memory_mb,
        "gpu_memory_enforced": False,
        "gpu_memory_how": "torch.cuda.set_per_process_memory_fraction in the worker (advisory)",
    }


def bwrap_argv(box: Path) -> list[str]:
    argv = [
        shutil.which("bwrap") or "bwrap",
        "--unshare-all",
        "--disable-userns",
        "--die-with-parent",
        "--new-session",
        "--proc",
        "/proc",
        "--dev",
        "/dev",
        "--tmpfs",
        "/tmp",
        "--bind",
        str(box),
        "/box",
        "--chdir",
        "/box",
    ]
    for (
        package
    ) in INSIDE_PACKAGES:  # only the inside of the wall: never the trusted side of `grader`
        argv += [
            "--ro-bind",
            str(privlib.ensure() / "grader" / package),
            f"/sandbox-lib/grader/{package}",
        ]
    gpu = bool(gpu_devices())
    argv += [
        a for path in view.binds(gpu) if os.path.exists(path) for a in ("--ro-bind", path, path)
    ]
    argv += [
        a for path in view.masks(gpu) for a in ("--tmpfs", path)
    ]  # empty the package folders ...
    argv += [
        a for path in view.packages() for a in ("--ro-bind", path, path)
    ]  # ... then add torch's closure
    argv += [a for path in view.masks(gpu) for a in ("--remount-ro", path)]
    return argv
