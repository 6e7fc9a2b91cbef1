#!/usr/bin/env bash
# The CUDA checks, run where a CUDA GPU is (the `device` tool's machine, or an instructor's GPU host), from the
# repository root: `bash benchmarks/cuda_checks.sh [OUTDIR]`. What it runs, in order:
#   1. `grader selfcheck --cuda`: the reference flash/SDPA against the flash kernel, then every assignment's
#      reference solutions through the hidden suites in the sandbox with the CUDA tests counted;
#   2. `grader grade solutions --require-cuda` for each assignment (the canary, then the sandboxed grade);
#   3. the corpus bugs that only a GPU catches (half-precision accumulation), which must lose CUDA points;
#   4. the project's GPU-aware tests.
# A summary line per step; everything is also written to OUTDIR/log.txt. Missing Python packages (the device
# image has torch, pytest, rich and jinja2) are taken from wheels in .whl/ when that folder exists.
set -u
out=${1:-${OUT:-/tmp/cuda-checks}}
mkdir -p "$out"
exec > >(tee "$out/log.txt") 2>&1
export PYTHONUNBUFFERED=1 GRADER_CACHE_DIR="$out/cache"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader || echo "no nvidia-smi"
python3 -c "import sys, torch; print(sys.version.split()[0], torch.__version__, torch.version.cuda, torch.cuda.is_available())"
if [ -d .whl ] && ! python3 -c "import jsonschema, nbformat" 2>/dev/null; then python3 -m pip install -q --no-index --no-deps --no-compile .whl/*.whl || exit 1; fi
python3 -m pip install -q --no-index --no-deps --no-build-isolation -e . || exit 1

step() {  # step NAME COMMAND...: run it, time it, say how it ended
  local name=$1 start=$EPOCHREALTIME rc
  shift
  "$@"
  rc=$?
  python3 -c "import sys; print(f'== {sys.argv[1]}: exit {sys.argv[2]} in {float(sys.argv[4]) - float(sys.argv[3]):.1f} s')" \
    "$name" "$rc" "$start" "$EPOCHREALTIME" | tee -a "$out/summary.txt"
}

for a in attention-basics attention-modern; do
  step "grade solutions $a" grader grade solutions --assignment "$a" --require-cuda --out "$out/$a.json"
  [ -s "$out/$a.json" ] || { echo "the sandbox cannot grade here: the remaining checks would fail the same way"; exit 1; }
done
step "selfcheck --cuda" grader selfcheck --cuda
for bug in efficient_attention/flash_accumulates_in_half flash_backward/bwd_accumulates_in_half; do
  sub=$(mktemp -d) && cp solutions/*.py "$sub/" && cp "tests/corpus/buggy/$bug.py" "$sub/$(basename "$(dirname "$bug")").py"
  a=$([ "${bug%%/*}" = flash_backward ] && echo attention-modern || echo attention-basics)
  step "grade $bug" grader grade "$sub" --assignment "$a" --require-cuda \
    --out "$out/$(basename "$bug").json"
done
python3 - "$out" <<'EOF' | tee -a "$out/summary.txt"
"""Per scorecard: the score, the isolation record's GPU part, and each CUDA test's outcome."""
import json, pathlib, sys
for path in sorted(pathlib.Path(sys.argv[1]).glob("*.json")):
    card = json.loads(path.read_text())
    cuda = [t for e in card["exercises"] for t in e["tests"] if t["cuda"]]
    passed = sum(t["outcome"] == "passed" for t in cuda)
    print(f"{path.name}: {card['status']} {card['score']}/{card['max_score']}; CUDA tests passed {passed}/{len(cuda)};"
          f" gpu={card['isolation'].get('gpu')}; environment cuda={card['environment'].get('cuda')}")
    for t in cuda:
        if t["outcome"] != "passed":
            print(f"  {t['outcome']}: {t['id']}: {t.get('message', '')[:300]}")
EOF
step "project GPU tests" python3 -m pytest -p no:cacheprovider -q tests/project/scoring/test_selfcheck.py tests/project/testing/test_precision.py
