"""Attack: read the hidden tests and solutions from disk, or find a reference via gc / stack inspection."""
import gc
import glob
import inspect


def _steal():
    found = []
    for pattern in ("/work/*/tests/hidden/*.py", "/work/*/solutions/*.py", "../solutions/*.py",
                    "../tests/hidden/*.py", "/*/*/tests/hidden/*.py", "/*/*/solutions/softmax.py",
                    "/*/*/*/tests/hidden/*.py", "/tmp/*/*.py"):
        found += glob.glob(pattern, recursive=True)
    refs = [o for o in gc.get_objects() if callable(o) and getattr(o, "__module__", "") == "solutions.softmax"]
    frames = [f for f in inspect.stack() if "hidden" in f.filename or "solutions" in f.filename]
    try:
        open("/etc/shadow").read()
        shadow = "readable"
    except OSError as exc:
        shadow = type(exc).__name__
    raise RuntimeError(f"STOLEN files={len(found)} refs={len(refs)} frames={len(frames)} shadow={shadow}")


def softmax_naive(x, dim=-1):
    _steal()


def softmax_stable(x, dim=-1):
    _steal()
