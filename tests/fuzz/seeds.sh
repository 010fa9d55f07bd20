#!/usr/bin/env bash
# Writes the fuzzers' seed corpora. Programs: every example and golden
# program behind a header (tests/fuzz/fuzz.h) of 3 streams, no allocation
# failure, no override, and 4 ranks for an example, 1 for a golden program
# (those are print tests, not meant for more ranks). The corpus suite checks
# that the seeds match the programs and pass the dry run: run this (make
# fuzz-seeds) after changing one. Then .npy files and traces (below).
set -euo pipefail
cd "$(dirname "$0")/../.."
out=tests/fuzz/corpus
rm -f "$out"/seed-*
for f in examples/*.hir tests/programs/*.hir; do
    name="seed-$(basename "$(dirname "$f")")-$(basename "$f" .hir)"
    case "$f" in examples/*) ranks='\003' ;; *) ranks='\000' ;; esac
    { printf "$ranks"'\002\000\000\377\000\377\000'; cat "$f"; } > "$out/$name"
done

# .npy seeds (tests/fuzz/fuzz_npy.c): a header of the tensor's dtype, rank
# and sizes, then a file for it, as numpy and hn_npy_write write them
out=tests/fuzz/corpus-npy
mkdir -p "$out"
rm -f "$out"/seed-*
# npy_seed NAME HEADER(5 bytes, printf escapes) DESCR SHAPE ELEMENTS ELEMENT(printf escapes)
npy_seed() {
    local text="{'descr': '$3', 'fortran_order': False, 'shape': ($4), }" len total
    len=${#text}
    total=$(( (10 + len + 1 + 63) / 64 * 64 - 10 ))
    {
        printf "$2"
        printf '\223NUMPY\001\000'
        printf "\\$(printf %03o $((total % 256)))\\$(printf %03o $((total / 256)))"
        printf '%s' "$text"
        printf '%*s' $((total - len - 1)) ''
        printf '\n'
        for ((i = 0; i < $5; i++)); do printf "$6"; done
    } > "$out/seed-$1"
}
npy_seed f32-4 '\000\000\004\000\000' '<f4' '4,' 4 '\000\000\200\077'
npy_seed f32-3x5-numpy '\000\001\003\005\000' '<f4' '3, 5' 15 '\000\000\300\277'
npy_seed f32-3x5-hirnode '\000\001\003\005\000' '<f4' '3, 5,' 15 '\000\000\100\100'
npy_seed f32-from-f8 '\000\001\003\005\000' '<f8' '3, 5' 15 '\000\000\000\000\000\000\360\077'
npy_seed bf16-2x3x4 '\001\002\002\003\004' '<f4' '2, 3, 4' 24 '\000\000\040\301'
npy_seed f16-6 '\002\000\006\000\000' '<f2' '6,' 6 '\000\074'
npy_seed i32-8 '\003\000\010\000\000' '<i4' '8,' 8 '\377\377\377\377'
npy_seed i32-from-f8 '\003\000\004\000\000' '<f8' '4,' 4 '\000\000\000\000\000\000\024\300'
npy_seed i64-2x2 '\004\001\002\002\000' '<i8' '2, 2' 4 '\007\000\000\000\000\000\000\200'
npy_seed empty-0x3 '\000\001\000\003\000' '<f4' '0, 3' 0 ''

# trace seeds (tests/fuzz/fuzz_trace.c): traces of a few examples, written
# by build/hirnode (their times differ from run to run), each under 4 KiB
# so that the fuzzer keeps its inputs short; seed-keys, written by hand,
# stays (messages' match keys, a wait's dependency, named tracks)
out=tests/fuzz/corpus-trace
if [ -x build/hirnode ]; then
    rm -f "$out"/seed-run-*
    for spec in "all_to_all 2 1" "reduce_scatter 2 1" "ag_matmul_sequential 2 1" "allreduce 2 1" "allgather 1 3"; do
        set -- $spec
        build/hirnode run --gpus "$2" --iters "$3" --trace "$out/seed-run-$1" "examples/$1.hir" >/dev/null
    done
else
    echo "seeds: build/hirnode not built: the trace seeds are left as they are" >&2
fi
