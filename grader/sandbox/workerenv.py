"""The environment a sandboxed worker starts with: a short allowlist, the same for a cold and a
forked worker.

Stdlib only and free of imports: the launcher loads it by path in a fresh interpreter, and the
zygote (whose allocator settings its forked workers inherit) starts with its allocator part.
"""

from __future__ import annotations

TYPE_CHECKING = False  # as in launcher.py: no `typing` import for an annotation
if TYPE_CHECKING:
    from typing import Any

# glibc's allocator, read once at process start (a forked worker keeps its zygote's): two arenas,
# and a FIXED mmap threshold. glibc's default threshold grows after a large block is freed, after
# which 1 MiB tiles come from the heap and stay resident when freed; the sandbox's memory then grew
# by 95 MB during a tiled backward that never holds more than a few tiles, and measure()'s outside
# figure charged the student for the allocator.
MALLOC_ENV = {"MALLOC_ARENA_MAX": "2", "MALLOC_MMAP_THRESHOLD_": "131072"}
# A sandbox uid has no passwd entry, and torch (2.11 on Python 3.12, seen on a GPU host) names its
# inductor cache after getpass.getuser(), which then raises while the meta device's first op runs:
# the worker never started. Name the user and the cache folder (in the sandbox's own /tmp), so no
# library has to ask.
TORCH_ENV = {"USER": "student", "TORCHINDUCTOR_CACHE_DIR": "/tmp/torchinductor"}


def worker_env(cfg: dict[str, Any], home: str) -> dict[str, str]:
    """The worker's whole environment: ``cfg["threads"]`` for the thread pools, plus
    ``cfg["extra_env"]`` (a GPU memory cap) from the launch configuration."""
    threads = str(cfg["threads"])
    env = {
        "PATH": "/usr/bin:/bin",
        "HOME": home,
        "LANG": "C.UTF-8",
        "OMP_NUM_THREADS": threads,
        "MKL_NUM_THREADS": threads,
        **MALLOC_ENV,
        **TORCH_ENV,
        "PYTHONDONTWRITEBYTECODE": "1",
    }
    if cfg.get(
        "scratch"
    ):  # `process`/`none`: the sandbox's own writable folder (the only one under Landlock)
        env.update(TMPDIR=cfg["scratch"], TORCHINDUCTOR_CACHE_DIR=f"{cfg['scratch']}/torchinductor")
    env.update(cfg.get("extra_env", {}))
    return env
