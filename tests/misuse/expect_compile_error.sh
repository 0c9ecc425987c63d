#!/usr/bin/env bash
# usage: expect_compile_error.sh CXX FILE FLAGS... — FILE must fail to compile with
# every message listed in its `// EXPECT-ERROR: text` lines.
set -u
cxx=$1; file=$2; shift 2
out=$("$cxx" -std=c++20 -fsyntax-only "$@" "$file" 2>&1) && { echo "$file compiled, but must not"; exit 1; }
status=0
while IFS= read -r want; do
  if ! grep -qF -- "$want" <<<"$out"; then echo "missing diagnostic: $want"; status=1; fi
done < <(sed -n 's|^// EXPECT-ERROR: ||p' "$file")
if ! grep -q "^// EXPECT-ERROR: " "$file"; then echo "$file has no EXPECT-ERROR line"; status=1; fi
(( status )) && { echo "--- compiler output ---"; echo "$out" | head -40; }
exit $status
