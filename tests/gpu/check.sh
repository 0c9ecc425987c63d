#!/usr/bin/env bash
# The GPU procedure, on a machine with an NVIDIA GPU, PyTorch and
# transformers (for the golden data): both GPU suites as they are, then under
# compute-sanitizer's memcheck, racecheck and synccheck. Each run's log goes
# to OUTDIR; the summary says which passed. Exits non-zero if any did not.
#
#   bash tests/gpu/check.sh OUTDIR [BINDIR]    # BINDIR: build/bin or wherever the binaries are
#
# KILN_CHECK_TOOLS picks the runs ("plain memcheck racecheck synccheck", the
# default); KILN_CHECK_TIMEOUT bounds each one (seconds, default 900).
set -uo pipefail
out=${1:?usage: check.sh OUTDIR [BINDIR]}
bin=${2:-}
here=$(cd "$(dirname "$0")/../.." && pwd)
mkdir -p "$out/golden"
run() { [[ -n "$bin" ]] && echo "$bin/$1" || command -v "$1"; }
sanitizer=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
limit=${KILN_CHECK_TIMEOUT:-900}

# Golden data for GPT-2 124M from HF transformers on this GPU.
python3 "$here/tests/gpt2/make_golden.py" model 124M "$out/golden/124M_fp32.json" --device cuda \
  --dtype fp32 > "$out/golden.log" 2>&1 || echo "golden data: failed (see golden.log)"
cp "$here"/tests/gpt2/data/*.json "$out/golden/"
export KILN_GPT2_GOLDEN="$out/golden" KILN_GPT2_TEST_DATA="$out/golden"

status=0
summary=()
check() { # NAME CMD...
  local name=$1; shift
  local start=$SECONDS
  timeout "$limit" "$@" > "$out/$name.log" 2>&1
  local rc=$?
  summary+=("$name: $([[ $rc == 0 ]] && echo pass || echo "FAIL (exit $rc)") in $((SECONDS - start)) s")
  [[ $rc == 0 ]] || status=1
}
for suite in kiln_gpu_tests kiln_gpt2_gpu_tests; do
  exe=$(run $suite)
  for tool in ${KILN_CHECK_TOOLS:-plain memcheck racecheck synccheck}; do
    if [[ $tool == plain ]]; then
      check "$suite" "$exe"
      continue
    fi
    extra=()
    [[ $tool == memcheck ]] && extra=(--leak-check full)
    check "$suite.$tool" "$sanitizer" --tool "$tool" "${extra[@]}" --error-exitcode 99 "$exe"
  done
done
printf '%s\n' "${summary[@]}" | tee "$out/summary.txt"
exit $status
