"""``grader selfcheck [--cuda]``: the instructor's check of the reference ``efficient_attention``.

Trusted side, not an exercise: the reference is loaded by path from ``solutions/`` beside the
manifest (:mod:`grader.course.references`), never imported from ``sys.path``. Without ``--cuda``:
quick CPU checks of the reference ``flash_attention`` and ``sdpa_attention`` against independent
oracles (SDPA's math backend, a float64 hand computation). With ``--cuda``: the reference functions
in fp16 and bf16 against ``F.scaled_dot_product_attention`` forced onto the FLASH_ATTENTION kernel
(head dim 64, L in {128, 1024}, causal and not, B=2, H=4), then every assignment's reference
solutions graded through the hidden suites in the sandbox on the GPU, listing each CUDA test (RoPE,
GQA, the KV cache, sliding windows and the flash backward of ``attention-modern`` included). Exit
status: 0 all checks pass, 1 some check failed, 2 nothing was verified (no CUDA device).
"""

from __future__ import annotations

import importlib
import math
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

from grader.course import manifest, references
from grader.testing import precision

NO_CUDA = (
    "CUDA check skipped: no CUDA device (torch.cuda.is_available() is False); nothing was verified"
)
MODULE = "efficient_attention"
CpuRow = tuple[str, float, float, bool]  # check, max abs error, tolerance, ok
CudaRow = tuple[
    str, str, int, bool, float, float, bool
]  # function, dtype, L, causal, mean error, kernel's, ok
SuiteRow = tuple[str, str, str, bool]  # assignment, test id, outcome, ok


def reference(root: Path | None = None) -> ModuleType:
    """The reference ``efficient_attention`` from ``root/solutions`` (default: beside the default
    manifest)."""
    references.solutions_package(root or manifest.REPO_ROOT)
    return importlib.import_module(f"{references.PACKAGE}.{MODULE}")


def _hand(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, keep: torch.Tensor | None = None
) -> torch.Tensor:
    """float64 softmax(q k^T / sqrt(E)) v; `keep` True = may attend."""
    scores = q.double() @ k.double().transpose(-2, -1) / math.sqrt(q.shape[-1])  # (B, H, L, S)
    if keep is not None:
        scores = scores.masked_fill(~keep, float("-inf"))
    return torch.softmax(scores, dim=-1) @ v.double()  # (B, H, L, Ev)


def _math(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, *, is_causal: bool = False
) -> torch.Tensor:
    with sdpa_kernel(SDPBackend.MATH):
        return F.scaled_dot_product_attention(q, k, v, is_causal=is_causal)


def _row(name: str, got: torch.Tensor, expected: torch.Tensor, atol: float, rtol: float) -> CpuRow:
    err = float((got.double() - expected.double()).abs().max())
    ok = bool(torch.isfinite(got).all()) and torch.allclose(
        got.double(), expected.double(), atol=atol, rtol=rtol
    )
    return name, err, atol, ok


def cpu_checks(ref: ModuleType) -> list[CpuRow]:
    """The CPU rows for the reference module ``ref``."""
    flash_attention, sdpa_attention = ref.flash_attention, ref.sdpa_attention
    g = torch.Generator().manual_seed(0)

    def rand(*shape: int, dtype: torch.dtype = torch.float32) -> torch.Tensor:
        return torch.randn(*shape, generator=g, dtype=dtype)

    q, k, v = rand(2, 4, 37, 16), rand(2, 4, 37, 16), rand(2, 4, 37, 8)
    q64, k64, v64 = (
        rand(2, 2, 5, 8, dtype=torch.float64),
        rand(2, 2, 13, 8, dtype=torch.float64),
        rand(2, 2, 13, 4, dtype=torch.float64),
    )
    keep = torch.ones(5, 13, dtype=torch.bool).tril(
        diagonal=13 - 5
    )  # bottom-right causal (L=5, S=13)
    pad = torch.tensor([True] * 10 + [False] * 3)[
        None, :
    ]  # (1, S): the last three keys are padding
    rows = []
    for bs in (1, 5, 8, 64):
        rows.append(
            _row(
                f"flash fp32 L=S=37 block={bs} vs SDPA math",
                flash_attention(q, k, v, block_size=bs),
                _math(q, k, v),
                1e-5,
                1e-4,
            )
        )
    rows.append(
        _row(
            "flash fp32 causal L=S=37 vs SDPA math",
            flash_attention(q, k, v, is_causal=True, block_size=8),
            _math(q, k, v, is_causal=True),
            1e-5,
            1e-4,
        )
    )
    rows.append(
        _row(
            "flash fp64 causal L=5 S=13 vs hand",
            flash_attention(q64, k64, v64, is_causal=True, block_size=4),
            _hand(q64, k64, v64, keep),
            1e-10,
            1e-7,
        )
    )
    rows.append(
        _row(
            "sdpa_attention causal L=5 S=13 vs hand",
            sdpa_attention(q64, k64, v64, is_causal=True),
            _hand(q64, k64, v64, keep),
            1e-10,
            1e-7,
        )
    )
    rows.append(
        _row(
            "sdpa_attention bool padding mask vs hand",
            sdpa_attention(q64, k64, v64, mask=pad),
            _hand(q64, k64, v64, pad),
            1e-10,
            1e-7,
        )
    )
    rows.append(
        _row(
            "sdpa_attention eval, dropout_p=0.5 vs hand",
            sdpa_attention(q, k, v, dropout_p=0.5, training=False),
            _hand(q, k, v),
            1e-5,
            1e-4,
        )
    )
    return rows


def cuda_checks(ref: ModuleType) -> list[CudaRow]:
    """(function, dtype, L, causal, mean error, the flash kernel's mean error, ok) per case, both
    against float64; ok: within the factors the hidden CUDA tests allow students
    (:mod:`grader.testing.precision`)."""
    g = torch.Generator().manual_seed(0)
    rows = []
    fns: dict[str, Callable[..., torch.Tensor]] = {
        "flash_attention": lambda q, k, v, c: ref.flash_attention(
            q, k, v, is_causal=c, block_size=64
        ),
        "sdpa_attention": lambda q, k, v, c: ref.sdpa_attention(q, k, v, is_causal=c),
    }
    for dtype in (torch.float16, torch.bfloat16):
        for L in (128, 1024):
            for causal in (False, True):
                q, k, v = (
                    torch.randn(2, 4, L, 64, generator=g).to(device="cuda", dtype=dtype)
                    for _ in range(3)
                )
                with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
                    kernel = F.scaled_dot_product_attention(
                        q, k, v, is_causal=causal
                    )  # (2, 4, L, 64)
                truth = _math(q.double(), k.double(), v.double(), is_causal=causal)
                k_mean, k_max = precision.errors(kernel, truth)
                for name, fn in fns.items():
                    got = fn(q, k, v, causal)
                    mean, worst = precision.errors(got, truth)
                    ok = (
                        got.dtype == dtype
                        and bool(torch.isfinite(got).all())
                        and mean <= precision.MEAN_FACTOR * k_mean
                        and worst <= precision.MAX_FACTOR * k_max
                    )
                    rows.append(
                        (name, str(dtype).removeprefix("torch."), L, causal, mean, k_mean, ok)
                    )
    return rows


def suite_rows(root: Path | None = None) -> list[SuiteRow]:
    """Grade each assignment's reference solutions (sandboxed, CUDA tests counted): a row per
    assignment (ok when every other test passed) and one per CUDA test (ok when it passed: a skip
    verifies nothing)."""
    from grader.grade import (
        grade,
    )  # the trusted grading path: imported only when the suites are run

    path = (root or manifest.REPO_ROOT) / "assignments.json"
    rows: list[SuiteRow] = []
    for assignment in manifest.load_all(path):
        card = grade(
            (root or manifest.REPO_ROOT) / "solutions",
            assignment=assignment,
            seed=0,
            require_cuda=True,
        )
        tests = [t for e in card["exercises"] for t in e["tests"]]
        cpu_ok = card["status"] == "graded" and all(
            t["outcome"] == "passed" for t in tests if not t["cuda"]
        )
        rows.append(
            (assignment.id, f"score {card['score']}/{card['max_score']}", card["status"], cpu_ok)
        )
        rows += [
            (assignment.id, t["id"], t["outcome"], t["outcome"] == "passed")
            for t in tests
            if t["cuda"]
        ]
    return rows


def _print_suite_table(rows: list[SuiteRow]) -> None:
    print("reference solutions through the hidden suites, sandboxed, on the GPU")
    for assignment, test, outcome, ok in rows:
        print(f"  {assignment:<18}  {test:<90}  {outcome:<7}  {'yes' if ok else 'NO'}")


def _print_cpu_table(rows: list[CpuRow]) -> None:
    width = max(len(r[0]) for r in rows)
    print("reference efficient_attention vs CPU oracles")
    print(f"  {'check':<{width}}  {'max abs err':>11}  {'tolerance':>9}  ok")
    for name, err, tol, ok in rows:
        print(f"  {name:<{width}}  {err:>11.3e}  {tol:>9.0e}  {'yes' if ok else 'NO'}")


def _print_cuda_table(rows: list[CudaRow]) -> None:
    print(
        f"reference vs F.scaled_dot_product_attention (FLASH_ATTENTION kernel) on {torch.cuda.get_device_name()}"
    )
    print(
        f"  errors against float64; ok: mean <= {precision.MEAN_FACTOR:g}x and max <= {precision.MAX_FACTOR:g}x "
        "the kernel's"
    )
    print(
        f"  {'function':<15}  {'dtype':<8}  {'L':>5}  {'causal':<6}  {'mean err':>9}  {'kernel':>9}  ratio  ok"
    )
    for name, dtype, L, causal, mean, k_mean, ok in rows:
        print(
            f"  {name:<15}  {dtype:<8}  {L:>5}  {causal!s:<6}  {mean:>9.3e}  {k_mean:>9.3e}  "
            f"{mean / k_mean if k_mean else float('inf'):5.2f}  {'yes' if ok else 'NO'}"
        )


def main(*, cuda: bool = False, root: Path | None = None) -> int:
    """Run the checks, print a table; 0 if all pass, 1 if one fails, 2 if CUDA was asked for but is
    absent."""
    ref = reference(
        root
    )  # first, as before the move: no reference beside the manifest is the caller's mistake
    if cuda and not torch.cuda.is_available():
        print(NO_CUDA)
        return 2
    if cuda:
        cuda_rows, suites = cuda_checks(ref), suite_rows(root)
        _print_cuda_table(cuda_rows)
        _print_suite_table(suites)
        oks = [row[-1] for row in cuda_rows] + [row[-1] for row in suites]
    else:
        cpu_rows = cpu_checks(ref)
        _print_cpu_table(cpu_rows)
        oks = [row[-1] for row in cpu_rows]
    failed = oks.count(False)
    print(f"{len(oks) - failed}/{len(oks)} checks passed")
    return 0 if failed == 0 else 1
