"""The zygote: a clean interpreter that imports torch once and forks one sandboxed worker per
request.

Run as ``python -I -S -B zygote.py CONFIG_JSON`` by :class:`grader.sandbox.zygote_client.Zygote`
(one per batch slot). ``import torch`` costs 1.2-2 CPU-seconds, more than everything else a grade
does; forking an interpreter that already has it costs milliseconds (sandbox.md §3.3).

What keeps this safe:

- it is exec'd fresh (never a fork of the runner) and loads only torch and the worker's own modules,
  so nothing secret (tests, references, the grading seed) is in the memory a worker inherits;
- it never runs student code; each request forks a child that isolates itself exactly as the
  launcher does, through the launcher's own code (the namespace allowlist root, leased uid, rlimits,
  cgroups, fresh keyring, seccomp filter) before the worker loads the submission;
- it stays at one torch thread and never touches CUDA: a process that has run a parallel OpenMP
  op or initialised CUDA cannot fork usable children (sandbox.md §3.3, the "OpenMP fork trap").

Protocol on the control socket (fd from CONFIG): the runner sends one JSON launch config with the
worker's five fds attached (requests, responses, stdout, stderr, status); the zygote answers
nothing. A config whose privilege class differs from the zygote's own is refused: a root zygote
forks only workers that drop to a leased uid, a non-root one only workers that stay (so one zygote
is never shared between levels that drop privileges and levels that do not). CONFIG is ``-`` when it
comes on stdin: the long-lived zygote's socket path is never in an argv, which ``/proc`` shows to
anyone. The status pipe carries ``proxy <pid>``, then ``<pid of the namespace's pid 1>`` (namespace
mode), then ``exit <code>`` when the worker has ended. What each forked child does (isolate, become
the worker) is :mod:`grader.sandbox.zygote_proxy`; this module serves requests and forks.
"""

from __future__ import annotations

import json
import os
import select
import signal
import socket
import struct
import sys
import time

TYPE_CHECKING = False  # as in launcher.py: no `typing` import for an annotation
if TYPE_CHECKING:
    from grader.sandbox.launcher import Config

PR_SET_CHILD_SUBREAPER = 36
REAP_EVERY_S = 0.2


def main() -> int:
    config = json.loads(sys.stdin.read() if sys.argv[1] == "-" else sys.argv[1])
    sys.path[:0] = [config["lib"], *config["site_dirs"]]
    from grader.sandbox import launcher

    if "listen" in config:
        return _serve_listening(config["listen"], float(config["idle_s"]))
    launcher.libc.prctl(
        launcher.PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0
    )  # the slot dies: so do we
    # a killed proxy orphans its namespace's pid 1: reap it here, not by a host init that may take
    # seconds, since a zombie still counts against its (leased) uid's processes
    launcher.libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    control = socket.socket(fileno=int(config["control_fd"]))
    _warm_up()
    control.sendall(
        json.dumps({"ready": True, "tasks": len(os.listdir("/proc/self/task"))}).encode() + b"\n"
    )
    while True:
        _reap()
        readable, _, _ = select.select([control], [], [], REAP_EVERY_S)
        if readable and _serve_one(control) is None:
            return 0  # the slot closed its end


def _serve_one(control: socket.socket) -> int | None:
    """Read one launch request and fork its worker: the proxy's pid, 0 for a malformed request, None
    on EOF."""
    from grader.sandbox import zygote_proxy

    message, fds, _, _ = socket.recv_fds(control, 1 << 16, len(zygote_proxy.FDS))
    if not message:
        return None
    try:
        cfg = json.loads(message)
    except ValueError:
        cfg = None
    if len(fds) != len(zygote_proxy.FDS) or type(cfg) is not dict or not _same_class(cfg):
        _close(fds)
        return 0
    me = os.getpid()
    child = os.fork()
    if child == 0:
        # never returns: a child must never fall back into this loop
        zygote_proxy.proxy(control, cfg, fds, me)
    _close(fds)
    return child


def _same_class(cfg: Config) -> bool:
    """Whether ``cfg`` drops privileges exactly when this zygote could (root) : see the module
    docstring."""
    if os.geteuid() == 0:
        return cfg.get("drop_uid") is True and isinstance(cfg.get("uid"), int) and cfg["uid"] > 0
    return not cfg.get("drop_uid")


def _serve_listening(path: str, idle_s: float) -> int:
    """A user's long-lived zygote (:mod:`grader.sandbox.shared_zygote`): detach, warm up, then
    publish a listening socket at ``path`` and serve launch requests from processes of this uid
    until ``idle_s`` pass with no client.

    The socket appears under its name only once torch is warm (bound under a temporary name, then
    renamed), so a client that connects is served at once. A client's workers die with its
    connection: a grader killed outright leaves no worker behind (the batch zygote gets the same
    from its PDEATHSIG chain)."""
    bound_r, bound_w = os.pipe()
    if os.fork():
        # the starter waits for this parent only, and this parent for the child's staging name:
        # once `start()` returns, a client sees this zygote warming (never a moment with neither
        # name, when a loaded machine's slot would start a zygote of its own)
        os.close(bound_w)
        os.read(bound_r, 1)
        os._exit(0)
    os.close(bound_r)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    staging = f"{path}.{os.getpid()}"
    listener.bind(staging)
    os.chmod(staging, 0o600)
    listener.listen(8)
    os.close(bound_w)  # the parent's read returns (EOF)
    from grader.sandbox import launcher

    launcher.libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    _warm_up()
    _write_pid_file(
        f"{path}.pid"
    )  # before the socket appears: a client that reaches it can check who it is
    os.rename(staging, path)
    published = os.stat(path).st_ino
    clients: dict[socket.socket, list[int]] = {}
    idle_since = time.monotonic()
    while clients or (time.monotonic() - idle_since < idle_s and _still_published(path, published)):
        _reap()
        readable, _, _ = select.select([listener, *clients], [], [], REAP_EVERY_S)
        for ready in readable:
            if ready is listener:
                _accept(listener, clients)
            else:
                _serve_client(ready, clients)
        if clients:
            idle_since = time.monotonic()
    if _still_published(path, published):
        for name in (path, f"{path}.pid"):
            try:
                os.unlink(name)
            except OSError:
                pass
    return 0


def _write_pid_file(path: str) -> None:
    """Who serves the socket (pid and start time), for clients to check the peer they reach is this
    zygote."""
    with open(f"/proc/{os.getpid()}/stat", encoding="ascii") as fh:
        # field 22 of stat: start time in clock ticks
        started = fh.read().rpartition(")")[2].split()[19]
    staging = f"{path}.{os.getpid()}"
    fd = os.open(staging, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as fh:
        fh.write(f"{os.getpid()} {started}\n")
    os.rename(staging, path)


def _accept(listener: socket.socket, clients: dict[socket.socket, list[int]]) -> None:
    """A new client, kept only when it runs as this zygote's own user (the folder is private
    too)."""
    conn, _ = listener.accept()
    _pid, uid, _gid = struct.unpack(
        "3i", conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    )
    if uid != os.getuid():
        conn.close()
        return
    clients[conn] = []


def _serve_client(conn: socket.socket, clients: dict[socket.socket, list[int]]) -> None:
    try:
        child = _serve_one(conn)
    except OSError:
        child = None
    if child:
        clients[conn].append(child)
    elif child is None:  # the client is gone: so are the workers it asked for
        for proxy in clients.pop(conn):
            try:
                os.kill(proxy, signal.SIGKILL)
            except OSError:
                pass
        conn.close()


def _still_published(path: str, inode: int) -> bool:
    """Whether ``path`` is still this zygote's socket (a newer zygote may have replaced it)."""
    try:
        return os.stat(path).st_ino == inode
    except OSError:
        return False


def _warm_up() -> None:
    """Import torch and run, once and single-threaded, the first-use paths every worker would pay
    for."""
    import torch

    torch.set_num_threads(1)
    from grader.inside import warmup, worker  # noqa: F401  (the worker module too: every fork runs it)
    from grader.sandbox import zygote_proxy  # noqa: F401  (the proxy too: every fork runs it)

    warmup.warm_up()
    import gc

    # every object so far goes to the permanent generation: a child's collections never touch (and
    # so never copy) the pages holding torch's own objects; 0.2-0.3 s of each forked worker's grade
    # went to those copies
    gc.freeze()


def _reap() -> None:
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def _close(fds: list[int]) -> None:
    for fd in fds:
        try:
            os.close(fd)
        except OSError:
            pass


if __name__ == "__main__":
    sys.exit(main())
