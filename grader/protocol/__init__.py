"""The plain-data protocol shared by both sides of the trust wall: values, the wire format, errors.

Visible inside the sandbox (bound read-only) and imported by the trusted side. It imports nothing
but the standard library and torch, and never anything from the trusted side (a test pins this).
"""
