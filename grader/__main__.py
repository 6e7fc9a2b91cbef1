"""``python -m grader``: the same as the ``grader`` console script."""

from __future__ import annotations

import sys

from grader.cli import main

if __name__ == "__main__":
    sys.exit(main())
