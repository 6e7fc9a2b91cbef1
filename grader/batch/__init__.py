"""Instructor batch grading: discover a class, grade it in parallel slots, write gradebook, summary
and report."""

from __future__ import annotations
