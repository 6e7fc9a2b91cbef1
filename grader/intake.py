"""Where a submission enters: a folder, a single ``.py`` or ``.ipynb``, or a ``.zip``/``.tar.gz`` of either.

Everything is copied into a fresh staging folder holding only regular ``.py`` files, with caps on
count and size. Archives are hostile input: no absolute paths or ``..``, no links or devices,
caps on members, total size and compression ratio. Problems raise :class:`IntakeError` with a
message for the scorecard. A notebook is never executed: :func:`_notebook_module` keeps its
imports, functions, classes and literal constants (``ast``) and writes them as a module.
"""

from __future__ import annotations

import ast
import hashlib
import json
import shutil
import tarfile
import tempfile
import zipfile
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

MAX_FILES = 200
MAX_FILE_BYTES = 1 << 20
MAX_MEMBERS = 1000
MAX_TOTAL_BYTES = 64 << 20
MAX_RATIO = 100


class IntakeError(ValueError):
    """The submission cannot be graded as given; the message says why and what to send instead."""


@dataclass
class Submission:
    path: str
    layout: str
    box: Path
    files: list[dict[str, object]] = field(default_factory=list)
    single_module: str | None = None
    sha256: str = ""

    def cleanup(self) -> None:
        shutil.rmtree(self.box.parent, ignore_errors=True)


def take(path: Path | str, *, modules: set[str]) -> Submission:
    """Normalise ``path`` into a staging folder of module files (caller must call ``cleanup``)."""
    path = Path(path)
    if not path.exists():
        raise IntakeError(f"submission not found: {path}")
    staging = Path(tempfile.mkdtemp(prefix="grader-submission-"))
    box = staging / "box"
    box.mkdir()
    box.chmod(0o755)
    try:
        sub = _take(path, box, staging, modules)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    sub.files = _hashes(box)
    if not sub.files:
        sub.cleanup()
        raise IntakeError(f"{path}: no Python files found (expected the exercise modules, e.g. softmax.py)")
    sub.sha256 = hashlib.sha256("".join(f"{f['name']}:{f['sha256']};" for f in sub.files).encode()).hexdigest()
    return sub


def _take(path: Path, box: Path, staging: Path, modules: set[str]) -> Submission:
    if path.is_dir():
        return Submission(str(path), _copy_modules(_module_folder(path), box), box)
    name = path.name.lower()
    if name.endswith(".py"):
        _copy_file(path, box / path.name)
        single = None if path.stem in modules else path.stem
        return Submission(str(path), "single-file", box, single_module=single)
    if name.endswith(".ipynb"):
        _write_notebook(path, box / f"{path.stem}.py")
        single = None if path.stem in modules else path.stem
        return Submission(str(path), "notebook", box, single_module=single)
    if name.endswith((".zip", ".tar.gz", ".tgz")):
        unpacked = staging / "unpacked"
        unpacked.mkdir()
        kind = "zip" if name.endswith(".zip") else "tar.gz"
        (_unzip if kind == "zip" else _untar)(path, unpacked)
        inner = _take(_single_child(unpacked), box, staging, modules)
        return Submission(str(path), f"{kind}:{inner.layout}", box, single_module=inner.single_module)
    raise IntakeError(f"{path.name}: unsupported submission type (give a folder, a .py, a .ipynb, a .zip or a .tar.gz)")


def _module_folder(folder: Path) -> Path:
    """The student's repo keeps modules in ``exercises/``; otherwise they sit at the top."""
    nested = folder / "exercises"
    return nested if nested.is_dir() and any(nested.glob("*.py*")) else folder


def _single_child(folder: Path) -> Path:
    entries = [p for p in folder.iterdir() if not p.name.startswith((".", "__MACOSX"))]
    if len(entries) == 1 and (entries[0].is_dir() or entries[0].suffix in (".py", ".ipynb")):
        return entries[0]
    return folder


def _copy_modules(src: Path, box: Path) -> str:
    files = sorted(p for p in src.glob("*.py") if p.is_file() and not p.is_symlink())
    if len(files) > MAX_FILES:
        raise IntakeError(f"{src}: {len(files)} Python files, more than the {MAX_FILES} allowed")
    for f in files:
        _copy_file(f, box / f.name)
    taken = {f.stem for f in files}  # a notebook per exercise, unless a .py of that name is there too
    for nb in sorted(p for p in src.glob("*.ipynb") if p.is_file() and not p.is_symlink() and p.stem not in taken):
        _write_notebook(nb, box / f"{nb.stem}.py")
    return "exercises-folder" if src.name == "exercises" else "directory"


_KEEP = (ast.Import, ast.ImportFrom, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)


def _write_notebook(src: Path, dst: Path) -> None:
    """Write the definitions of notebook ``src`` as module ``dst``, without running any cell."""
    if src.is_symlink() or not src.is_file() or src.stat().st_size > MAX_TOTAL_BYTES:
        raise IntakeError(f"{src.name}: not a regular file, or larger than {MAX_TOTAL_BYTES >> 20} MiB")
    dst.write_text(_notebook_module(src), "utf-8")
    dst.chmod(0o644)


def _notebook_module(src: Path) -> str:
    """Plain JSON reading (nbformat v4, and v3's worksheets): no Jupyter package needed to grade."""
    try:
        nb = json.loads(src.read_text("utf-8"))
        cells = nb.get("cells") or [c for ws in nb.get("worksheets", []) for c in ws.get("cells", [])]
        if not isinstance(cells, list):
            raise ValueError("cells is not a list")
    except (UnicodeDecodeError, ValueError, AttributeError, TypeError) as exc:
        raise IntakeError(f"{src.name}: not a readable Jupyter notebook ({type(exc).__name__}); "
                          "save it again from Jupyter, or submit a .py file") from None
    parts: list[str] = []
    futures: dict[str, None] = {}  # `from __future__` must come first, whichever cell it was in
    for number, cell in enumerate(cells, 1):
        if not isinstance(cell, dict) or cell.get("cell_type") != "code":
            continue
        raw = cell.get("source", cell.get("input", ""))
        source = "".join(raw) if isinstance(raw, list) else str(raw)
        source = "\n".join("" if line.lstrip().startswith(("%", "!")) else line for line in source.splitlines())
        try:
            tree = ast.parse(source)
        except (SyntaxError, ValueError, RecursionError, MemoryError) as exc:
            where = f"line {exc.lineno}: {exc.msg}" if isinstance(exc, SyntaxError) else type(exc).__name__
            raise IntakeError(f"{src.name}: code cell {number} cannot be parsed ({where}); "
                              "fix or delete that cell") from None
        lines = source.splitlines()
        for node in tree.body:
            if isinstance(node, ast.ImportFrom) and node.module == "__future__":
                futures.update({f"from __future__ import {a.name}\n": None for a in node.names})
            elif isinstance(node, _KEEP) or _is_constant(node):
                start = min([node.lineno, *(d.lineno for d in getattr(node, "decorator_list", []))])
                parts.append("\n".join(lines[start - 1:node.end_lineno]) + "\n")
    header = f"# Taken from {src.name} by the grader: imports, functions, classes and constants only.\n"
    module = header + "".join(futures) + "\n\n" + "\n\n".join(parts)
    if len(module.encode("utf-8")) > MAX_FILE_BYTES:
        raise IntakeError(f"{src.name}: its code is larger than {MAX_FILE_BYTES >> 10} KiB")
    return module


def _is_constant(node: ast.stmt) -> bool:
    """``NAME = <literal>`` at the top level: kept, since functions may read it."""
    if not (isinstance(node, ast.Assign) and all(isinstance(t, ast.Name) for t in node.targets)):
        return False
    try:
        ast.literal_eval(node.value)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return False
    return True


def _copy_file(src: Path, dst: Path) -> None:
    if src.is_symlink() or not src.is_file():
        raise IntakeError(f"{src.name}: not a regular file")
    if src.stat().st_size > MAX_FILE_BYTES:
        raise IntakeError(f"{src.name}: larger than {MAX_FILE_BYTES >> 10} KiB")
    shutil.copyfile(src, dst)
    dst.chmod(0o644)


def _check_member(name: str, size: int, compressed: int | None, total: list[int]) -> None:
    pure = PurePosixPath(name.replace("\\", "/"))
    if pure.is_absolute() or ".." in pure.parts or name.startswith("/"):
        raise IntakeError(f"archive member {name!r} escapes the archive (absolute path or '..')")
    total[0] += size
    if total[0] > MAX_TOTAL_BYTES:
        raise IntakeError(f"archive unpacks to more than {MAX_TOTAL_BYTES >> 20} MiB")
    if compressed is not None and size > 1 << 16 and size > MAX_RATIO * max(compressed, 1):
        raise IntakeError(f"archive member {name!r} has a compression ratio over {MAX_RATIO} (zip bomb?)")


def _unzip(path: Path, dest: Path) -> None:
    try:
        with zipfile.ZipFile(path) as zf:
            infos = zf.infolist()
            if len(infos) > MAX_MEMBERS:
                raise IntakeError(f"archive has {len(infos)} members, more than {MAX_MEMBERS}")
            total = [0]
            for info in infos:
                _check_member(info.filename, info.file_size, info.compress_size, total)
                if (info.external_attr >> 16) & 0o170000 not in (0, 0o100000, 0o040000):
                    raise IntakeError(f"archive member {info.filename!r} is a link or device")
            zf.extractall(dest)
    except zipfile.BadZipFile as exc:
        raise IntakeError(f"{path.name}: not a valid zip archive ({exc})") from None


def _untar(path: Path, dest: Path) -> None:
    try:
        with tarfile.open(path, "r:*") as tf:
            members = tf.getmembers()
            if len(members) > MAX_MEMBERS:
                raise IntakeError(f"archive has {len(members)} members, more than {MAX_MEMBERS}")
            total = [0]
            for m in members:
                _check_member(m.name, m.size, None, total)
                if not (m.isfile() or m.isdir()):
                    raise IntakeError(f"archive member {m.name!r} is a link or device")
            tf.extractall(dest, filter="data")
    except (tarfile.TarError, EOFError, OSError) as exc:
        raise IntakeError(f"{path.name}: not a valid tar.gz archive ({exc})") from None
    if sum(f.stat().st_size for f in dest.rglob("*") if f.is_file()) > MAX_TOTAL_BYTES:
        raise IntakeError(f"archive unpacks to more than {MAX_TOTAL_BYTES >> 20} MiB")


def _hashes(box: Path) -> list[dict[str, object]]:
    out = []
    for f in sorted(box.iterdir()):
        data = f.read_bytes()
        out.append({"name": f.name, "bytes": len(data), "sha256": hashlib.sha256(data).hexdigest()})
    return out
