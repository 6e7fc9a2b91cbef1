"""How the trusted side starts its own Python subprocesses: isolated from wherever it was run.

A grader run from inside a class folder (``cd class && grader batch .``) must never import a
student's ``jsonschema.py`` or ``torch.py``. Every trusted interpreter therefore starts with ``-I``
(no current directory or script folder on ``sys.path``, no ``PYTHON*`` variables, no user site),
in the root directory, with a small allowlisted environment, and finds ``grader`` by the explicit
folder it was installed in (:data:`LIB_ROOT`), never by the working directory.
"""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

LIB_ROOT = Path(__file__).resolve().parents[1]  # the folder holding the `grader` package
CACHE_ENV = "GRADER_CACHE_DIR"
SAFE_CWD = "/"
_PASS_ENV = ("PATH", "LANG", "LC_ALL", "HOME", "TMPDIR", "SLURM_ARRAY_TASK_ID")
_BOOT = (
    "import sys; sys.path.insert(0, sys.argv[1]); import runpy; "
    "sys.argv = [sys.argv[2], *sys.argv[3:]]; runpy.run_module(sys.argv[0], run_name='__main__', alter_sys=True)"
)


def module_argv(module: str, *args: str, site: bool = True) -> list[str]:
    """``python -I`` running ``module`` as ``__main__`` with ``grader`` imported from
    :data:`LIB_ROOT` only (``site=False``: also ``-S``, for a stdlib-only module: no site-packages,
    a 0.1 s faster start)."""
    return [
        sys.executable,
        "-I",
        *([] if site else ["-S"]),
        "-c",
        _BOOT,
        str(LIB_ROOT),
        module,
        *args,
    ]


def env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment a trusted subprocess gets: a few plain variables and our own ``GRADER_*``
    ones."""
    kept = {k: v for k, v in os.environ.items() if k in _PASS_ENV or k.startswith("GRADER_")}
    kept.setdefault("PATH", "/usr/bin:/bin")
    kept.setdefault("LANG", "C.UTF-8")
    return {**kept, **(extra or {})}


def popen_kwargs(extra_env: Mapping[str, str] | None = None) -> dict[str, Any]:
    """``cwd`` and ``env`` for ``subprocess.Popen``/``run`` of any trusted process."""
    return {"cwd": SAFE_CWD, "env": env(extra_env)}


def cache_root() -> Path:
    """This user's cache folder for the grader (``$GRADER_CACHE_DIR``, else the XDG cache): the
    canary's proofs and the long-lived zygote's socket live below it."""
    base = (
        os.environ.get(CACHE_ENV) or os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    )
    return Path(base) / "attention-grader"


def own_folder(candidates: Sequence[Path], mode: int) -> Path | None:
    """The first of ``candidates`` that is (or is made now as) a real folder of ours that no one
    else may write: not a link, not another user's, not group- or world-writable (a planted folder
    under /tmp is none of these)."""
    for path in candidates:
        try:
            path.mkdir(mode=mode, parents=True, exist_ok=True)
            info = path.lstat()
        except OSError:
            continue
        if stat.S_ISDIR(info.st_mode) and info.st_uid == os.geteuid() and not info.st_mode & 0o022:
            return path
    return None


def alive(pid: int) -> bool:
    """Whether process ``pid`` exists (another user's process counts: signalling it is refused, not
    missing)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def limit_self(*, cpu_s: int, memory_bytes: int) -> None:
    """Cap this process's address space at ``memory_bytes`` and its CPU time at ``cpu_s`` (SIGXCPU,
    then SIGKILL a second later): the first thing a :func:`run_bounded` child does, before it reads
    a byte of its input."""
    import resource

    resource.setrlimit(resource.RLIMIT_AS, (memory_bytes, memory_bytes))
    resource.setrlimit(resource.RLIMIT_CPU, (cpu_s, cpu_s + 1))


def run_bounded(
    module: str, *args: str, what: str, wall_s: float, cpu_s: float, **io: Any
) -> subprocess.CompletedProcess[bytes]:
    """Run stdlib-only ``module`` (which limits its own CPU time and memory) to completion, its
    output captured; ``io``: ``stdin=`` or ``input=``. A child that cannot start, or runs ``wall_s``
    without using its ``cpu_s`` (the machine is starved), is the grader's problem:
    :class:`~grader.errors.GraderFault` naming ``what``."""
    from grader.errors import GraderFault

    try:
        return subprocess.run(
            module_argv(module, *args, site=False),
            capture_output=True,
            timeout=wall_s,
            check=False,
            **io,
            **popen_kwargs(),
        )
    except subprocess.TimeoutExpired:
        raise GraderFault(
            f"{what} ran for {wall_s:g} s without using {cpu_s:g} s of CPU "
            "(the machine is overloaded)"
        ) from None
    except OSError as exc:
        raise GraderFault(f"{what} could not start: {exc}") from None
