"""The worker's C allocator, in two settings: quick between measured calls, honest during one.

A measured call's memory figure is read from outside (the sandbox's memory cgroup,
:mod:`grader.sandbox.memwatch`): only pages the kernel hands the sandbox are charged. glibc's
default keeps freed blocks in its heap and hands them out again unseen, and a fragmented heap grows
past what the call holds (a tiled backward's freed tiles were charged 71.7 MiB instead of 8.4), so a
measured call runs with every block of 128 KiB or more mapped fresh and unmapped when freed. Every
other call runs with blocks up to 32 MiB kept in the heap: mapping them fresh each time cost a
sandboxed grade about a tenth of a CPU-second in page faults.

:func:`honest` runs on its own request *before* the trusted side reads the cgroup's usage, so the
heap it returns to the kernel is not counted as memory the measured call gave back.
"""

from __future__ import annotations

import ctypes
import functools

M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3  # glibc's mallopt parameters (malloc.h)
QUICK_MMAP, QUICK_TRIM = 32 << 20, 64 << 20  # 32 MiB: glibc's largest mmap threshold on 64-bit
# the sandbox's start-up setting (grader/sandbox/workerenv.py)
HONEST_MMAP = HONEST_TRIM = 128 << 10


@functools.cache
def _glibc() -> ctypes.CDLL | None:
    """The C library if it has glibc's tuning calls (None on musl or macOS: nothing to tune)."""
    libc = ctypes.CDLL(None)
    return libc if hasattr(libc, "mallopt") and hasattr(libc, "malloc_trim") else None


def ready() -> bool:
    """Look the C library up now (the zygote's warm-up, so a forked worker has it); whether its
    allocator can be tuned."""
    return _glibc() is not None


def quick() -> None:
    """Freed blocks under 32 MiB stay in the heap for the next allocation."""
    libc = _glibc()
    if libc is not None:
        libc.mallopt(M_MMAP_THRESHOLD, QUICK_MMAP)
        libc.mallopt(M_TRIM_THRESHOLD, QUICK_TRIM)


def honest() -> None:
    """Return every free heap page to the kernel, and map blocks of 128 KiB or more fresh until
    :func:`quick`."""
    libc = _glibc()
    if libc is not None:
        libc.mallopt(M_MMAP_THRESHOLD, HONEST_MMAP)
        libc.mallopt(M_TRIM_THRESHOLD, HONEST_TRIM)
        libc.malloc_trim(0)
