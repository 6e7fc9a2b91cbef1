"""This user's long-lived zygote, shared by ``grader grade`` runs (trusted side).

A cold ``grader grade`` waited about 1.3 s for its sandboxed worker to import torch and warm up,
longer than the trusted side takes to import everything it needs. A batch slot's zygote
(:mod:`zygote_client`) solves this within one batch; here the same zygote program outlives one
command: the first ``grader grade`` starts it after its own work is done, and later runs fork their
workers from it in milliseconds.

What keeps it as safe as a batch slot's zygote (see :mod:`grader.sandbox.zygote`):

- it is exec'd fresh (``python -I -S -B``, an allowlisted environment, ``/`` as its folder), imports
  only torch and the sandbox side's own modules, never runs student code, and holds nothing secret:
  no tests, references or seeds ever reach it, only launch configurations;
- its socket sits in a folder only this user can enter, and it serves only processes of this user
  (``SO_PEERCRED``); a sandboxed worker cannot see the folder (its own mount namespace, or Landlock,
  and a leased uid), and the path is in no argv (the config comes on stdin);
- the broker is authenticated to the client too (:func:`connect`): the peer a client reaches must be
  the process named in the pid file beside the socket (same pid and start time), run by this user
  from this interpreter, under no more confinement than this process (every sandboxed process has
  ``no_new_privs`` and a seccomp filter): a socket put there by anything else is removed, never
  used;
- its name is a digest of everything it was started from (the interpreter, torch's folders, the
  sandbox side's library, whether it drops privileges): a changed grader or environment starts a
  fresh zygote, the old one goes idle, and a root zygote (whose workers drop to leased uids) is
  never a non-root one's;
- it ends after ``$GRADER_KEEP_WARM`` idle seconds (default 900; ``0`` turns all of this off), and
  the workers a client asked for die with that client's connection.
"""

from __future__ import annotations

import hashlib
import json
import os
import socket
import stat
import struct
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

from grader import procs
from grader.sandbox import privlib, workerenv
from grader.sandbox.isolation import site_dirs
from grader.sandbox.privileges import status_fields
from grader.sandbox.zygote_client import Zygote, zygote_python, zygote_script

ENV = "GRADER_KEEP_WARM"
DEFAULT_IDLE_S = 900.0
# how long a command waits for a zygote it started to be warm (1.5-4 s; longer when loaded)
WARM_UP_WAIT_S = 30.0
MAX_PATH = 96  # sun_path holds 108 bytes, and the zygote binds "<path>.<pid>" first


class SharedZygote(Zygote):
    """A connection to the user's zygote: the launch protocol of :class:`Zygote`, without owning its
    process."""

    def __init__(self, sock: socket.socket) -> None:  # no process to start: it is already running
        self.sock, self.ready = sock, True

    @property
    def alive(self) -> bool:
        return self.ready

    def wait_ready(self, timeout: float = 0.0) -> bool:
        return self.ready

    def close(self) -> None:
        """Hang up: the zygote kills whatever workers this connection still has, and lives on."""
        self.ready = False
        self.sock.close()


def idle_seconds() -> float:
    """How long the zygote waits for its next client; 0 when ``$GRADER_KEEP_WARM`` turns sharing
    off."""
    try:
        return max(0.0, float(os.environ.get(ENV, DEFAULT_IDLE_S)))
    except ValueError:
        return DEFAULT_IDLE_S


def connect() -> SharedZygote | None:
    """The running zygote for this grader and environment, or None (none yet, sharing off, no safe
    folder)."""
    path = socket_path()
    if path is None:
        return None
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    try:
        sock.connect(str(path))
    except OSError:
        sock.close()
        return None
    if not authentic(sock, path):
        sock.close()
        for name in (
            path,
            Path(f"{path}.pid"),
        ):  # an impostor's socket: gone, so a real zygote can start
            name.unlink(missing_ok=True)
        return None
    return SharedZygote(sock)


def authentic(sock: socket.socket, path: Path) -> bool:
    """Whether the peer of ``sock`` is the zygote that published ``path`` (see the module
    docstring)."""
    pid, uid, _gid = struct.unpack(
        "3i", sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    )
    try:
        named, started = Path(f"{path}.pid").read_text("ascii").split()
        with open(f"/proc/{pid}/stat", encoding="ascii") as fh:
            running_since = fh.read().rpartition(")")[2].split()[19]
        theirs, ours = status_fields(f"/proc/{pid}/status"), status_fields()
        exe = os.path.realpath(f"/proc/{pid}/exe")
    except (OSError, ValueError):
        return False
    confined = any(theirs.get(k) != ours.get(k) for k in ("NoNewPrivs:", "Seccomp:"))
    return (
        uid == os.geteuid()
        and named == str(pid)
        and started == running_since
        and not confined
        and exe == os.path.realpath(zygote_python())
    )


def connect_when_warm(wait_s: float) -> SharedZygote | None:
    """:func:`connect`, waiting up to ``wait_s`` while a zygote for this grader is still warming up
    (its socket is published under its name once torch is warm); None at once when none is running
    or warming."""
    deadline = time.monotonic() + wait_s
    while True:
        zygote = connect()
        if zygote is not None or time.monotonic() >= deadline:
            return zygote
        if not warming():  # it may have renamed its socket since the try above: one more
            return connect()
        time.sleep(0.05)


def warming() -> bool:
    """Whether a zygote for this grader is alive and warming up (bound under ``<socket>.<pid>``, not
    yet renamed)."""
    path = socket_path()
    if path is None:
        return False
    for staging in path.parent.glob(f"{path.name}.*"):
        pid = staging.name.rsplit(".", 1)[1]
        if pid.isdigit() and procs.alive(int(pid)):
            return True
    return False


def warm(prepare: Callable[[], object] = lambda: None) -> SharedZygote | None:
    """A connection to this grader's zygote, started now if none runs or warms up, once it is warm;
    ``prepare`` runs meanwhile (the caller's own imports). None: sharing is off, or none was warm
    within WARM_UP_WAIT_S."""
    zygote = connect()
    if zygote is not None or not (warming() or start()):  # ensure(), less the connection just tried
        return zygote
    prepare()
    return connect_when_warm(WARM_UP_WAIT_S)


def ensure() -> bool:
    """This grader's zygote is running or starting (started now, in the background, if it was
    neither)."""
    zygote = connect()
    if zygote is not None:
        zygote.close()
        return True
    return warming() or start()


def start() -> bool:
    """Start one in the background (it publishes its socket when warm, in about a second); False if
    not."""
    path = socket_path()
    if path is None:
        return False
    config = {
        "lib": str(privlib.ensure()),
        "site_dirs": site_dirs(),
        "listen": str(path),
        "idle_s": idle_seconds(),
    }
    # the config on stdin: the socket's path is never in an argv (/proc/<pid>/cmdline is public)
    try:
        subprocess.run(
            [zygote_python(), "-I", "-S", "-B", str(zygote_script()), "-"],
            check=True,
            timeout=30,
            input=json.dumps(config).encode(),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
            cwd="/",
            env={
                "PATH": "/usr/bin:/bin",
                "LANG": "C.UTF-8",
                "OMP_NUM_THREADS": "1",
                **workerenv.MALLOC_ENV,
            },
        )
    except (OSError, subprocess.SubprocessError):
        return False
    return True  # its first process forks the zygote and exits at once


def socket_path() -> Path | None:
    """``<cache>/zygotes/<digest>.sock`` in a folder private to this user; None when sharing is off
    or unsafe."""
    if idle_seconds() <= 0 or not hasattr(os, "getuid"):
        return None
    folder = procs.cache_root() / "zygotes"
    try:
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        info = folder.lstat()
    except OSError:
        return None
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid() or info.st_mode & 0o077:
        # a link, someone else's folder, or one others may enter: no socket of ours goes there
        return None
    path = folder / f"{digest()}.sock"
    return path if len(str(path)) <= MAX_PATH else None


def digest() -> str:
    """Names the zygote after what it runs: the interpreter, torch's folders, the sandbox side's
    library (a folder named after its content) and whether its workers drop privileges (root) or
    not."""
    drops = hasattr(os, "geteuid") and os.geteuid() == 0
    what = [os.path.realpath(zygote_python()), str(privlib.ensure()), site_dirs(), drops]
    return hashlib.sha256(json.dumps(what).encode()).hexdigest()[:24]
