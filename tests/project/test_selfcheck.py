"""`grader selfcheck`: the CPU checks of the reference pass; the CUDA check says so when it verified nothing."""

from __future__ import annotations

import pytest
import torch

from grader import manifest, references

references.solutions_package(manifest.REPO_ROOT)
from solutions import selfcheck  # noqa: E402 - loaded from beside the manifest, never from sys.path


def test_cpu_selfcheck_passes_and_prints_a_table(capsys):
    assert selfcheck.main(cuda=False) == 0
    out = capsys.readouterr().out
    assert "max abs err" in out and "NO" not in out.split()
    assert "checks passed" in out


@pytest.mark.skipif(torch.cuda.is_available(), reason="a CUDA device is present: the real check runs instead")
def test_cuda_selfcheck_without_a_device_returns_2_and_says_why(capsys):
    assert selfcheck.main(cuda=True) == 2
    out = capsys.readouterr().out
    assert "CUDA check skipped: no CUDA device" in out
    assert "nothing was verified" in out


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_cuda_selfcheck_passes_on_a_device(capsys):
    assert selfcheck.main(cuda=True) == 0, capsys.readouterr().out
    out = capsys.readouterr().out
    assert "float16" in out and "bfloat16" in out and "1024" in out
