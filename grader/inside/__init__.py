"""What runs inside the sandbox: the worker, the executor that runs student code, bans, peak
storage.

Untrusted from its first instruction. This package and :mod:`grader.protocol` are the only parts
of ``grader`` bound into the sandbox; it imports nothing else from ``grader`` (a test pins this).
"""
