"""Start a worker under one isolation mode. Run as ``python -I -S -B launcher.py CONFIG_JSON``.

A fresh, single-threaded, stdlib-only interpreter (never a fork of the torch-laden runner) that
sets up isolation and then ``exec``s the worker (sandbox.md §6.1):

- ``none``: a separate process in a temporary folder (no OS isolation; a root grader still drops to
  the leased uid);
- ``process``: plus rlimits (CPU, address space, processes, file size, open files, no core), a
  fresh session keyring, the leased uid when root, ``no_new_privs``, the Landlock file view where
  the kernel has one (:mod:`grader.sandbox.landlock`) and the seccomp filter
  (:mod:`grader.sandbox.seccomp`);
- ``namespace`` (root): mount/net/ipc/uts/pid namespaces, a tmpfs root holding only an allowlist
  of read-only binds (:mod:`grader.sandbox.view`; mounted by :mod:`grader.sandbox.rootfs`), ``/box``
  on tmpfs, cgroup memory/pids when writable, a fresh session keyring, a leased uid, a mini-init as
  pid 1, ``no_new_privs``, the seccomp filter, then rlimits and exec.

A filter the isolation record promises is installed or the launch fails (exit 125, a set-up
failure).

The runner kills the whole sandbox by killing this process's group (``none``/``process``) or the
namespace's pid 1, whose host pid it reads from the status fd.
"""

from __future__ import annotations

import ctypes
import importlib.util
import json
import os
import resource
import signal
import sys
from collections.abc import Callable

# not `typing.TYPE_CHECKING`: importing typing would add ~9 ms to every cold start
TYPE_CHECKING = False
if TYPE_CHECKING:
    from types import ModuleType
    from typing import Any

    Config = dict[
        str, Any
    ]  # the launch configuration, as JSON-decoded from argv (LaunchSpec.config builds it)

NEWNS, NEWCGROUP, NEWUTS, NEWIPC, NEWPID, NEWNET = (
    0x20000,
    0x2000000,
    0x4000000,
    0x8000000,
    0x20000000,
    0x40000000,
)
PR_SET_PDEATHSIG, PR_SET_NO_NEW_PRIVS = 1, 38
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
KEYCTL_JOIN_SESSION_KEYRING = 1
SETUP_FAILED = 125


def _sibling(name: str) -> ModuleType:
    """A stdlib-only sibling module: imported normally, or by path when run as ``python -I -S
    launcher.py``."""
    if __package__:
        return importlib.import_module(f"{__package__}.{name}")
    path = os.path.join(os.path.dirname(__file__), f"{name}.py")
    spec = importlib.util.spec_from_file_location(f"_sandbox_{name}", path)
    assert spec is not None and spec.loader is not None  # a .py path always has a spec and a loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


seccomp, workerenv, privileges, landlock, rootfs = (
    _sibling(n) for n in ("seccomp", "workerenv", "privileges", "landlock", "rootfs")
)


def set_limits(limits: dict[str, Any], address_space: bool = True) -> None:
    """The rlimits. Memory: RLIMIT_AS, or RLIMIT_DATA where a GPU is exposed (CUDA cannot start
    under RLIMIT_AS of 4 or 16 GiB on an H100, but starts under RLIMIT_DATA, which still holds every
    private writable mapping)."""
    mb = 1 << 20
    memory = resource.RLIMIT_AS if address_space else resource.RLIMIT_DATA
    table = [
        (resource.RLIMIT_CPU, limits["cpu_s"], limits["cpu_s"] + 1),
        (memory, limits["memory_mb"] * mb, limits["memory_mb"] * mb),
        (resource.RLIMIT_FSIZE, limits["file_size_mb"] * mb, limits["file_size_mb"] * mb),
        (resource.RLIMIT_NOFILE, 256, 256),
        (resource.RLIMIT_CORE, 0, 0),
        (resource.RLIMIT_NPROC, limits["processes"], limits["processes"]),
    ]
    for which, soft, hard in table:
        resource.setrlimit(which, (int(soft), int(hard)))


def fresh_keyring() -> None:
    """Join a new, empty session keyring: the grader's own session keys stay out of the sandbox."""
    nr = seccomp.ARCHES.get(seccomp.machine(), (0, {}))[1].get("keyctl")
    if nr is None or libc.syscall(nr, KEYCTL_JOIN_SESSION_KEYRING, None) >= 0:
        return
    err = ctypes.get_errno()
    if err not in (
        38,
        1,
    ):  # ENOSYS / EPERM: no keyrings for us here, so none for the sandbox either
        raise OSError(err, f"keyctl(JOIN_SESSION_KEYRING): {os.strerror(err)}")


def lock_down(cfg: Config, view: int | None = None) -> None:
    """After the uid drop: no_new_privs, the Landlock ``view`` (a ruleset fd made before the drop),
    then the seccomp filter."""
    rootfs.check(libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "no_new_privs")
    if view is not None:
        landlock.enforce(view)
    if cfg.get("seccomp"):
        seccomp.install()


def limits_of(cfg: Config) -> None:
    set_limits(cfg["limits"], cfg.get("address_space_limit", True))


def worker_argv(cfg: Config, lib: str) -> list[str]:
    worker = os.path.join(lib, "grader", "inside", "worker.py")
    wcfg = {
        "lib": lib,
        "site_dirs": cfg["site_dirs"],
        "threads": cfg["threads"],
        "response_fd": cfg["response_fd"],
    }
    return [cfg["python"], "-I", "-S", "-B", worker, json.dumps(wcfg)]


def run_plain(cfg: Config) -> None:
    os.chdir(cfg["box"])
    isolate_plain(cfg)
    os.execve(cfg["python"], worker_argv(cfg, cfg["lib"]), workerenv.worker_env(cfg, cfg["box"]))


def isolate_plain(cfg: Config) -> None:
    """``process`` and ``none``, in the worker's own process before it becomes the worker: a root
    grader's student code runs as the leased uid under both; ``process`` adds everything else."""
    # paths opened while still root
    view = landlock.ruleset(cfg["landlock"]) if cfg.get("landlock") else None
    if cfg["mode"] == "process":
        join_cgroups(cfg)
        limits_of(cfg)
        fresh_keyring()
    if cfg.get("drop_uid"):
        privileges.drop_to(cfg["uid"])
    if cfg["mode"] == "process":
        lock_down(cfg, view)


# -- namespace mode (its root: rootfs.build_root) ----------------------------------------------
def join_cgroups(cfg: Config) -> None:
    for path in cfg.get("cgroups", []):
        with open(os.path.join(path, "cgroup.procs"), "w") as fh:
            fh.write(str(os.getpid()))


def pid1(cfg: Config, become_worker: Callable[[], None] | None = None) -> None:
    """pid 1 of the new pid namespace: build the root, drop to the slot uid, reap until the worker
    ends.

    The worker is pid 2: an exec'd fresh interpreter, or (from the zygote) ``become_worker()``.
    """
    root = cfg["root_dir"]
    rootfs.build_root(cfg, root)
    with open("/proc/self/oom_score_adj", "w") as fh:
        fh.write("1000")
    os.chroot(root)
    os.chdir("/box")
    libc.sethostname(b"sandbox", 7)
    limits_of(cfg)
    fresh_keyring()
    privileges.drop_to(cfg["uid"])
    lock_down(
        cfg
    )  # the mini-init is filtered too; the worker inherits the filter across fork and exec
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    worker = fork_handing_over(cfg)  # the mini-init keeps no pipe: the worker's EOF is the signal
    if worker == 0:
        if become_worker is not None:
            become_worker()
        os.execve(
            cfg["python"], worker_argv(cfg, "/sandbox-lib"), workerenv.worker_env(cfg, "/box")
        )
    os._exit(reap_until(worker))


def reap_until(child: int) -> int:
    """Reap every child (a mini-init's duty) until ``child`` ends; return its exit code (128+signal
    if killed)."""
    while True:
        pid, status = os.wait()
        if pid == child:
            return (
                os.waitstatus_to_exitcode(status) & 0xFF
                if os.WIFEXITED(status)
                else 128 + os.WTERMSIG(status)
            )


def fork_handing_over(cfg: Config) -> int:
    """Fork; the child goes on only once this parent has closed its copies of the worker's pipes.

    So from the worker's first frame on, only the sandbox holds the request pipe and whoever /proc
    shows holding it is the worker (:mod:`grader.sandbox.attest`). Without the wait a root parent
    descheduled between its fork and its close was attested as a root worker under load."""
    gate, release = os.pipe()
    child = os.fork()
    if child == 0:
        os.close(release)
        os.read(gate, 1)  # EOF: the parent has closed its copies (or died)
        os.close(gate)
        return 0
    os.close(gate)
    _close_pipes(cfg)
    os.close(release)
    return child


def _close_pipes(cfg: Config) -> None:
    for fd in (0, 1, 2, cfg["response_fd"]):
        try:
            os.close(fd)
        except OSError:
            pass


def probe_namespace() -> None:
    """Exit 0 when unshare, a tmpfs mount and a uid drop all work here."""
    rootfs.check(libc.unshare(NEWNS | NEWNET | NEWIPC | NEWUTS | NEWPID | NEWCGROUP), "unshare")
    child = os.fork()
    if child == 0:
        rootfs.mount(None, "/", None, rootfs.REC | rootfs.PRIVATE)
        rootfs.mount("tmpfs", "/mnt", "tmpfs", rootfs.NOSUID | rootfs.NODEV, "size=64k")
        os.setresuid(65534, 65534, 65534)
        os._exit(0)
    _, status = os.waitpid(child, 0)
    os._exit(os.waitstatus_to_exitcode(status))


def run_namespace(
    cfg: Config,
    status_fd: int,
    become_worker: Callable[[], None] | None = None,
    report_exit: bool = False,
) -> None:
    """Unshare, fork pid 1 and wait for it; its host pid goes to ``status_fd`` (and, if asked, its
    exit code)."""
    join_cgroups(cfg)
    rootfs.check(libc.unshare(NEWNS | NEWNET | NEWIPC | NEWUTS | NEWPID | NEWCGROUP), "unshare")
    child = fork_handing_over(cfg)
    if child == 0:
        try:
            os.close(status_fd)
            pid1(cfg, become_worker)
        except BaseException as exc:  # noqa: BLE001 - report a set-up failure, never run unisolated
            os.write(2, f"sandbox set-up failed: {exc}\n".encode())
            os._exit(SETUP_FAILED)
    os.write(status_fd, f"{child}\n".encode())
    if not report_exit:
        os.close(status_fd)
    _, status = os.waitpid(child, 0)
    code = (
        os.waitstatus_to_exitcode(status) & 0xFF
        if os.WIFEXITED(status)
        else 128 + os.WTERMSIG(status)
    )
    if report_exit:
        os.write(status_fd, f"exit {code}\n".encode())
    os._exit(code)


def main() -> None:
    if sys.argv[1] == "probe-namespace":
        probe_namespace()
    cfg = json.loads(sys.argv[1])
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)  # the runner dies: so does the sandbox
    if cfg["mode"] == "namespace":
        run_namespace(cfg, int(cfg["status_fd"]))
    elif cfg["mode"] == "bwrap":
        limits_of(cfg)
        argv = [*cfg["bwrap_argv"], *worker_argv(cfg, "/sandbox-lib")]
        os.execve(argv[0], argv, workerenv.worker_env(cfg, "/box"))
    else:
        try:
            run_plain(cfg)
        except BaseException as exc:  # noqa: BLE001 - never run with less isolation than recorded
            os.write(2, f"sandbox set-up failed: {exc}\n".encode())
            os._exit(SETUP_FAILED)


if __name__ == "__main__":
    main()
