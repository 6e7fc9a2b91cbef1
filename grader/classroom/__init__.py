"""Placeholder: filled in by the classroom feature."""

from __future__ import annotations
