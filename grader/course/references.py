"""Where the trusted side finds the reference solutions: ``solutions/`` beside the manifest, by
path.

Never from ``sys.path`` and never installed: a packaged copy would land in site-packages, which
a sandbox might be able to read. The folder is registered as the ``solutions`` package, so
``importlib.import_module("solutions.<module>")`` (and the solutions' relative imports) work.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

from grader.errors import UsageError

PACKAGE = "solutions"


class ReferencesMissing(UsageError, FileNotFoundError):
    """There is no ``solutions/`` package beside the manifest: a grading host needs the course
    checkout."""


def solutions_package(root: Path) -> ModuleType:
    """Register ``root/solutions`` as the ``solutions`` package (once) and return it."""
    folder = (Path(root) / PACKAGE).resolve()
    loaded = sys.modules.get(PACKAGE)
    if loaded is not None and [str(folder)] == list(getattr(loaded, "__path__", [])):
        return loaded
    init = folder / "__init__.py"
    if not init.is_file():
        raise ReferencesMissing(
            f"no reference solutions at {folder}: grade from the course checkout "
            "(the folder holding assignments.json, solutions/ and tests/)"
        )
    spec = importlib.util.spec_from_file_location(
        PACKAGE, init, submodule_search_locations=[str(folder)]
    )
    assert spec is not None and spec.loader is not None
    for name in [m for m in sys.modules if m == PACKAGE or m.startswith(PACKAGE + ".")]:
        del sys.modules[name]  # a different checkout's solutions must not answer for this one
    module = importlib.util.module_from_spec(spec)
    sys.modules[PACKAGE] = module
    spec.loader.exec_module(module)
    return module
