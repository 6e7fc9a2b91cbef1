"""Where results are scored: run the suites, collect per-test outcomes, sum points per exercise."""

from __future__ import annotations
