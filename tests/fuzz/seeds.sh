#!/usr/bin/env bash
# Writes the fuzzer's seed corpus: every example and golden program behind
# a header (tests/fuzz/fuzz.h) of 3 streams, no allocation failure, no
# override, and 4 ranks for an example, 1 for a golden program (those are
# print tests, not meant for more ranks). The corpus suite checks that the
# seeds match the programs and pass the dry run: run this (make
# fuzz-seeds) after changing one.
set -euo pipefail
cd "$(dirname "$0")/../.."
out=tests/fuzz/corpus
rm -f "$out"/seed-*
for f in examples/*.hir tests/programs/*.hir; do
    name="seed-$(basename "$(dirname "$f")")-$(basename "$f" .hir)"
    case "$f" in examples/*) ranks='\003' ;; *) ranks='\000' ;; esac
    { printf "$ranks"'\002\000\000\377\000\377\000'; cat "$f"; } > "$out/$name"
done
