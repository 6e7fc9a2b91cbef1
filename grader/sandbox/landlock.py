"""The ``process`` sandbox's file view: a Landlock allowlist, where the kernel has Landlock.

``process`` runs where namespaces cannot be made (Gradescope's containers), so it has no private
mount tree to leave secrets out of. Landlock (Linux 5.13+, unprivileged, inherited by every child
and irrevocable) gives the same allowlist without one: once restricted, this process may read only
beneath the paths it was given (the interpreter, torch and its closure, the sandbox's own library,
system libraries), write only beneath its scratch folder, and execute only the interpreter. From
ABI 4 on, TCP bind and connect are refused too; from ABI 6 on, it can neither signal processes
outside its domain nor reach abstract UNIX sockets. Everything else (``solutions/``, the hidden
suites, the canary cache, the zygote's socket, ``/etc/shadow``, ``/tmp``) fails with EACCES.

Stdlib only: the cold launcher and the zygote load this file by path.
"""

from __future__ import annotations

import ctypes
import os

CREATE_RULESET, ADD_RULE, RESTRICT_SELF = (
    444,
    445,
    446,
)  # the same on every architecture (the generic table)
VERSION_FLAG, RULE_PATH_BENEATH = 1, 1
EXECUTE, WRITE_FILE, READ_FILE, READ_DIR = 1 << 0, 1 << 1, 1 << 2, 1 << 3
FS_BY_ABI = {
    1: (1 << 13) - 1,
    2: (1 << 14) - 1,
    3: (1 << 15) - 1,
    5: (1 << 16) - 1,
}  # all rights each ABI knows
# the only ones a rule on a file may carry
FILE_RIGHTS = EXECUTE | WRITE_FILE | READ_FILE | (1 << 14) | (1 << 15)
NET_ALL, SCOPE_ALL = 0b11, 0b11  # TCP bind+connect (ABI 4); abstract UNIX sockets+signals (ABI 6)
ALL = -1  # every right the ABI handles
# what each kind of rule allows beneath its path: "list" lets the import system list a site folder
# whose entries other than torch's closure stay unreadable; "device" is /dev/null and friends
KINDS = {
    "read": READ_FILE | READ_DIR,
    "list": READ_DIR,
    "execute": EXECUTE | READ_FILE,
    "device": READ_FILE | WRITE_FILE,
    "write": ALL,
}
_libc = ctypes.CDLL(None, use_errno=True)
_libc.syscall.restype = ctypes.c_long


class _Ruleset(ctypes.Structure):
    _fields_ = [("fs", ctypes.c_uint64), ("net", ctypes.c_uint64), ("scoped", ctypes.c_uint64)]


class _PathBeneath(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


def abi() -> int:
    """The kernel's Landlock ABI version; 0 where there is none (old kernel, disabled, or refused by
    seccomp)."""
    version = _libc.syscall(CREATE_RULESET, None, 0, VERSION_FLAG)
    return int(version) if version > 0 else 0


def _fs_rights(version: int) -> int:
    return FS_BY_ABI[max(v for v in FS_BY_ABI if v <= version)]


def ruleset(rules: dict[str, list[str]]) -> int:
    """A ruleset fd allowing ``rules`` ({kind of :data:`KINDS`: paths}), built by the caller while
    it can still open every path (before its uid drop: a leased uid cannot open paths under a 0700
    home, while the rule made from an fd opened as root still lets it read beneath). Raises OSError
    when Landlock is missing or a call fails."""
    version = abi()
    if version < 1:
        raise OSError("Landlock is not available here")
    handled = _fs_rights(version)
    attr = _Ruleset(handled, NET_ALL if version >= 4 else 0, SCOPE_ALL if version >= 6 else 0)
    size = 8 if version < 4 else 16 if version < 6 else 24  # the struct's size each ABI knows
    fd = _checked(_libc.syscall(CREATE_RULESET, ctypes.byref(attr), size, 0), "create a ruleset")
    try:
        for kind, paths in rules.items():
            for path in paths:
                _allow(fd, path, KINDS[kind] & handled)
    except BaseException:
        os.close(fd)
        raise
    return fd


def enforce(fd: int) -> None:
    """Restrict this process (and its future children) to the ruleset ``fd`` for good;
    ``no_new_privs`` must already be set. The fd is closed."""
    try:
        _checked(_libc.syscall(RESTRICT_SELF, fd, 0), "restrict this process")
    finally:
        os.close(fd)


def _allow(ruleset: int, path: str, rights: int) -> None:
    try:
        fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
    except FileNotFoundError:
        return  # not on this machine (/lib64 on aarch64): nothing to allow
    try:
        is_dir = os.path.isdir(f"/proc/self/fd/{fd}")
        rule = _PathBeneath(rights if is_dir else rights & FILE_RIGHTS, fd)
        _checked(
            _libc.syscall(ADD_RULE, ruleset, RULE_PATH_BENEATH, ctypes.byref(rule), 0),
            f"allow {path}",
        )
    finally:
        os.close(fd)


def _checked(result: int, what: str) -> int:
    if result < 0:
        err = ctypes.get_errno()
        raise OSError(err, f"landlock: cannot {what}: {os.strerror(err)}")
    return int(result)
