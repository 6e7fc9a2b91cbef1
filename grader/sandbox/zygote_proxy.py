"""The zygote's forked child (the proxy): take the worker's fds, isolate exactly as the launcher
would, become the worker.

:func:`proxy` runs in a child just forked by :mod:`grader.sandbox.zygote` and never returns: it puts
the five fds of a launch request (:data:`FDS`, in the order they come) on the worker's fd numbers,
then isolates through the launcher's own code (``namespace``: a fresh namespace whose pid 1 becomes
the worker; ``none``/``process``: a child in its own folder with cgroups, rlimits, keyring,
Landlock, seccomp) before the worker loads the submission. A set-up failure is reported on stderr
and the status pipe, never run with less isolation. Loaded only inside the zygote (after its
``sys.path`` is set), from the sandbox side's library.
"""

from __future__ import annotations

import fcntl
import os
import signal
import socket
import sys

TYPE_CHECKING = False  # as in launcher.py: no `typing` import for an annotation
if TYPE_CHECKING:
    from grader.sandbox.launcher import Config

FDS = ("requests", "responses", "stdout", "stderr", "status")  # a launch request's fds, in order
# where the worker finds each of them
_TARGET = {"requests": 0, "stdout": 1, "stderr": 2, "responses": 3, "status": 4}


def proxy(control: socket.socket, cfg: Config, fds: list[int], zygote: int) -> None:
    """The forked child: take the worker's fds, then isolate exactly as the launcher would, never
    returning."""
    try:
        from grader.sandbox import launcher

        control.close()
        launcher.libc.prctl(
            launcher.PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0
        )  # a chain: slot → zygote → us
        if os.getppid() != zygote:
            os._exit(125)  # the zygote died before the line above: nothing would kill us any more
        os.setsid()
        high = [
            fcntl.fcntl(fd, fcntl.F_DUPFD, 64) for fd in fds
        ]  # out of the way of the targets 0-4
        for name, fd in zip(FDS, high):
            os.dup2(fd, _TARGET[name])
        os.closerange(5, os.sysconf("SC_OPEN_MAX"))
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        cfg["response_fd"], status_fd = 3, 4
        os.write(status_fd, f"proxy {os.getpid()}\n".encode())
        if cfg["mode"] == "namespace":
            launcher.run_namespace(
                cfg, status_fd, lambda: _become_worker(cfg, "/sandbox-lib", "/box"), True
            )
        _run_plain(cfg, status_fd)
    except BaseException as exc:  # noqa: BLE001 - a set-up failure is reported, never run unisolated
        _say(2, f"sandbox set-up failed: {exc}\n")
        _say(4, "exit 125\n")
    os._exit(125)


def _say(fd: int, text: str) -> None:
    try:
        os.write(fd, text.encode())
    except OSError:
        pass


def _run_plain(cfg: Config, status_fd: int) -> None:
    """``none``/``process``: the worker is a child of this proxy in its own folder (and cgroups,
    rlimits)."""
    from grader.sandbox import launcher

    child = launcher.fork_handing_over(cfg)
    if child == 0:
        try:
            launcher.libc.prctl(launcher.PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
            os.close(status_fd)
            os.chdir(cfg["box"])
            launcher.isolate_plain(
                cfg
            )  # the leased uid; for `process` cgroups, rlimits, keyring, Landlock, seccomp
        except BaseException as exc:  # noqa: BLE001 - never run with less isolation than recorded
            _say(2, f"sandbox set-up failed: {exc}\n")
            os._exit(launcher.SETUP_FAILED)
        _become_worker(cfg, cfg["lib"], cfg["box"])
    code = launcher.reap_until(child)
    os.write(status_fd, f"exit {code}\n".encode())
    os._exit(code)


def _become_worker(cfg: Config, lib: str, home: str) -> None:
    """Turn this (already isolated) forked child into the worker: fresh environment, then serve."""
    from grader.inside import worker
    from grader.sandbox import launcher

    try:
        os.environ.clear()
        os.environ.update(launcher.workerenv.worker_env(cfg, home))
        sys.path[:] = [
            lib,
            *cfg["site_dirs"],
            *(p for p in sys.path if p.startswith(sys.base_prefix)),
        ]
        code = worker.serve_forever(threads=int(cfg["threads"]), response_fd=3)
    except BaseException:  # noqa: BLE001 - the worker's own failure: its exit status tells the runner
        code = 1
    os._exit(code)
