"""Where student code is isolated, seen from the trusted side: choosing and attesting a level, starting
workers (cold, pre-started or forked from a zygote) under namespaces, Landlock, seccomp, cgroups and
uids, and talking to them. What runs inside is :mod:`grader.inside`; the bytes they exchange,
:mod:`grader.protocol`."""

from __future__ import annotations
