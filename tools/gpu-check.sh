#!/usr/bin/env bash
# GPU validation, one command for the device machine: build with CUDA, run
# every CUnit suite on the CUDA backend (the concurrent matmuls at
# production sizes among them), every example with --check at 1, 2 and 4
# GPUs (as many as there are), every pipeline example at production sizes
# at 1, 2 and 3 streams (1 vs 3 bit for bit), and compute-sanitizer memcheck
# on one example. CUnit comes from .deps/*.deb when the machine has none
# (`apt-get download libcunit1 libcunit1-dev` into .deps beforehand).
# Usage: tools/gpu-check.sh [OUTDIR]
# PARTS="suites examples prod memcheck ll graphs" (the default: all) picks parts.
# graphs: CUDA graphs (hn_runtime_capture/replay) — the sched/graph suite
# and the strategy stress replayed, every example replayed with --check
# (HIRNODE_GRAPHS=1) at 1 and 2 GPUs, replay against eager bit for bit at
# production sizes, `hirnode bench issue` (replay columns, every replay
# path) and the embedding example on every replay path, into OUTDIR/graphs-*.
# ll: the latency path (via ll) — `hirnode bench collectives` from 8 KiB to
# 16 MiB at 2 GPUs (and 4, 8 where there are), every output checked, into
# OUTDIR/bench-collectives-gN.md, and the same in graphs (--graph, into
# bench-graph-gN.md); one-shot against two-shot; the fused
# allreduce + residual + RMSNorm eager and in graphs (bench-norm-*); memcheck
# of examples/decode_allreduce_ll.hir and decode_layer_ll.hir at 2 GPUs. The
# runtime suites (part suites) run its collectives on CUDA too
# (sched/collectives, "via ll" and allreduce_rmsnorm).
set -u
out=${1:-gpu-check-out}
mkdir -p "$out"
export NCCL_NVLS_ENABLE=0 # never NVLink multicast on shared machines
root=$(pwd)
if ! echo '#include <CUnit/Basic.h>' | cc -E - >/dev/null 2>&1; then
  if ls .deps/*.deb >/dev/null 2>&1; then
    mkdir -p .deps/root
    for f in .deps/*.deb; do dpkg -x "$f" .deps/root; done
    export CPATH="$root/.deps/root/usr/include${CPATH:+:$CPATH}"
    lib=$(dirname "$(find "$root/.deps/root" -name 'libcunit.so*' | head -1)")
    export LIBRARY_PATH="$lib${LIBRARY_PATH:+:$LIBRARY_PATH}"
    export LD_LIBRARY_PATH="$lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  else
    echo "gpu-check: no CUnit headers and no .deps/*.deb" >&2
    exit 2
  fi
fi
{
  date -u
  nvidia-smi --query-gpu=index,name,driver_version,memory.total --format=csv,noheader
  nvcc --version | tail -2
  grep -hE '^#define NCCL_(MAJOR|MINOR|PATCH) ' /usr/include/nccl.h /usr/local/cuda/include/nccl.h 2>/dev/null
} > "$out/machine.txt" 2>&1
cat "$out/machine.txt"

make -j"$(nproc)" CUDA=1 all > "$out/build.log" 2>&1 || { tail -30 "$out/build.log"; exit 1; }
ngpu=$(nvidia-smi -L | wc -l)
fail=0
parts=" ${PARTS:-suites examples prod memcheck ll graphs} "
part() { case "$parts" in *" $1 "*) return 0 ;; *) return 1 ;; esac; }
export HIRNODE_TIMEOUT=${HIRNODE_TIMEOUT:-30}
if part suites; then
  timeout "${SUITE_TIMEOUT:-400}" build/hn_tests --backend cuda > "$out/suites-cuda.log" 2>&1 || fail=1
  grep -E "hn_tests:|tests  |asserts|Failed|failures|elements differ" "$out/suites-cuda.log"
fi
pass=0 bad=0
part examples && for g in 1 2 4 8; do
  [ "$g" -le "$ngpu" ] || continue
  for f in examples/*.hir; do
    echo "== $f at $g GPUs" >> "$out/examples.log"
    if timeout 60 build/hirnode run --backend cuda --gpus "$g" --check --iters 3 "$f" >> "$out/examples.log" 2>&1; then
      pass=$((pass + 1))
    else
      bad=$((bad + 1)); echo "FAIL: $f at $g GPUs"; fail=1
    fi
  done
done
echo "examples on cuda: $pass passed, $bad failed"

# Production sizes: libraries pick other kernels there (a shared cuBLASLt
# workspace corrupted concurrent matmuls only at these sizes). Every
# pipeline example in bf16 (the f32 ones are run as bf16 copies), M, K, N
# from 8192 to 32768, --check at 1, 2 and 3 streams, and the outputs of 1
# and 3 streams compared bit for bit. PROD_GPUS: the GPU counts (default:
# 1 and 2, as many as there are).
prod_dir=${PROD_DIR:-$(mktemp -d)} # outputs of GiBs: outside OUTDIR
mkdir -p "$prod_dir"
ppass=0 pbad=0
prod() { # name file gpus -D...
  local name=$1 file=$2 g=$3; shift 3
  for s in 1 2 3; do
    local dir="$prod_dir/$name-g$g-s$s"
    mkdir -p "$dir"
    echo "== $name at $g GPUs, $s streams: $*" >> "$out/prod.log"
    if timeout 300 build/hirnode run --backend cuda --gpus "$g" --streams "$s" --check --iters 3 \
         --save "$dir" "$@" "$file" >> "$out/prod.log" 2>&1; then
      ppass=$((ppass + 1))
    else
      pbad=$((pbad + 1)); fail=1; echo "FAIL: $name at $g GPUs, $s streams"
    fi
  done
  for f in "$prod_dir/$name-g$g-s1"/*.npy; do
    if cmp -s "$f" "$prod_dir/$name-g$g-s3/$(basename "$f")"; then
      ppass=$((ppass + 1)); echo "bit-identical, 1 vs 3 streams: $name at $g GPUs, $(basename "$f")" >> "$out/prod.log"
    else
      pbad=$((pbad + 1)); fail=1; echo "FAIL: $name at $g GPUs: $(basename "$f") differs between 1 and 3 streams"
    fi
  done
  rm -rf "$prod_dir/$name-g$g-s1" "$prod_dir/$name-g$g-s2" "$prod_dir/$name-g$g-s3" # GiBs each
}
bf16() { sed 's/\bf32\b/bf16/g' "examples/$1.hir" > "$prod_dir/$1.hir"; echo "$prod_dir/$1.hir"; }
part prod && for g in ${PROD_GPUS:-1 2}; do
  [ "$g" -le "$ngpu" ] || continue
  prod chunked examples/chunked_matmul.hir "$g" -D S=2 -D M=16384 -D K=16384 -D N=8192
  prod ag_p2p_32k examples/ag_matmul_p2p.hir "$g" -D M=32768 -D K=16384 -D N=8192
  prod ag_p2p_16k examples/ag_matmul_p2p.hir "$g" -D M=16384 -D K=8192 -D N=8192
  prod ag_collective "$(bf16 ag_matmul_collective)" "$g" -D S=4 -D M=32768 -D K=16384 -D N=8192
  prod matmul_ar "$(bf16 matmul_allreduce)" "$g" -D S=4 -D M=16384 -D K=16384 -D N=8192
  prod matmul_rs "$(bf16 matmul_reduce_scatter)" "$g" -D M=16384 -D K=16384 -D N=8192
  prod ag_linear_auto examples/ag_linear_bf16.hir "$g" -D M=16384 -D K=8192 -D N=8192
  prod tp_mlp "$(bf16 tp_mlp)" "$g" -D L=2 -D M=16384 -D D=8192 -D F=16384
done
grep -E "^(run|check) |left at the poison|MISMATCH" "$out/prod.log" | sed 's/^/  /' > "$out/prod-summary.txt"
echo "production sizes on cuda: $ppass passed, $pbad failed (details: $out/prod.log)"
if part memcheck && command -v compute-sanitizer >/dev/null; then
  # the p2p ring with every API error reported; the pipelines that make an
  # NCCL communicator without API errors: ncclCommInitRankConfig probes its
  # own kernels with cudaFuncGetAttributes and meets "no kernel image" for
  # architectures it was not built for (4 reports, NCCL's, not memory errors)
  timeout 120 compute-sanitizer --tool memcheck --error-exitcode 3 \
    build/hirnode run --backend cuda --gpus 1 --check examples/ag_matmul_p2p.hir > "$out/memcheck.log" 2>&1; rc=$?
  [ $rc = 0 ] || fail=1
  echo "compute-sanitizer memcheck ag_matmul_p2p: exit $rc ($(grep -c 'ERROR SUMMARY: 0 errors' "$out/memcheck.log") clean summaries)"
  for f in ag_linear_bf16 tp_mlp; do
    timeout 120 compute-sanitizer --tool memcheck --report-api-errors no --error-exitcode 3 \
      build/hirnode run --backend cuda --gpus 1 --check "examples/$f.hir" > "$out/memcheck-$f.log" 2>&1; rc=$?
    [ $rc = 0 ] || fail=1
    echo "compute-sanitizer memcheck $f (NCCL's API probes not reported): exit $rc ($(grep -c 'ERROR SUMMARY: 0 errors' "$out/memcheck-$f.log") clean summaries)"
  done
fi
if part ll; then
  bench_ll() { # NAME OPTIONS...: bench collectives at $g GPUs into bench-NAME-gG.md; #wrong fails it
    local name=$1; shift
    if timeout 900 build/hirnode bench collectives --backend cuda --gpus "$g" --min 8K "$@" --markdown \
         > "$out/bench-$name-g$g.md" 2>&1; then
      echo "bench collectives $name at $g GPUs: ok ($out/bench-$name-g$g.md)"
    else
      fail=1; echo "FAIL: bench collectives $name at $g GPUs (see $out/bench-$name-g$g.md)"
    fi
  }
  for g in 2 4 8; do
    [ "$g" -le "$ngpu" ] || continue
    # every communicator and auto beside raw NCCL, device time; #wrong fails it
    if timeout 900 build/hirnode bench collectives --backend cuda --gpus "$g" --min 8K --max 16M --markdown \
         > "$out/bench-collectives-g$g.md" 2>&1; then
      echo "bench collectives at $g GPUs: ok ($out/bench-collectives-g$g.md)"
    else
      fail=1; echo "FAIL: bench collectives at $g GPUs (see $out/bench-collectives-g$g.md)"
    fi
    if timeout 600 build/hirnode bench collectives --backend cuda --gpus "$g" --op allreduce --min 8K --max 16M \
         --via "ll oneshot,ll twoshot" --markdown > "$out/bench-ll-algos-g$g.md" 2>&1; then
      echo "one-shot against two-shot at $g GPUs: ok ($out/bench-ll-algos-g$g.md)"
    else
      fail=1; echo "FAIL: one-shot against two-shot at $g GPUs"
    fi
    # in graphs: 50 calls captured, replayed; raw NCCL captured the same way
    bench_ll graph --graph --max 16M
    bench_ll ll-algos-graph --graph --op allreduce --via "ll oneshot,ll twoshot,nccl" --max 16M
    bench_ll norm --op allreduce_rmsnorm --max 2M
    bench_ll norm-graph --graph --op allreduce_rmsnorm --via "ll,nccl" --max 2M
  done
  if [ "$ngpu" -ge 2 ] && command -v compute-sanitizer >/dev/null; then
    timeout 300 compute-sanitizer --tool memcheck --error-exitcode 3 \
      build/hirnode run --backend cuda --gpus 2 --check examples/decode_allreduce_ll.hir > "$out/memcheck-ll.log" 2>&1
    rc=$?; [ $rc = 0 ] || fail=1
    echo "compute-sanitizer memcheck of the latency path at 2 GPUs: exit $rc"
    timeout 300 compute-sanitizer --tool memcheck --error-exitcode 3 \
      build/hirnode run --backend cuda --gpus 2 --check examples/decode_layer_ll.hir > "$out/memcheck-norm.log" 2>&1
    rc=$?; [ $rc = 0 ] || fail=1
    echo "compute-sanitizer memcheck of the fused norm at 2 GPUs: exit $rc"
  fi
fi
if part graphs; then
  timeout 300 build/hn_tests --backend cuda --suite sched/graph > "$out/graphs-suite.log" 2>&1 || fail=1
  grep -E "tests  |asserts" "$out/graphs-suite.log"
  HN_STRESS_GRAPH_RUNS=${GRAPH_STRESS_RUNS:-300} timeout 300 build/hn_tests --backend cuda --suite tools/stress \
    > "$out/graphs-stress.log" 2>&1 || fail=1
  grep -E "stress:" "$out/graphs-stress.log"
  gpass=0 gbad=0
  for g in 1 2; do
    [ "$g" -le "$ngpu" ] || continue
    for f in examples/*.hir; do
      echo "== $f at $g GPUs, replayed" >> "$out/graphs-examples.log"
      if HIRNODE_GRAPHS=1 timeout 60 build/hirnode run --backend cuda --gpus "$g" --check --iters 4 "$f" \
           >> "$out/graphs-examples.log" 2>&1; then gpass=$((gpass + 1)); else gbad=$((gbad + 1)); fail=1; echo "FAIL: $f replayed at $g GPUs"; fi
    done
  done
  echo "examples replayed (HIRNODE_GRAPHS=1) with --check: $gpass passed, $gbad failed"
  # replay against eager, bit for bit, at production sizes (the last of 3 runs: a replay)
  g=$((ngpu >= 2 ? 2 : 1))
  gcmp() { # name file -D...
    local name=$1 file=$2; shift 2
    for gr in 0 1; do
      rm -rf "$prod_dir/g$gr" && mkdir -p "$prod_dir/g$gr"
      HIRNODE_GRAPHS=$gr timeout 300 build/hirnode run --backend cuda --gpus "$g" --iters 3 --save "$prod_dir/g$gr" \
        "$@" "$file" >> "$out/graphs-prod.log" 2>&1 || { fail=1; echo "FAIL: $name with HIRNODE_GRAPHS=$gr"; }
    done
    for f in "$prod_dir/g0"/*.npy; do
      if cmp -s "$f" "$prod_dir/g1/$(basename "$f")"; then echo "bit-identical, replay vs eager: $name at $g GPUs, $(basename "$f")"
      else fail=1; echo "FAIL: $name at $g GPUs: $(basename "$f") differs between replay and eager"; fi
    done
    rm -rf "$prod_dir/g0" "$prod_dir/g1"
  }
  gcmp ag_p2p_16k examples/ag_matmul_p2p.hir -D M=16384 -D K=8192 -D N=8192
  gcmp tp_mlp "$(bf16 tp_mlp)" -D L=2 -D M=16384 -D D=8192 -D F=16384
  gcmp matmul_rs "$(bf16 matmul_reduce_scatter)" -D M=16384 -D K=16384 -D N=8192
  gcmp decode_ll examples/decode_allreduce_ll.hir
  gcmp decode_layer examples/decode_layer_ll.hir
  for g in 1 2 8; do
    [ "$g" -le "$ngpu" ] || continue
    timeout 300 build/hirnode bench issue --backend cuda --gpus "$g" --n 1000 --reps 20 --replay all --markdown \
      > "$out/graphs-bench-issue-g$g.md" 2>&1 || fail=1
    tail -3 "$out/graphs-bench-issue-g$g.md"
  done
  if make -s install PREFIX="$prod_dir/prefix" > /dev/null 2>&1 &&
     cc -O2 examples/embed/serve.c $(PKG_CONFIG_PATH="$prod_dir/prefix/lib/pkgconfig" pkg-config --cflags --libs hirnode) \
       -lm -o "$prod_dir/serve"; then
    for g in 1 2 8; do
      [ "$g" -le "$ngpu" ] || continue
      for path in bells jobs caller; do
        echo "== HIRNODE_REPLAY=$path" >> "$out/graphs-serve-g$g.txt"
        HIRNODE_REPLAY=$path HIRNODE_BACKEND=cuda LD_LIBRARY_PATH="$prod_dir/prefix/lib" timeout 120 \
          "$prod_dir/serve" 10000 "$g" >> "$out/graphs-serve-g$g.txt" 2>&1 || fail=1
      done
      cat "$out/graphs-serve-g$g.txt"
    done
  else
    fail=1; echo "FAIL: the embedding example did not build"
  fi
fi
exit $fail
