"""Attack: look around the worker process for anything a forked worker could inherit from its zygote."""
import getpass
import os
import sys


def _probe():
    fds = [fd for fd in range(1024) if _open(fd)]  # fstat, not listdir: listing would open an fd itself
    trusted = sorted(m for m in sys.modules if m.split(".")[0] in ("pytest", "_pytest", "tests", "solutions"))
    raise RuntimeError(f"PROBE uid={os.getuid()} fds={fds} env={sorted(os.environ)} user={getpass.getuser()} trusted={trusted} "
                       f"threads={len(os.listdir('/proc/self/task'))}")


def _open(fd):
    try:
        os.fstat(fd)
    except OSError:
        return False
    return True


def softmax_naive(x, dim=-1):
    _probe()


def softmax_stable(x, dim=-1):
    _probe()
