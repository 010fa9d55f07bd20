#!/usr/bin/env bash
# End-to-end checks of the `hirnode` command: every example with --check at
# 1, 2, 4 and 8 ranks (also with random stream delays), exit codes, error
# format, dump round trip, .npy save/load.
set -u
cli=${1:-build/hirnode}
fail=0 pass=0
ok() { pass=$((pass + 1)); }
bad() { echo "FAIL: $*"; fail=$((fail + 1)); }

for f in examples/*.hir; do
  for g in 1 2 4 8; do
    for delay in 0 100; do
      if out=$("$cli" run --gpus "$g" --check --delay "$delay" --iters 2 "$f" 2>&1); then ok
      else bad "$f --gpus $g --delay $delay"; echo "$out" | tail -5; fi
    done
  done
  d=$(mktemp)
  "$cli" dump "$f" > "$d" && "$cli" dump "$d" | cmp -s - "$d" && ok || bad "dump of $f is not a fixed point"
  rm -f "$d"
done

# dump --lowered: the lowered program reads back (a fixed point without the
# comments), passes check, and runs to the same check as its source
t=$(mktemp -d)
for f in examples/*.hir; do
  for g in 1 2 4; do
    "$cli" dump --lowered --gpus "$g" "$f" > "$t/low.hir" || { bad "dump --lowered --gpus $g $f"; continue; }
    grep -v '^#' "$t/low.hir" > "$t/want"
    "$cli" dump "$t/low.hir" | cmp -s - "$t/want" && ok || bad "dump --lowered of $f at $g is not a fixed point"
    "$cli" check --gpus "$g" "$t/low.hir" >/dev/null && ok || bad "the lowered $f does not check at $g"
    if "$cli" run --gpus "$g" --check --delay 50 "$t/low.hir" >/dev/null 2>&1; then ok; else bad "the lowered $f fails at $g"; fi
  done
done
# the golden lowered programs, one per strategy
for f in tests/programs/lowered/*.hir; do
  g=$(head -1 "$f" | sed -n 's/^# lowered at \([0-9]*\) ranks.*/\1/p')
  "$cli" dump --lowered --gpus "$g" "$f" | grep -v '^#' | cmp -s - "${f%.hir}.expected" && ok || bad "golden $f"
done
# what lowering rejects: exit 2, the statement's position and text
printf 'input A : f32[4, 8] replicated\ninput B : f32[8, 2] replicated\noutput C : f32[8, 2] replicated\nmatmul C <- allgather(A), B pipelined(strategy=collective, chunks=3)\n' > "$t/chunks.hir"
out=$("$cli" dump --lowered --gpus 2 "$t/chunks.hir" 2>&1); rc=$?
[ $rc = 2 ] && echo "$out" | grep -q "chunks.hir:4:1: error: matmul C <- allgather(A), B pipelined(strategy=collective, chunks=3): chunks=3 does not divide" && ok || bad "dump --lowered of bad chunks: rc=$rc $out"
out=$("$cli" run --gpus 2 "$t/chunks.hir" 2>&1); rc=$?
[ $rc = 2 ] && echo "$out" | grep -q "chunks.hir:4:1: error: " && ok || bad "run of bad chunks: rc=$rc $out"
out=$("$cli" check --gpus 2 "$t/chunks.hir" 2>&1); rc=$?
[ $rc = 2 ] && echo "$out" | grep -q "chunks.hir:4:1: error: " && ok || bad "check of bad chunks: rc=$rc $out"
# bench overlap runs on the host backend (small shapes), outputs checked
for op in ag_matmul matmul_rs matmul_ar; do
  out=$("$cli" bench overlap --op "$op" --gpus 2 --shapes 64x32x16 --dtype bf16,f32 --iters 1 --warmup 1 2>/dev/null); rc=$?
  [ $rc = 0 ] && echo "$out" | grep -q "^auto " && ! echo "$out" | grep -q WRONG && ok || bad "bench overlap --op $op: rc=$rc"
done
"$cli" bench overlap --op ag_matmul --reps 5 >/dev/null 2>&1; [ $? = 2 ] && ok || bad "bench overlap takes at least 20 runs"
rm -rf "$t"

# a malformed program: exit 2 and file:line:col: error:
t=$(mktemp -d)
printf 'x = 1 +\n' > "$t/bad.hir"
out=$("$cli" check "$t/bad.hir" 2>&1); rc=$?
[ $rc = 2 ] && echo "$out" | grep -q "^$t/bad.hir:1:8: error: " && ok || bad "malformed program: rc=$rc $out"
# bad usage: exit 2
"$cli" run --gpus zero examples/allgather.hir >/dev/null 2>&1; [ $? = 2 ] && ok || bad "bad --gpus"
"$cli" frobnicate >/dev/null 2>&1; [ $? = 2 ] && ok || bad "unknown command"
"$cli" run --backend cuda --gpus 2 examples/allgather.hir >/dev/null 2>&1; rc=$?
if "$cli" info | grep -qE '^  cuda +[1-9]'; then :; else [ $rc = 2 ] && ok || bad "--backend cuda without GPUs: rc=$rc"; fi
# a program the verifier rejects: exit 2
printf 'input A : f32[4] replicated\nB = alloc f32[4]\nallgather B <- A\n' > "$t/v.hir"
out=$("$cli" run --gpus 2 "$t/v.hir" 2>&1); rc=$?
[ $rc = 2 ] && echo "$out" | grep -q "v.hir:3:1: error: all ranks: allgather B <- A" && ok || bad "verify: rc=$rc $out"
# a failing check: exit 1
sed 's/Ag\[src\], W, bias/Ag[(src + 1) % world], W, bias/' examples/ag_matmul_p2p.hir > "$t/wrong.hir"
"$cli" run --gpus 4 --check "$t/wrong.hir" >/dev/null 2>&1; [ $? = 1 ] && ok || bad "a wrong pipeline must fail its check"
# parameters from the command line
"$cli" run --gpus 2 --check -D M=1024 -D N=16 examples/ag_matmul_p2p.hir >/dev/null && ok || bad "-D"
"$cli" run --gpus 2 -D NOPE=1 examples/allgather.hir >/dev/null 2>&1; [ $? = 2 ] && ok || bad "unknown -D"
# save, then load the saved outputs back as inputs of a copy program
"$cli" run --gpus 4 --check --save "$t" examples/allgather.hir >/dev/null && [ -s "$t/Y.npy" ] && ok || bad "--save"
printf 'param M = 64, N = 8\ninput Y : f32[M / world, N] shard(axis 0)\noutput Z : f32[M, N] replicated\nallgather Z <- Y\nreference {\n  copy Z <- Y\n}\n' > "$t/load.hir"
"$cli" run --gpus 2 --check --load "$t" --save "$t" "$t/load.hir" >/dev/null && cmp -s "$t/Y.npy" "$t/Z.npy" && ok || bad "--load"
"$cli" info >/dev/null && ok || bad "info"
rm -rf "$t"

echo "examples: $pass passed, $fail failed"
[ $fail = 0 ]
