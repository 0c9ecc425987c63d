#!/usr/bin/env bash
# usage: expect_failure.sh REGEX CMD... — passes iff CMD exits non-zero (not by a
# signal) and its stderr/stdout matches REGEX.
set -u
regex=$1; shift
out=$("$@" 2>&1); rc=$?
if (( rc == 0 )); then echo "expected failure, got exit 0:"; echo "$out"; exit 1; fi
if (( rc >= 128 )); then echo "crashed (exit $rc):"; echo "$out"; exit 1; fi
if ! grep -qE -- "$regex" <<<"$out"; then echo "exit $rc but output lacks /$regex/:"; echo "$out"; exit 1; fi
echo "ok: exit $rc, message: $(grep -E -m1 -- "$regex" <<<"$out")"
