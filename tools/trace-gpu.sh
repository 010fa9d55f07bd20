#!/usr/bin/env bash
# Traces on the GPU machine, one command: build with CUDA; the trace suite
# on the CUDA backend; then at 1 and 2 GPUs (and 4 when there are): the
# AG+GEMM p2p ring and its sequential baseline traced (--trace), their
# summaries, and one picture of both, one above the other, for docs/; and
# what tracing costs: the median time of the same runs without and with
# --trace, and with BASE=<commit> (one from before tracing existed) the
# same runs built from it: the cost of tracing off. Results in OUTDIR:
# cost.md (the table for docs/TRACING.md), *.summary.txt, *.svg, *.json.
# Usage: tools/trace-gpu.sh [OUTDIR]
# Environment: GPUS (default "1 2 4", those present), M K N (the shape,
# default 16384 8192 8192), ITERS (runs timed, default 20), BASE.
set -u
out=${1:-trace-gpu-out}
mkdir -p "$out"
export NCCL_NVLS_ENABLE=0 # never NVLink multicast on shared machines
M=${M:-16384} K=${K:-8192} N=${N:-8192} ITERS=${ITERS:-20}
ngpu=$(nvidia-smi -L | wc -l)
fail=0

make -j"$(nproc)" CUDA=1 build/hirnode > "$out/build.log" 2>&1 || { tail -30 "$out/build.log"; exit 1; }
if echo '#include <CUnit/Basic.h>' | cc -E - >/dev/null 2>&1; then
  make -j"$(nproc)" CUDA=1 build/hn_tests >> "$out/build.log" 2>&1 || { tail -30 "$out/build.log"; exit 1; }
  timeout 300 build/hn_tests --backend cuda --suite trace/trace > "$out/suite-trace-cuda.log" 2>&1 || fail=1
  grep -E "tests  |asserts|Failed|failures" "$out/suite-trace-cuda.log"
else
  echo "trace-gpu: no CUnit here: the trace suite on CUDA runs in tools/gpu-check.sh"
fi

base_cli=
if [ -n "${BASE:-}" ]; then
  rm -rf "$out/base" && mkdir -p "$out/base"
  if git archive "$BASE" | tar -x -C "$out/base" &&
     make -C "$out/base" -j"$(nproc)" CUDA=1 build/hirnode > "$out/base.build.log" 2>&1; then
    base_cli="$out/base/build/hirnode"
  else
    echo "trace-gpu: cannot build BASE=$BASE (see $out/base.build.log)"; fail=1
  fi
fi

median() { grep -o 'median [0-9.]* ms' "$1" 2>/dev/null | awk '{print $2}'; }

{
  echo "Median of $ITERS runs, M=$M K=$K N=$N, $(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)."
  echo "base: ${BASE:-not built} (no tracing code); off: this build, no --trace; on: with --trace."
  echo
  echo "| program | GPUs | base ms | off ms | on ms | on / off |"
  echo "|---|---:|---:|---:|---:|---:|"
} > "$out/cost.md"
for g in ${GPUS:-1 2 4}; do
  [ "$g" -le "$ngpu" ] || continue
  for prog in ag_matmul_p2p ag_matmul_sequential; do
    b="$out/$prog-${g}gpu"
    run() { timeout 300 "$1" run --backend cuda --gpus "$g" -D M="$M" -D K="$K" -D N="$N" --iters "$ITERS" "${@:2}" \
              "examples/$prog.hir"; }
    [ -n "$base_cli" ] && { run "$base_cli" > "$b.base.txt" 2>&1 || fail=1; }
    run build/hirnode > "$b.off.txt" 2>&1 || fail=1
    run build/hirnode --trace "$b.json" > "$b.on.txt" 2>&1 || fail=1
    build/hirnode trace summary "$b.json" > "$b.summary.txt" 2>&1 || fail=1
    off=$(median "$b.off.txt") on=$(median "$b.on.txt") base=$(median "$b.base.txt")
    ratio=$(awk -v a="$on" -v b="$off" 'BEGIN { if (a > 0 && b > 0) printf "%.3f", a / b; else print "-" }')
    echo "| $prog | $g | ${base:--} | ${off:--} | ${on:--} | $ratio |" >> "$out/cost.md"
    grep -E "^overlap|^critical path" "$b.summary.txt" | sed "s|^|$prog at $g GPUs: |"
  done
  build/hirnode trace svg "$out/ag_matmul_p2p-${g}gpu.json" "$out/ag_matmul_sequential-${g}gpu.json" \
    -o "$out/ag_matmul-${g}gpu.svg" > /dev/null || fail=1
done

# where issue is all there is: many small collectives (bench collectives)
g=$((ngpu >= 2 ? 2 : 1))
# (NCCL through the runtime, host clock, 20 calls: what the base's defaults were)
bench() { timeout 300 "$1" bench collectives --backend cuda --gpus "$g" --op allreduce --min 8K --max 1M --via nccl --iters 20 "${@:2}"; }
[ -n "$base_cli" ] && { bench "$base_cli" > "$out/bench.base.txt" 2>&1 || fail=1; }
bench build/hirnode --timing host > "$out/bench.off.txt" 2>&1 || fail=1
bench build/hirnode --timing host --trace "$out/bench.json" > "$out/bench.on.txt" 2>&1 || fail=1
{
  echo
  echo "bench collectives --op allreduce at $g GPUs: size, hirnode us per call off, on (and base when built):"
  paste <(awk '/^ +[0-9]+ /{print $1, $2}' "$out/bench.off.txt") <(awk '/^ +[0-9]+ /{print $2}' "$out/bench.on.txt") \
        <(awk '/^ +[0-9]+ /{print $2}' "$out/bench.base.txt" 2>/dev/null)
} >> "$out/cost.md"
cat "$out/cost.md"
exit $fail
