"""Which modules a submission may import, for the integrity scan
(:mod:`grader.scoring.integrity_match`).

Imports are an allow-list: a module nobody listed here is a ``module`` finding (``review``), never a
miss. The exercises need torch, math and the standard library's plain data tools; ``MODULE_KINDS``
says, for the finding's text, why some unlisted modules matter. ``sys`` is allowed, but only the
attributes in ``SYS_PLAIN`` are plain data: any other is ``introspection``. Kept apart from the
rules themselves (:mod:`grader.scoring.integrity_rules`, what a construct reaches and how much it
costs) as the list an instructor reviews when an honest import is flagged.
"""

from __future__ import annotations

ALLOWED_MODULES = frozenset(
    {
        "torch",
        "math",
        "cmath",
        "numbers",
        "typing",
        "typing_extensions",
        "dataclasses",
        "functools",
        "itertools",
        "collections",
        "abc",
        "enum",
        "operator",
        "warnings",
        "copy",
        "random",
        "statistics",
        "fractions",
        "decimal",
        "re",
        "heapq",
        "bisect",
        "contextlib",
        "time",
        "sys",
        "types",
        "__future__",
        "numpy",
        "einops",
        "json",
        "struct",
        "textwrap",
        "pprint",
        "datetime",
        "array",
        "keyword",
        "unicodedata",
    }
)
# why an unlisted module matters, for the finding's text (any unlisted module is a finding)
MODULE_KINDS = {
    **dict.fromkeys(
        (
            "os",
            "posix",
            "subprocess",
            "signal",
            "pty",
            "multiprocessing",
            "threading",
            "_thread",
            "concurrent",
            "asyncio",
            "atexit",
            "resource",
            "sched",
            "pwd",
            "grp",
        ),
        "process control",
    ),
    **dict.fromkeys(
        (
            "io",
            "pathlib",
            "shutil",
            "tempfile",
            "glob",
            "codecs",
            "linecache",
            "fileinput",
            "socket",
            "ssl",
            "http",
            "urllib",
            "select",
            "selectors",
            "mmap",
            "fcntl",
            "termios",
            "tty",
            "zipfile",
            "tarfile",
            "sqlite3",
            "logging",
        ),
        "files, streams or network",
    ),
    **dict.fromkeys(("ctypes", "_ctypes", "cffi"), "native code"),
    **dict.fromkeys(("gc", "inspect", "traceback", "dis", "weakref"), "introspection"),
    **dict.fromkeys(
        (
            "importlib",
            "builtins",
            "runpy",
            "code",
            "codeop",
            "marshal",
            "pickle",
            "shelve",
            "copyreg",
            "dill",
            "cloudpickle",
            "string",
        ),
        "dynamic code or names",
    ),
}
SYS_PLAIN = frozenset(
    {
        "float_info",
        "maxsize",
        "version_info",
        "version",
        "stdout",
        "stderr",
        "byteorder",
        "platform",
        "int_info",
        "hash_info",
        "float_repr_style",
        "getsizeof",
        "getrecursionlimit",
        "exit",
        "argv",
        "implementation",
        "hexversion",
        "maxunicode",
        "getdefaultencoding",
    }
)
