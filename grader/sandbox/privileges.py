"""Giving up root for good, before any student code: the uid, the groups and every capability.

``setresuid`` away from root clears the effective and permitted capability sets, but leaves the
bounding set (what an exec of a file-capability binary could regain) and relies on no securebit
being set. So the drop here is explicit: the bounding set is emptied (where CAP_SETPCAP allows; the
``no_new_privs`` set next makes it moot anyway) and the ambient set cleared while still root, then
groups, gid and uid change, and finally ``/proc/self/status`` must show the new uid in all four
slots and no inheritable, permitted, effective or ambient capability. Anything else raises
``OSError``: the launch then fails (exit 125, a set-up failure), never runs with more authority
than recorded.

Stdlib only: the cold launcher and the zygote load this file by path.
"""

from __future__ import annotations

import ctypes
import os

PR_CAPBSET_DROP, PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL = 24, 47, 4
CAP_FIELDS = (
    "CapInh:",
    "CapPrm:",
    "CapEff:",
    "CapAmb:",
)  # CapBnd is recorded, not required (see above)
EPERM = 1
_libc = ctypes.CDLL(None, use_errno=True)


def drop_to(uid: int) -> None:
    """Become ``uid`` (gid ``uid``, no supplementary groups) with no capability left; verified."""
    if os.geteuid() == 0:
        _empty_bounding_set()
        _libc.prctl(
            PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0
        )  # EINVAL on old kernels: nothing to clear
        os.setgroups([])
    os.setresgid(uid, uid, uid)
    os.setresuid(uid, uid, uid)
    check(uid)


def _empty_bounding_set() -> None:
    for cap in range(_last_cap() + 1):
        if _libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0:
            err = ctypes.get_errno()
            if err == EPERM:
                # no CAP_SETPCAP (a container): no_new_privs keeps an exec from regaining anything
                return
            if err != 22:  # EINVAL: a capability this kernel does not know
                raise OSError(
                    err, f"cannot drop capability {cap} from the bounding set: {os.strerror(err)}"
                )


def _last_cap() -> int:
    try:
        with open("/proc/sys/kernel/cap_last_cap", encoding="ascii") as fh:
            return int(fh.read())
    except (OSError, ValueError):
        # CAP_CHECKPOINT_RESTORE, the last one as of Linux 5.9 (dropping unknown ones is harmless)
        return 40


def check(uid: int) -> None:
    """Raise unless this process runs as ``uid`` everywhere, with no groups and no capability."""
    fields = status_fields()
    if fields.get("Uid:") != [str(uid)] * 4 or fields.get("Gid:") != [str(uid)] * 4:
        raise OSError(
            f"the uid drop did not take: Uid {fields.get('Uid:')}, Gid {fields.get('Gid:')}"
        )
    if os.getgroups() not in ([], [uid]):
        raise OSError(f"supplementary groups left after the uid drop: {os.getgroups()}")
    held = [name for name in CAP_FIELDS if int((fields.get(name) or ["1"])[0], 16)]
    if held:
        raise OSError(f"capabilities left after the uid drop: {', '.join(held)}")


def status_fields(path: str = "/proc/self/status") -> dict[str, list[str]]:
    """``/proc/<pid>/status`` as {field name with its colon: its values}."""
    with open(path, encoding="ascii", errors="replace") as fh:
        return {parts[0]: parts[1:] for parts in (line.split() for line in fh) if parts}
