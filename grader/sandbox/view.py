"""What a sandbox may see of this machine's files: the interpreter, torch and what torch needs.

Binding whole site-packages folders showed a submission everything installed (jsonschema, rich,
pytest, the trusted ``grader`` package, even ``solutions/`` after a non-editable ``pip install .``).
The view is now an allowlist, computed once per process:

- system libraries and tools (``/usr``, ``/lib``, ``/bin`` ...), with every Python package folder
  under them covered by an empty read-only tmpfs (``masks``);
- the real interpreter binary, its shared ``libpython`` and its standard library (its own
  ``site-packages`` masked);
- torch's distribution and its dependency closure (``Requires-Dist`` of torch, recursively,
  installed ones only, extras left out; numpy too when installed): each distribution's top-level
  entries only (``packages``), bound into otherwise empty site folders.

The ``inside`` and ``protocol`` parts of ``grader`` and the submission are bound by the launcher.

``process`` has no mount tree of its own; where the kernel has Landlock it gets the same allowlist
as Landlock rules (:func:`landlock_rules`): the package folders themselves may only be listed, and
only torch's closure beneath them read.
"""

from __future__ import annotations

import functools
import glob
import importlib.util
import os
import re
import stat
import sys
import sysconfig
from importlib import metadata
from pathlib import Path

SYSTEM = ("/usr", "/lib", "/lib64", "/bin", "/etc/ld.so.cache", "/etc/alternatives")
GPU_PATHS = ("/usr/local/nvidia", "/usr/local/cuda", "/proc/driver/nvidia", "/sys")
PACKAGE_DIRS = (
    "site-packages",
    "dist-packages",
    "python3*/site-packages",
    "python3*/dist-packages",
    "lib/python3*/site-packages",
    "lib/python3*/dist-packages",
    "local/lib/python3*/site-packages",
    "local/lib/python3*/dist-packages",
)
ROOTS = ("torch", "numpy")
_NAME = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)")


DEVICES = ("/dev/null", "/dev/zero", "/dev/urandom", "/dev/random")
SYSTEM_PYTHONS = (
    "/usr/bin",
    "/usr/local/bin",
)  # where a same-version interpreter every user can run may live


def reachable(path: str) -> bool:
    """Whether any user may reach and read ``path`` by its permission bits: every folder above it
    lets others through (o+x), and it lets others read (o+r; o+rx for a folder). A leased uid has no
    other way in."""
    try:
        info = os.stat(path)
        parents = [p for p in Path(path).parents if str(p) != "/"]
        through = all(os.stat(p).st_mode & 0o001 for p in parents)
    except OSError:
        return False
    wanted = 0o005 if stat.S_ISDIR(info.st_mode) else 0o004
    return through and info.st_mode & wanted == wanted


@functools.cache
def worker_python() -> str | None:
    """The interpreter a leased uid runs (``process``/``none`` as root, which have no view of their
    own): this one where every user can run it and read its standard library, else one of the same
    version that they can (pyenv's, under a 0700 /root, is neither: /usr/bin's is); None when there
    is none."""
    minor = f"python{sys.version_info.major}.{sys.version_info.minor}"
    if all(reachable(p) for p in interpreter_paths()):
        return interpreter()
    for folder in SYSTEM_PYTHONS:
        candidate = os.path.realpath(os.path.join(folder, minor))
        lib = os.path.join(os.path.dirname(os.path.dirname(candidate)), "lib", minor)
        if os.path.isfile(candidate) and reachable(candidate) and reachable(lib):
            return candidate
    return None


def unreadable_for_workers() -> list[str]:
    """What a leased uid needs but cannot read without a view of its own: the interpreter, torch and
    its closure."""
    missing = [] if worker_python() else [interpreter()]
    return missing + [p for p in (*site_dirs(), *packages()) if not reachable(p)]


CPU_INFO = ("/proc", "/sys/devices/system/cpu")  # torch sizes its thread pools from these


def landlock_rules(
    box: Path, scratch: str, lib: str, gpu: bool, *, sites: list[str], entries: list[str]
) -> dict[str, list[str]]:
    """The ``process`` sandbox's Landlock allowlist (:mod:`grader.sandbox.landlock`'s kinds);
    ``sites`` and ``entries``: the site folders and torch's closure where the worker sees them
    (:mod:`grader.sandbox.mirror`)."""
    gpu_devices = [str(p) for p in Path("/dev").glob("nvidia*")] if gpu else []
    python = worker_python() or interpreter()
    stdlib = os.path.join(os.path.dirname(os.path.dirname(python)), "lib", os.path.basename(python))
    return {
        "read": [*binds(gpu), stdlib, *entries, lib, str(box), *CPU_INFO],
        "list": sites,
        "execute": [
            worker_python() or interpreter(),
            *SYSTEM,
        ],  # exec opens the ELF loader (ld-linux) too
        "device": [*DEVICES, *gpu_devices],
        "write": [scratch] if scratch else [],
    }


def interpreter() -> str:
    """The real interpreter binary (a venv's ``bin/python`` is a link into a prefix the sandbox
    lacks)."""
    return os.path.realpath(sys.executable)


@functools.cache
def interpreter_paths() -> tuple[str, ...]:
    """The binary, its shared libpython (if any) and the base standard library with its extension
    modules."""
    base = {
        "base": sys.base_prefix,
        "platbase": sys.base_exec_prefix,
        "installed_base": sys.base_prefix,
        "installed_platbase": sys.base_exec_prefix,
    }
    paths = sysconfig.get_paths(vars=base)
    found = {
        interpreter(),
        paths["stdlib"],
        paths["platstdlib"],
        sysconfig.get_config_var("DESTSHARED") or "",
    }
    libdir = sysconfig.get_config_var("LIBDIR") or ""
    for name in (sysconfig.get_config_var("INSTSONAME"), sysconfig.get_config_var("LDLIBRARY")):
        if (
            name
            and sysconfig.get_config_var("Py_ENABLE_SHARED")
            and os.path.exists(os.path.join(libdir, name))
        ):
            found.add(os.path.join(libdir, name))
    return tuple(sorted(p for p in found if p and os.path.exists(p)))


def binds(gpu: bool) -> list[str]:
    """Read-only binds at their own paths, in mount order (the package entries come separately)."""
    return [*SYSTEM, *interpreter_paths(), *(GPU_PATHS if gpu else ())]


@functools.cache
def masks(gpu: bool = False) -> tuple[str, ...]:
    """Python package folders inside the binds (and the site folders torch lives in), to be
    emptied."""
    tops = binds(gpu)
    found: set[str] = set()
    for top in tops:
        if os.path.isdir(top):
            for pattern in PACKAGE_DIRS:
                found.update(
                    _seen_as(p, top, tops)
                    for p in glob.glob(os.path.join(top, pattern))
                    if os.path.isdir(p)
                )
    found.update(d for d in site_dirs() if _under_any(d, tops))
    return tuple(sorted(p for p in found if p))


def _seen_as(path: str, top: str, tops: list[str]) -> str:
    """Where the sandbox sees ``path`` as a real folder ('' if nowhere): a link below a bind leads
    elsewhere.

    Masks are mounted before the chroot, so a path through a symbolic link would land on the host's
    view.
    """
    real = os.path.realpath(path)
    if real == os.path.join(os.path.realpath(top), os.path.relpath(path, top)):
        return path
    return real if _under_any(real, tops) else ""


def _under_any(path: str, tops: list[str]) -> bool:
    return any(path == t or path.startswith(t.rstrip("/") + "/") for t in tops)


@functools.cache
def site_dirs() -> tuple[str, ...]:
    """The folders holding the closure's distributions: the worker's ``sys.path`` after its own
    lib."""
    found = {str(Path(str(d.locate_file(""))).resolve()) for d in closure()}
    torch_dir = _torch_dir()
    if torch_dir:  # torch without metadata (a vendored or unusual install) still goes in
        found.add(os.path.dirname(torch_dir))
    return tuple(sorted(found))


@functools.cache
def _torch_dir() -> str:
    spec = importlib.util.find_spec("torch")
    return os.path.dirname(os.path.realpath(spec.origin)) if spec and spec.origin else ""


@functools.cache
def closure() -> tuple[metadata.Distribution, ...]:
    """torch (and numpy when installed) and every installed distribution they require,
    recursively."""
    seen: dict[str, metadata.Distribution] = {}
    todo = [r for r in ROOTS]
    while todo:
        name = _normal(todo.pop())
        if name in seen:
            continue
        try:
            dist = metadata.distribution(name)
        except metadata.PackageNotFoundError:
            continue  # not installed here: nothing to bind
        seen[name] = dist
        todo.extend(_needed(dist.requires or []))
    return tuple(seen[k] for k in sorted(seen))


def _needed(requires: list[str]) -> list[str]:
    """Requirement names, leaving out extras (``; extra == "x"``): only what plain ``import torch``
    may use."""
    names = []
    for line in requires:
        marker = line.partition(";")[2]
        if "extra" in marker:
            continue
        match = _NAME.match(line)
        if match:
            names.append(match.group(1))
    return names


def _normal(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


@functools.cache
def packages() -> tuple[str, ...]:
    """Absolute paths of the closure's top-level entries (import packages, modules, .libs,
    .dist-info)."""
    found: set[str] = set()
    for dist in closure():
        base = Path(str(dist.locate_file(""))).resolve()
        for entry in _top_level(dist):
            path = base / entry
            if path.exists() and path.resolve().is_relative_to(base):
                found.add(str(path))
    if _torch_dir():
        found.add(_torch_dir())
    return tuple(sorted(found))


def _top_level(dist: metadata.Distribution) -> set[str]:
    """First path components of the files a distribution installed (its RECORD, read as text:
    ``dist.files`` builds one object per line and costs 0.4 s for torch), else its
    ``top_level.txt``."""
    record = dist.read_text("RECORD")
    if record is None:
        return {
            name.strip()
            for name in (dist.read_text("top_level.txt") or "").splitlines()
            if name.strip()
        }
    tops = set()
    for line in record.splitlines():
        first = line.rsplit(",", 2)[0].strip('"').split("/", 1)[0]
        if first and first not in ("..", "__pycache__") and not first.endswith(".pth"):
            tops.add(first)
    return tops
