"""The pytest side of the pack: the plugin (markers, ``student``/``reference`` fixtures) and
checks."""

from __future__ import annotations
