"""Where student code is isolated: the wire format, the worker, and the launchers that start it."""

from __future__ import annotations
