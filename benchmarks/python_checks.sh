#!/usr/bin/env bash
# The student runtime and the grader on other Pythons (issue 28.13), from the repository root:
#   bash benchmarks/python_checks.sh OUTDIR PYTHON...      e.g. /root/.pyenv/versions/3.12.1/bin/python
# For each interpreter: a fresh venv in OUTDIR (or, given a venv's python, that venv), `pip install torch==2.13.0` (on a Python other than 3.11 pip takes
# PyPI's build, several GB with its CUDA libraries; it runs on the CPU) and this checkout (`pip install -e .`);
# then, in a student repository released for attention-basics (on the stubs, and on the reference solutions):
# `grader check`, `grader ci` and `pytest tests/public`; then the grader: `grader batch` of a class of two
# (the reference softmax and the stub) on softmax, canary included, under the strongest sandbox there.
# One summary line per step (OUTDIR/summary.txt); what each printed is in OUTDIR/<python>/<step>.log.
set -u
out=$(realpath -m "${1:?give OUTDIR and at least one PYTHON}")
shift
repo=$(pwd)
mkdir -p "$out"
: > "$out/summary.txt"

step() {  # step LOG EXPECTED COMMAND...: run it, say whether it exited as expected, and in how long
  local log=$1 want=$2 start=$EPOCHREALTIME rc
  shift 2
  "$@" > "$log" 2>&1 < /dev/null
  rc=$?
  python3 -c "import sys; print(f'{sys.argv[1]}: exit {sys.argv[2]} (want {sys.argv[3]}) in {float(sys.argv[5]) - float(sys.argv[4]):.0f} s')" \
    "${log#"$out"/}" "$rc" "$want" "$start" "$EPOCHREALTIME" | tee -a "$out/summary.txt"
  [ "$rc" = "$want" ]
}

for py in "$@"; do
  v=$("$py" -c 'import platform; print(platform.python_version())') || { echo "$py: not runnable" | tee -a "$out/summary.txt"; continue; }
  dir="$out/$v"
  rm -rf "$dir" && mkdir -p "$dir"
  if [ -f "$(dirname "$py")/../pyvenv.cfg" ]; then  # a venv given: used as it is (torch may be there already)
    bin=$(dirname "$py")
  else
    "$py" -m venv "$dir/venv"
    bin="$dir/venv/bin"
  fi
  step "$dir/install-torch.log" 0 "$bin/pip" install -q torch==2.13.0 || continue
  step "$dir/install-grader.log" 0 "$bin/pip" install -q -e "$repo" || continue
  step "$dir/release.log" 0 "$bin/grader" release "$dir/student" || continue
  cp -r "$dir/student" "$dir/solved" && cp "$repo"/solutions/*.py "$dir/solved/exercises/"
  (cd "$dir/student" && step "$dir/check-stubs.log" 1 "$bin/grader" check)
  (cd "$dir/student" && step "$dir/ci-stubs.log" 0 "$bin/grader" ci)
  (cd "$dir/student" && step "$dir/pytest-stubs.log" 1 "$bin/python" -m pytest tests/public -q)
  (cd "$dir/solved" && step "$dir/check-solved.log" 0 "$bin/grader" check)
  (cd "$dir/solved" && step "$dir/pytest-solved.log" 0 "$bin/python" -m pytest tests/public -q)
  mkdir -p "$dir/class/ref" "$dir/class/stub"
  cp "$repo/solutions/softmax.py" "$dir/class/ref/" && cp "$repo/exercises/softmax.py" "$dir/class/stub/"
  (cd / && GRADER_CACHE_DIR="$dir/cache" step "$dir/batch.log" 0 "$bin/grader" batch "$dir/class" --out "$dir/graded" \
     --exercise softmax -j 1 --seed 1)
  "$bin/python" - "$dir" <<'EOF' | tee -a "$out/summary.txt"
import json, pathlib, sys
d = pathlib.Path(sys.argv[1])
cards = {p.stem: json.loads(p.read_text()) for p in sorted((d / "graded" / "scorecards").glob("*.json"))}
for key, c in cards.items():
    print(f"{d.name} batch {key}: {c['status']} {c['score']:g}/{c['max_score']:g} under {c['isolation']['backend']}, "
          f"python {c['environment']['python']}, torch {c['environment']['torch']}")
EOF
done
