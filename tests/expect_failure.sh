#!/usr/bin/env bash
# usage: expect_failure.sh STATUS REGEX CMD... — passes iff CMD exits with
# STATUS (a number; never a signal), within 120 s, and its stderr/stdout
# matches REGEX. Standard input is empty.
set -u
status=$1; regex=$2; shift 2
out=$(timeout 120 "$@" 2>&1 </dev/null); rc=$?
if (( rc == 124 )); then echo "hung (killed after 120 s):"; echo "$out" | head -50; exit 1; fi
if (( rc >= 128 )); then echo "crashed (exit $rc):"; echo "$out" | head -50; exit 1; fi
if (( rc != status )); then echo "expected exit $status, got $rc:"; echo "$out" | head -50; exit 1; fi
if ! grep -qE -- "$regex" <<<"$out"; then echo "exit $rc but output lacks /$regex/:"; echo "$out" | head -50; exit 1; fi
if (( $(grep -c . <<<"$out") > 4 )); then echo "more than one message:"; echo "$out" | head -50; exit 1; fi
echo "ok: exit $rc, message: $(grep -E -m1 -- "$regex" <<<"$out")"
