"""Placeholder: filled in by the batch feature."""

from __future__ import annotations
