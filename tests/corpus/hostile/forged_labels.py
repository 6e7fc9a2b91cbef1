"""Attack: raise the grader's own exception classes (and one named like its crash label).

`grader.protocol.errors` is importable inside the sandbox. The scorecard must show plain failures
of the student's code, never a timeout or crash the grader did not observe.
"""
from grader.protocol.errors import StudentTimeout


class WorkerCrash(Exception):
    pass


def softmax_naive(x, dim=-1):
    raise StudentTimeout("softmax.softmax_naive ran past its time limit; the worker was stopped")


def softmax_stable(x, dim=-1):
    raise WorkerCrash("softmax.softmax_stable: the worker process ended during the call (killed by signal SIGKILL)")
