"""The isolation levels, weakest first: the one list argparse choices, ranks and probes come from.

Kept apart from :mod:`grader.sandbox.isolation` so that building the command line costs no probe.
"""

LEVELS = ("none", "process", "bwrap", "namespace")
CHOICES = ("auto", *reversed(LEVELS))  # what --isolation accepts: the strongest available, or one level
