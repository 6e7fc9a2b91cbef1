"""``python -m grader``: the same as the ``grader`` console script.

``python -m`` puts the working folder first on ``sys.path``; run from a class folder, a student's
``typing.py`` or ``jsonschema.py`` would be imported by the trusted side. The folder is dropped
before anything else is imported (``sys`` is built in and ``os`` frozen: neither can be shadowed).
A ``grader.py`` in that folder is found by Python's own ``-m`` lookup before this file runs: use the
``grader`` script or ``python -I -m grader`` there.
"""

import os
import sys

_here = os.getcwd()
_lib = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != _here or _here == _lib]

from grader.cli.main import run  # noqa: E402

if __name__ == "__main__":
    run()
