"""Subcommands added by later features (grade, batch, check, release, ...) register here."""

from __future__ import annotations

import argparse


def register(sub: argparse._SubParsersAction) -> None:  # noqa: SLF001 - argparse has no public type
    return None
