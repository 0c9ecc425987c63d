#!/usr/bin/env bash
# Runs fuzz targets as parallel libFuzzer jobs (own seed and work folder
# each, all starting from the seed corpus) for SECONDS, then sums the
# executions per target and lists any finding.
#
#   bash tests/fuzz/parallel_run.sh SECONDS TARGET:JOBS...   # fuzz_<target> on the PATH
set -uo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
export ASAN_OPTIONS="abort_on_error=1:use_sigaltstack=0:allow_user_poisoning=0${ASAN_OPTIONS:+:$ASAN_OPTIONS}"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1${UBSAN_OPTIONS:+:$UBSAN_OPTIONS}"
secs=$1; shift
out=${KILN_FUZZ_OUT:-/tmp/kiln-fuzz}
mkdir -p "$out"
for spec in "$@"; do
  t=${spec%%:*}; n=${spec##*:}
  seeds=("$repo/tests/fuzz/corpus/$t")
  [[ $t == kiln_opt ]] && seeds=("$repo/tests/lit/dialect" "$repo/tests/lit/cpu" "$repo/tests/lit/gpu")
  for j in $(seq "$n"); do
    d="$out/$t.$j"
    mkdir -p "$d/work"
    (cd "$d" && "fuzz_$t" -seed=$((1000 + j)) -max_total_time="$secs" -rss_limit_mb=4096 -timeout=10 \
       -print_final_stats=1 work "${seeds[@]}" > log 2>&1; echo $? > rc) &
  done
done
wait
status=0
for spec in "$@"; do
  t=${spec%%:*}
  runs=$(cat "$out/$t".*/log | grep -h "stat::number_of_executed_units" | awk '{s += $2} END {print s + 0}')
  found=$(grep -l "ERROR\|Test unit written" "$out/$t".*/log | wc -l)
  echo "$t: $runs executions in $(ls -d "$out/$t".* | wc -l) jobs of $secs s; exit codes: $(cat "$out/$t".*/rc | sort | uniq -c | xargs); jobs with a finding: $found"
  (( found == 0 )) || { status=1; grep -h -A3 "ERROR" "$out/$t".*/log | head -8; }
done
exit $status
