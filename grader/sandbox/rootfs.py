"""The ``namespace`` sandbox's file system: a tmpfs root holding only an allowlist of read-only
binds.

Built by the namespace's pid 1 before it chroots (:func:`grader.sandbox.launcher.pid1`): ``/box``
(the submission's files, on a tmpfs of intake's size), ``/tmp``, a few device nodes, ``/proc``, the
read-only binds of :mod:`grader.sandbox.view` with the Python package folders emptied and only
torch's closure put back, and the inside of the wall of ``grader`` (never its trusted side) at
``/sandbox-lib``. Then the root itself is made read-only.

Kept apart from the launcher (which isolates a process and execs the worker) as the one place that
mounts. Stdlib only, like the launcher: loaded by path when the launcher runs as a script.
"""

from __future__ import annotations

import ctypes
import os
import shutil

TYPE_CHECKING = False  # as in launcher.py: no `typing` import for an annotation
if TYPE_CHECKING:
    from typing import Any

    Config = dict[str, Any]  # the launch configuration (launcher.Config)

RDONLY, NOSUID, NODEV, NOEXEC, REMOUNT, BIND, REC, PRIVATE = 1, 2, 4, 8, 32, 4096, 16384, 1 << 18
INSIDE_PACKAGES = ("inside", "protocol")  # the parts of `grader` a sandbox may see
_libc = ctypes.CDLL(None, use_errno=True)
_libc.mount.argtypes = [
    ctypes.c_char_p,
    ctypes.c_char_p,
    ctypes.c_char_p,
    ctypes.c_ulong,
    ctypes.c_char_p,
]


def check(rc: int, what: str) -> None:
    """A libc call's failure (``rc`` not 0) as ``OSError``, with errno's words (the launcher's calls
    too)."""
    if rc != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")


def mount(
    src: str | None, dst: str, fstype: str | None, flags: int, data: str | None = None
) -> None:
    def enc(s: str | None) -> bytes | None:
        return s.encode() if s else None

    check(_libc.mount(enc(src), enc(dst), enc(fstype), flags, enc(data)), f"mount {dst}")


def bind_ro(src: str, dst: str) -> None:
    """Bind ``src`` read-only at ``dst``, making the mount point only where none exists: ``dst`` may
    already be visible through an earlier bind (the interpreter /usr/bin/python3.12 under /usr), and
    opening that file to create it fails (ETXTBSY for the running interpreter, EROFS in a read-only
    bind)."""
    if os.path.isdir(src):
        os.makedirs(dst, exist_ok=True)
    elif not os.path.lexists(dst):
        os.makedirs(os.path.dirname(dst), exist_ok=True)
        open(dst, "a").close()
    mount(src, dst, None, BIND | REC)
    mount(None, dst, None, BIND | REMOUNT | RDONLY | NOSUID | NODEV)


def build_root(cfg: Config, root: str) -> None:
    uid = cfg["uid"]
    mount(None, "/", None, REC | PRIVATE)
    mount("tmpfs", root, "tmpfs", NOSUID | NODEV, "size=1m,mode=755")
    os.makedirs(root + "/box")
    # intake's budget
    box = f"size={cfg['box_bytes']},nr_inodes={cfg['box_inodes']},mode=700,uid={uid},gid={uid}"
    mount("tmpfs", root + "/box", "tmpfs", NOSUID | NODEV, box)
    for name in os.listdir(
        cfg["box"]
    ):  # the submission's files, copied in as root, then owned by the slot
        src, dst = os.path.join(cfg["box"], name), os.path.join(root, "box", name)
        if os.path.isfile(src) and not os.path.islink(src):
            shutil.copyfile(src, dst)
            os.chown(dst, uid, uid)
    os.makedirs(root + "/tmp")
    mount("tmpfs", root + "/tmp", "tmpfs", NOSUID | NODEV, "size=16m,nr_inodes=1024,mode=1777")
    os.makedirs(root + "/dev")
    mount("tmpfs", root + "/dev", "tmpfs", NOSUID | NOEXEC, "size=64k,mode=755")
    for dev in ["null", "zero", "urandom", "random", *cfg.get("gpu_devices", [])]:
        open(f"{root}/dev/{dev}", "a").close()
        mount(f"/dev/{dev}", f"{root}/dev/{dev}", None, BIND)
    os.makedirs(root + "/proc")
    mount("proc", root + "/proc", "proc", NOSUID | NODEV | NOEXEC)
    for path in cfg["binds"]:
        if os.path.exists(path):
            bind_ro(path, root + path)
    for path in cfg.get("masks", []):  # Python package folders under the binds: emptied ...
        mount("tmpfs", root + path, "tmpfs", NOSUID | NODEV, "size=64k,nr_inodes=256,mode=755")
    for path in cfg.get(
        "packages", []
    ):  # ... then only torch and its dependency closure goes back in
        bind_ro(path, root + path)
    for path in cfg.get("masks", []):
        mount(
            None,
            root + path,
            None,
            REMOUNT | RDONLY | NOSUID | NODEV,
            "size=64k,nr_inodes=256,mode=755",
        )
    for (
        package
    ) in INSIDE_PACKAGES:  # only the inside of the wall: never the trusted side of `grader`
        bind_ro(f"{cfg['lib']}/grader/{package}", f"{root}/sandbox-lib/grader/{package}")
    mount(None, root, None, BIND | REMOUNT | RDONLY | NOSUID | NODEV)
