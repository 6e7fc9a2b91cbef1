"""The seccomp filter every sandbox runs under, syscall by syscall, and the kernel keyrings it closes.

Each check runs in a fresh subprocess that loads the filter (after ``no_new_privs``, as the launcher
does) and then calls the kernel directly with ctypes ``syscall()``: a denied call must fail with
EPERM, which none of them returns unfiltered with the harmless arguments used here.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import textwrap

import pytest

from grader import schema
from grader.grade import grade
from grader.sandbox import choice, isolation, seccomp
from tests.project.support.common import CORPUS, ROOT, needs_namespace, solutions_copy

pytestmark = [
    pytest.mark.cost(13),  # seconds on 2 cores: started early (tests/project/conftest.py)
    pytest.mark.skipif(
        not seccomp.supported(), reason="the filter targets Linux on x86_64 or aarch64"
    ),
]

# name -> arguments that make the call fail harmlessly (or do nothing) when it is NOT filtered
DENIED_CALLS = {
    "add_key": (0, 0, 0, 0, 0),
    "request_key": (0, 0, 0, 0),
    "keyctl": (0, -3, 0),
    "ptrace": (-1, 0, 0, 0),
    "unshare": (0,),
    "setns": (-1, 0),
    "mount": (0, 0, 0, 0, 0),
    "umount2": (0, 0),
    "pivot_root": (0, 0),
    "chroot": (0,),
    "bpf": (-1, 0, 0),
    "perf_event_open": (0, 0, 0, 0, 0),
    "userfaultfd": (-1,),
    "io_uring_setup": (0, 0),
    "io_uring_enter": (-1, 0, 0, 0, 0, 0),
    "io_uring_register": (-1, 0, 0, 0),
    "kexec_load": (0, 0, 0, -1),
    "kexec_file_load": (-1, -1, 0, 0, -1),
    "init_module": (0, 0, 0),
    "finit_module": (-1, 0, 0),
    "delete_module": (0, 0),
    "process_vm_readv": (0, 0, 0, 0, 0, 0),
    "process_vm_writev": (0, 0, 0, 0, 0, 0),
    "personality": (0xFFFFFFFF,),
    "swapon": (0, 0),
    "swapoff": (0,),
    "reboot": (0, 0, 0, 0),
    "open_tree": (-1, 0, 0),
    "move_mount": (-1, 0, -1, 0, 0),
    "fsopen": (0, 0),
    "fsconfig": (-1, 0, 0, 0, 0),
    "fsmount": (-1, 0, 0),
    "fspick": (-1, 0, 0),
    "mount_setattr": (-1, 0, 0, 0, 0),
    "open_by_handle_at": (-1, 0, 0),
    "name_to_handle_at": (-1, 0, 0, 0, 0),
    "acct": (1,),
    "quotactl": (0, 0, 0, 0),
}

PROBE = textwrap.dedent("""
    import ctypes, errno, json, os, socket, sys, threading, mmap
    from grader.sandbox import launcher, seccomp
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    nr = seccomp.ARCHES[seccomp.machine()][1]
    calls = json.loads(sys.argv[1])
    if sys.argv[2] == "filtered":
        launcher.lock_down({"seccomp": True})
    def call(name, args):
        result = libc.syscall(nr[name], *(ctypes.c_long(a) for a in args))
        return errno.errorcode.get(ctypes.get_errno(), "?") if result == -1 else "ok"
    out = {name: call(name, args) for name, args in calls.items()}
    if sys.argv[2] == "filtered":  # unfiltered, this would really fork into a new user namespace
        out["clone_newuser"] = call("clone", [0x10000000 | 17, 0, 0, 0, 0])  # CLONE_NEWUSER | SIGCHLD
    out["clone3"] = call("clone3", [0, 0])
    out["socket_inet"] = call("socket", [socket.AF_INET, socket.SOCK_STREAM, 0])
    out["socketpair_inet"] = call("socketpair", [socket.AF_INET, socket.SOCK_STREAM, 0, 0])
    a, b = socket.socketpair(socket.AF_UNIX)  # allowed: AF_UNIX sockets, pipes, read/write, mmap, threads
    a.sendall(b"x"); assert b.recv(1) == b"x"
    socket.socket(socket.AF_UNIX, socket.SOCK_STREAM).close()
    r, w = os.pipe(); os.write(w, b"y"); assert os.read(r, 1) == b"y"
    m = mmap.mmap(-1, 1 << 20); m[0] = 1; m.close()
    t = threading.Thread(target=lambda: None); t.start(); t.join()
    pid = os.fork()
    if pid == 0:
        os._exit(7)
    out["fork"] = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
    out["active"] = seccomp.active()
    print(json.dumps(out))
""")


def _probe(mode: str) -> dict[str, str]:
    done = subprocess.run(
        [sys.executable, "-c", PROBE, json.dumps(DENIED_CALLS), mode],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout)


def test_every_denied_syscall_answers_eperm_under_the_filter():
    out = _probe("filtered")
    assert {name: out[name] for name in DENIED_CALLS} == {name: "EPERM" for name in DENIED_CALLS}
    assert (
        out["clone_newuser"] == "EPERM" and out["clone3"] == "ENOSYS"
    )  # glibc then falls back to clone
    assert out["socket_inet"] == "EPERM" and out["socketpair_inet"] == "EPERM"
    assert (
        out["fork"] == 7 and out["active"] is True
    )  # threads, fork, AF_UNIX, pipes and mmap still work


def test_without_the_filter_the_same_calls_do_not_answer_eperm():
    """The control: unfiltered, these calls succeed, so the EPERMs above come from the filter.

    (Capability checks may answer EPERM for others in a container: those are not asserted here.)
    """
    out = _probe("unfiltered")
    assert out["active"] is False
    assert {
        n: out[n] for n in ("unshare", "personality", "keyctl", "socket_inet")
    } == dict.fromkeys(("unshare", "personality", "keyctl", "socket_inet"), "ok")


def test_a_foreign_arch_or_x32_syscall_kills_the_process():
    script = textwrap.dedent("""
        import ctypes, sys
        from grader.sandbox import launcher
        launcher.lock_down({"seccomp": True})
        libc = ctypes.CDLL(None, use_errno=True)
        libc.syscall(0x40000000 | 39)  # x32 getpid
        print("survived")
    """)
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, cwd=ROOT, timeout=60
    )
    if seccomp.machine() == "x86_64":
        assert done.returncode == -31 and "survived" not in done.stdout  # SIGSYS
    program = seccomp.program("aarch64")
    assert program[0] == (seccomp.LD_ABS_W, 0, 0, seccomp.OFF_ARCH) and program[1][3] == 0xC00000B7


def test_torch_imports_and_runs_attention_under_the_filter():
    script = textwrap.dedent("""
        from grader.sandbox import launcher
        launcher.lock_down({"seccomp": True})
        import torch, torch.nn.functional as F
        torch.set_num_threads(2)
        q = torch.randn(2, 4, 16, 8, requires_grad=True)
        out = F.scaled_dot_product_attention(q, q, q, is_causal=True)
        out.sum().backward()
        mha = torch.nn.MultiheadAttention(8, 2, batch_first=True)
        print("OK", tuple(out.shape), mha(q[0], q[0], q[0])[0].shape[-1], bool(q.grad.abs().sum() > 0))
    """)
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, cwd=ROOT, timeout=120
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert "OK (2, 4, 16, 8) 8 True" in done.stdout


def test_a_launch_whose_filter_fails_exits_125_and_never_starts_the_worker(tmp_path):
    spec = isolation.LaunchSpec("process")
    cfg = spec.config(tmp_path, 1, None, "")
    script = textwrap.dedent("""
        import sys
        from grader.sandbox import launcher
        def refuse():
            raise OSError("no seccomp here")
        launcher.seccomp.install = refuse
        sys.argv = ["launcher", sys.argv[1]]
        launcher.main()
    """)
    done = subprocess.run(
        [sys.executable, "-c", script, json.dumps(cfg)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )
    assert done.returncode == 125 and "sandbox set-up failed: no seccomp here" in done.stderr
    assert '"ready"' not in done.stdout


def test_the_isolation_record_says_seccomp_only_where_it_is_installed():
    assert isolation.LaunchSpec("process").describe()["seccomp"] is True
    assert isolation.LaunchSpec("none").describe()["seccomp"] is False
    assert isolation.LaunchSpec("bwrap").describe()["seccomp"] is False


# -- kernel keyrings --------------------------------------------------------------------------
KEYRING_RUN = textwrap.dedent("""
    import ctypes, json, sys
    from pathlib import Path
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    from grader.sandbox import seccomp
    keyctl, add_key = (seccomp.ARCHES[seccomp.machine()][1][n] for n in ("keyctl", "add_key"))
    assert libc.syscall(keyctl, 1, None) >= 0  # a private session keyring for this grader run ...
    assert libc.syscall(add_key, b"user", b"grader-secret", b"instructor-key", 14, ctypes.c_long(-3)) >= 0
    from grader.grade import grade
    messages = []
    from grader.sandbox.starters import ZygoteStarter
    for zygote in (None, "fork"):
        if zygote:
            from grader.sandbox.zygote_client import Zygote
            zygote = Zygote(); assert zygote.wait_ready()
        card = grade(Path(sys.argv[1]), isolation=sys.argv[2], seed=1, exercises=["softmax"],
                     per_test_time_limit=20, starter=ZygoteStarter(zygote) if zygote else None)
        messages += [t["message"] for e in card["exercises"] for t in e["tests"]]
        if zygote:
            zygote.close()
    print(json.dumps(messages))
""")


@pytest.mark.parametrize("backend", ["namespace", "process"])
def test_the_graders_session_keys_are_invisible_and_nothing_can_be_planted(tmp_path, backend):
    if backend not in choice.available():
        pytest.skip(f"needs the {backend} sandbox")
    sub = solutions_copy(tmp_path / "sub")
    shutil.copy(CORPUS / "hostile" / "uses_keyrings.py", sub / "softmax.py")
    done = subprocess.run(
        [sys.executable, "-c", KEYRING_RUN, str(sub), backend],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    reports = [m for m in json.loads(done.stdout) if "KEYS" in m]
    assert len(reports) >= 4, reports  # two tests, cold and forked
    for (
        text
    ) in reports:  # run after run: no secret read, nothing planted, nothing found from before
        assert "KEYS secret=errno1 earlier=errno1 planted=False seccomp=2" in text, text


@needs_namespace
def test_a_graded_worker_runs_under_the_filter_it_records(tmp_path):
    sub = solutions_copy(tmp_path / "sub")
    shutil.copy(CORPUS / "hostile" / "uses_keyrings.py", sub / "softmax.py")
    card = grade(
        sub, isolation="namespace", seed=2, exercises=["softmax", "masks"], per_test_time_limit=20
    )
    schema.validate("scorecard", card)
    assert card["isolation"]["seccomp"] is True
    assert card["score"] == 8  # masks only
    messages = [t["message"] for e in card["exercises"] for t in e["tests"] if e["id"] == "softmax"]
    assert all("seccomp=2" in m for m in messages), messages
