#!/usr/bin/env bash
# The GPU gate: one command on a GPU machine that builds hirnode with CUDA
# and runs its checks on the CUDA backend, each under a wall-clock bound.
#
# Usage: [PARTS="..."] [GPUS="..."] tools/gpu-check.sh [OUTDIR]
#
# Every step runs under `timeout -k 5 LIMIT`; a step that outlives its limit
# is a failure reported as "HANG: <step> after N s", any other failure as
# "FAIL: <step>" (with the end of its log). A line per part is printed as it
# finishes; the last line is always `gpu-check: N passed, N failed`, and the
# exit status is 0 only when nothing failed. OUTDIR (default gpu-check-out)
# gets machine.txt, logs/NNN-<step>.log (one per step), summary.txt (each
# step with pass/FAIL/HANG, its seconds and its log) and the tables below.
#
# GPU counts: 1, 2, 4 and 8, as many as `nvidia-smi -L` lists; GPUS="2 4"
# picks others. NCCL_NVLS_ENABLE=0 always; HIRNODE_TIMEOUT defaults to 30.
# CUnit comes from .deps/*.deb when the machine has none (`apt-get download
# libcunit1 libcunit1-dev` into .deps beforehand). The build is one
# `make -j"$(nproc)" CUDA=1 all`.
#
# PARTS (default: every part but bench; bench too at 2 GPUs or more). They
# run in this order whatever the order of PARTS:
#   repro     thread-mode cases that once hung, each REPRO_RUNS times
#             (default 20): `hirnode bench collectives --gpus 2 --graph --op
#             allreduce --via "ll oneshot,nccl"` at 8 KiB,
#             `hn_tests --suite runtime/runtime,runtime/graph`, and at each
#             GPU count from 2 examples/allgather_p2p.hir (send/recv `via p2p
#             get`) replayed 19 times (HIRNODE_GRAPHS=1 --iters 20); then
#             perf/p2p_pull_graph (a replayed pull from a peer without
#             hirnode), pull and push, copy engine and SM kernel, once each.
#   suites    every CUnit suite on CUDA (`hn_tests --backend cuda`; the
#             concurrent matmuls at production sizes, the collectives and
#             `via ll` among them).
#   examples  every examples/*.hir with --check at each GPU count, eager
#             (--iters 2) and replayed in CUDA graphs (HIRNODE_GRAPHS=1,
#             --iters 6: runs 2 to 6 are replays).
#   prod      production sizes: every pipeline example in bf16, M, K, N
#             from 8192 to 32768, --check at PROD_STREAMS streams (default
#             "1 3") and at PROD_GPUS GPUs (default: the counts of GPUS up
#             to 2), the outputs of 1 and 3 streams compared bit for bit;
#             outputs (GiBs) under PROD_DIR (default: a temporary folder),
#             the run and check lines in prod-summary.txt.
#   memcheck  compute-sanitizer memcheck at 1 GPU: ag_matmul_p2p with every
#             API error reported, ag_linear_bf16 and tp_mlp without them
#             (NCCL probes kernels it was not built for).
#   ll        the latency path at each GPU count from 2: `bench collectives`
#             (every op and communicator, 8 KiB-16 MiB), one-shot against
#             two-shot, the same in graphs (--graph), the fused allreduce +
#             residual + RMSNorm eager and in graphs; every output checked,
#             tables in ll-*-gG.md (LL_BENCH_OPTS, default "--reps 3",
#             is added to each); memcheck of decode_allreduce_ll.hir and
#             decode_layer_ll.hir at 2 GPUs.
#   graphs    the runtime/graph suite, the strategy stress replayed
#             (GRAPH_STRESS_RUNS, default 300), replay against eager bit for
#             bit at production sizes (at 2 GPUs, else 1), `bench issue`
#             (every replay path) at 1, 2 and 8 GPUs into
#             graphs-bench-issue-gG.md, the embedding example
#             (examples/embed/serve.c, built against `make install`) on
#             every replay path.
#   procs     process mode on CUDA: every example with --check at --procs 2
#             and --procs 4 (where there are that many GPUs), and at --procs
#             2 again with collectives without `via` on NCCL
#             (HIRNODE_DEFAULT_VIA=nccl), eager and replayed; where torch is
#             installed, examples/python/tp_decode.py under torchrun on 2
#             GPUs (torch tensors bound as they are; in torch.cuda.graph via
#             ll, nccl and p2p, and eagerly via ll and p2p — the tensors
#             registered for p2p, also from expandable segments;
#             python/tests/torchrun_graph_p2p.py, every replay checked;
#             `--via p2p --no-register` refused with the tensor and the
#             statement named), its tables in tp-decode-*.md; `--fault
#             1:25:kill` at --procs 2 must exit non-zero within its limit
#             with rank 1's death named by rank 0, and leave no compute
#             process on the GPUs (nvidia-smi).
#   nodes     worlds across nodes, NCCL forced onto its socket transport
#             (NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1 NCCL_SOCKET_IFNAME=lo):
#             every example with --check at --nodes 2 --procs 1 (2 GPUs)
#             and --nodes 2 --procs 2 (4 GPUs), those asking `via p2p` or
#             `via ll` of a team across nodes refused with "cannot cross
#             nodes"; a rank of node 1 killed mid-run named by rank 0;
#             `bench collectives` across the nodes beside the same on one
#             process (raw NCCL, the same transport), nodes-gG.md.
#   bench     tables for the docs at each GPU count from 2: `bench
#             collectives` through ll, nccl and p2p beside raw NCCL, 8 KiB to
#             256 MiB, eager and --graph (bench-collectives[-graph]-gG.md);
#             `bench overlap --op all` in threads (--gpus G) and in processes
#             (--procs G) (bench-overlap[-procs]-gG.md).
#
# Splitting the gate into shorter calls: e.g. PARTS="repro suites examples",
# then PARTS="prod memcheck ll graphs procs", then PARTS=bench, each into its
# own OUTDIR.
# shellcheck disable=SC2317 # functions run by trap or through bash -c
set -u
out=${1:-gpu-check-out}
rm -rf "$out/logs" # the logs of an earlier run into the same OUTDIR
mkdir -p "$out/logs" || exit 2
export NCCL_NVLS_ENABLE=0 # never NVLink multicast on shared machines
export HIRNODE_TIMEOUT=${HIRNODE_TIMEOUT:-30}
[ -d /usr/local/cuda/bin ] && PATH=$PATH:/usr/local/cuda/bin
root=$(pwd)
summary=$out/summary.txt
: >"$summary"

npass=0 nfail=0 nstep=0 # every step
ppass=0 pfail=0         # the part's
part_name='' part_t0=0
cur_pid='' cur_name='' cur_t0=0 last_log=''
t_start=$SECONDS

# record VERDICT SECONDS NAME LOG [MESSAGE]: a line of summary.txt and the
# counts; a failure is printed with the end of its log.
record() {
  local v=$1 s=$2 name=$3 log=$4 msg=${5:-}
  printf '%-4s %5d s  %s  (%s)\n' "$v" "$s" "$name" "${log#"$out"/}" >>"$summary"
  if [ "$v" = pass ]; then
    npass=$((npass + 1)) ppass=$((ppass + 1))
    return 0
  fi
  nfail=$((nfail + 1)) pfail=$((pfail + 1))
  if [ -n "$msg" ]; then echo "$msg"
  elif [ "$v" = HANG ]; then echo "HANG: $name after $s s (log: $log)"
  else echo "FAIL: $name (log: $log)"
  fi
  [ -f "$log" ] && grep -v '^# ' "$log" | tail -n 3 | cut -c1-200 | sed 's/^/    /'
  return 0
}

# new_log NAME: the path of the next step's log (logs/NNN-<name>.log)
new_log() {
  local slug
  nstep=$((nstep + 1))
  slug=$(printf '%s' "$1" | tr -cs 'A-Za-z0-9._=-' '_' | cut -c1-80)
  last_log=$out/logs/$(printf '%03d' "$nstep")-$slug.log
}

# fail_now NAME MESSAGE: a failed step that runs nothing (a bad setting, a
# missing tool)
fail_now() {
  new_log "$1"
  echo "$2" >"$last_log"
  record FAIL 0 "$1" "$last_log" "FAIL: $1: $2"
}

# run_step EXPECT STDOUT NAME LIMIT CMD...: CMD under `timeout -k 5 LIMIT`,
# its output in a log of its own (its stdout into the file STDOUT instead,
# unless STDOUT is -). EXPECT ok: it passes on exit 0; fail: on an exit
# other than 0. Exit 124 or 137 (the limit's TERM, then KILL) is a HANG
# either way. Returns 0 when it passed.
run_step() {
  local expect=$1 to=$2 name=$3 limit=$4 rc v s
  shift 4
  new_log "$name"
  {
    echo "# $name (limit $limit s, expected to ${expect/ok/pass})"
    printf '#'
    printf ' %q' "$@"
    echo
  } >"$last_log"
  cur_name=$name cur_t0=$SECONDS
  if [ "$to" = - ]; then
    timeout -k 5 "$limit" "$@" >>"$last_log" 2>&1 &
  else
    timeout -k 5 "$limit" "$@" >"$to" 2>>"$last_log" &
  fi
  cur_pid=$!
  wait "$cur_pid" 2>/dev/null # (bash would name a job the limit killed)
  rc=$?
  cur_pid=''
  s=$((SECONDS - cur_t0))
  echo "# exit $rc after $s s" >>"$last_log"
  case $rc in
    124 | 137) v=HANG ;;
    0) if [ "$expect" = ok ]; then v=pass; else v=FAIL; fi ;;
    *) if [ "$expect" = fail ]; then v=pass; else v=FAIL; fi ;;
  esac
  if [ "$v" = HANG ]; then # what the hang left on the GPUs, for its log
    timeout -k 5 30 nvidia-smi --query-compute-apps=pid,process_name,used_memory --format=csv,noheader \
      >>"$last_log" 2>&1
  fi
  record "$v" "$s" "$name" "$last_log"
  [ "$v" = pass ]
}
step() { run_step ok - "$@"; }                    # NAME LIMIT CMD...
step_to() { local f=$1; shift; run_step ok "$f" "$@"; } # FILE NAME LIMIT CMD...
step_fails() { run_step fail - "$@"; }            # NAME LIMIT CMD...: must exit non-zero

finish() {
  echo "gpu-check: $npass passed, $nfail failed ($((SECONDS - t_start)) s)" >>"$summary"
  echo "gpu-check: $npass passed, $nfail failed"
  [ "$nfail" = 0 ] && exit 0
  exit 1
}

# Interrupted (the caller's own limit): the running step ends, is counted
# as failed, and the last line is still the count.
on_signal() {
  trap - INT TERM
  if [ -n "$cur_pid" ]; then
    kill -TERM "$cur_pid" 2>/dev/null
    wait "$cur_pid" 2>/dev/null
    cur_pid=''
    record FAIL $((SECONDS - cur_t0)) "$cur_name (interrupted)" "$last_log" \
      "INTERRUPTED: $cur_name after $((SECONDS - cur_t0)) s"
  fi
  finish
}
trap on_signal INT TERM

part_begin() { part_name=$1 ppass=0 pfail=0 part_t0=$SECONDS; }
part_end() { echo "== $part_name: $((ppass + pfail)) steps, $pfail failed, $((SECONDS - part_t0)) s"; }

# ---- CUnit, the machine, the build ----
if ! echo '#include <CUnit/Basic.h>' | cc -E - >/dev/null 2>&1; then
  if ls .deps/*.deb >/dev/null 2>&1; then
    mkdir -p .deps/root
    for f in .deps/*.deb; do dpkg -x "$f" .deps/root; done
    export CPATH="$root/.deps/root/usr/include${CPATH:+:$CPATH}"
    lib=$(dirname "$(find "$root/.deps/root" -name 'libcunit.so*' | head -1)")
    export LIBRARY_PATH="$lib${LIBRARY_PATH:+:$LIBRARY_PATH}"
    export LD_LIBRARY_PATH="$lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  else
    fail_now cunit "no CUnit headers and no .deps/*.deb"
    finish
  fi
fi

part_begin setup
machine() {
  date -u
  nvidia-smi --query-gpu=index,name,driver_version,memory.total --format=csv,noheader || return 1
  nvcc --version | tail -2
  grep -hE '^#define NCCL_(MAJOR|MINOR|PATCH) ' /usr/include/nccl.h /usr/local/cuda/include/nccl.h 2>/dev/null
  echo "$(nproc) cores"
  return 0
}
if step machine 60 bash -c "$(declare -f machine); machine"; then
  grep -v '^# ' "$last_log" >"$out/machine.txt"
  cat "$out/machine.txt"
fi
ngpu=$(timeout -k 5 30 nvidia-smi -L 2>/dev/null | grep -c '^GPU ')
if [ "$ngpu" -lt 1 ]; then
  fail_now gpus "nvidia-smi -L lists no GPU"
  part_end
  finish
fi
if ! step build "${BUILD_TIMEOUT:-900}" make -j"$(nproc)" CUDA=1 all; then
  grep -v '^# ' "$last_log" | tail -n 20
  part_end
  finish
fi

# the GPU counts: GPUS, else 1, 2, 4, 8 as many as there are
sel=''
for g in ${GPUS:-1 2 4 8}; do
  case $g in
    '' | *[!0-9]* | 0*) fail_now "GPUS $g" "not a GPU count" ;;
    *) if [ "$g" -le "$ngpu" ]; then sel="$sel $g"
       elif [ -n "${GPUS:-}" ]; then fail_now "GPUS $g" "the machine has $ngpu GPUs"
       fi ;;
  esac
done
# gpus_in LIST: the counts of $sel also in LIST
gpus_in() {
  local g w r=''
  for g in $sel; do for w in $1; do [ "$g" = "$w" ] && r="$r $g"; done; done
  echo "$r"
}
gpus_from() { # N: the counts of $sel from N on
  local g r=''
  for g in $sel; do [ "$g" -ge "$1" ] && r="$r $g"; done
  echo "$r"
}

all_parts="repro suites examples prod memcheck ll graphs procs nodes bench"
if [ -n "${PARTS:-}" ]; then
  parts=" $PARTS "
  for p in $PARTS; do
    case " $all_parts " in *" $p "*) ;; *) fail_now "PARTS $p" "no such part (parts: $all_parts)" ;; esac
  done
else
  parts=" repro suites examples prod memcheck ll graphs procs nodes "
  [ "$ngpu" -ge 2 ] && parts="$parts bench "
fi
part() { case "$parts" in *" $1 "*) return 0 ;; *) return 1 ;; esac; }
echo "machine: $ngpu GPUs; GPU counts:$sel; parts:$(for p in $all_parts; do part "$p" && printf ' %s' "$p"; done)"
part_end

san=$(command -v compute-sanitizer)
prod_dir=${PROD_DIR:-}
if [ -z "$prod_dir" ]; then
  prod_dir=$(mktemp -d) # outputs of GiBs: outside OUTDIR
  trap 'rm -rf "$prod_dir"' EXIT
fi
mkdir -p "$prod_dir"
bf16() { sed 's/\bf32\b/bf16/g' "examples/$1.hir" >"$prod_dir/$1.hir"; echo "$prod_dir/$1.hir"; }
# same NAME A B: every .npy of folder A equal byte for byte to B's, a step each
same() {
  local name=$1 a=$2 b=$3 f n=0
  for f in "$a"/*.npy; do
    [ -e "$f" ] || continue
    n=$((n + 1))
    step "$name: $(basename "$f")" 120 cmp "$f" "$b/$(basename "$f")"
  done
  [ "$n" -gt 0 ] || fail_now "$name" "no outputs saved in $a"
}
hirnode=build/hirnode

# ---- repro: the thread-mode hangs ----
if part repro; then
  part_begin repro
  runs=${REPRO_RUNS:-20}
  if [ "$ngpu" -ge 2 ]; then
    for i in $(seq 1 "$runs"); do
      step "repro bench collectives --graph ll oneshot,nccl 8K g2 run $i/$runs" 60 \
        "$hirnode" bench collectives --backend cuda --gpus 2 --graph --op allreduce --via "ll oneshot,nccl" \
        --min 8K --max 8K --reps 3
    done
  else
    echo "repro: bench collectives --graph needs 2 GPUs: not run"
  fi
  for i in $(seq 1 "$runs"); do
    step "repro hn_tests runtime/runtime,runtime/graph run $i/$runs" 240 \
      build/hn_tests --backend cuda --suite runtime/runtime,runtime/graph
  done
  for g in $sel; do
    [ "$g" -ge 2 ] || continue
    for i in $(seq 1 "$runs"); do
      step "repro allgather_p2p.hir replayed g$g run $i/$runs" 60 \
        env HIRNODE_GRAPHS=1 "$hirnode" run --backend cuda --gpus "$g" --check --iters 20 examples/allgather_p2p.hir
    done
  done
  if [ "$ngpu" -ge 2 ] && step "repro build p2p_pull_graph" 300 make CUDA=1 build/p2p_pull_graph; then
    for how in "pull ce" "pull kernel" "push ce" "push kernel"; do
      # shellcheck disable=SC2086 # two words: the protocol and the copier
      step "repro p2p_pull_graph $how" 60 build/p2p_pull_graph $how 2000 4
    done
  fi
  part_end
fi

# ---- suites ----
if part suites; then
  part_begin suites
  step "suites hn_tests --backend cuda" "${SUITE_TIMEOUT:-400}" build/hn_tests --backend cuda
  grep -E '^ +(tests|asserts) ' "$last_log"
  part_end
fi

# ---- examples: eager and replayed, every GPU count ----
if part examples; then
  part_begin examples
  for g in $sel; do
    for f in examples/*.hir; do
      step "examples g$g eager $(basename "$f")" 60 "$hirnode" run --backend cuda --gpus "$g" --check --iters 2 "$f"
      step "examples g$g graphs $(basename "$f")" 60 \
        env HIRNODE_GRAPHS=1 "$hirnode" run --backend cuda --gpus "$g" --check --iters 6 "$f"
    done
  done
  part_end
fi

# ---- prod: production sizes, 1 vs 3 streams bit for bit ----
# Libraries pick other kernels there (a shared cuBLASLt workspace corrupted
# concurrent matmuls only at these sizes).
prod() { # NAME FILE GPUS -D...
  local name=$1 file=$2 g=$3 s dir save
  shift 3
  for s in ${PROD_STREAMS:-1 3}; do
    dir="$prod_dir/$name-g$g-s$s"
    save=()
    if [ "$s" = 1 ] || [ "$s" = 3 ]; then rm -rf "$dir"; mkdir -p "$dir"; save=(--save "$dir"); fi
    step "prod $name g$g s$s" 300 "$hirnode" run --backend cuda --gpus "$g" --streams "$s" --check --iters 2 \
      ${save[@]+"${save[@]}"} "$@" "$file"
  done
  if [ -d "$prod_dir/$name-g$g-s1" ] && [ -d "$prod_dir/$name-g$g-s3" ]; then
    same "prod $name g$g 1 vs 3 streams" "$prod_dir/$name-g$g-s1" "$prod_dir/$name-g$g-s3"
  fi
  rm -rf "$prod_dir/$name-g$g-s"* # GiBs each
}
if part prod; then
  part_begin prod
  pg=${PROD_GPUS:-$(gpus_in "1 2")}
  for g in $pg; do
    prod chunked examples/chunked_matmul.hir "$g" -D S=2 -D M=16384 -D K=16384 -D N=8192
    prod ag_p2p_32k examples/ag_matmul_p2p.hir "$g" -D M=32768 -D K=16384 -D N=8192
    prod ag_p2p_16k examples/ag_matmul_p2p.hir "$g" -D M=16384 -D K=8192 -D N=8192
    prod ag_collective "$(bf16 ag_matmul_collective)" "$g" -D S=4 -D M=32768 -D K=16384 -D N=8192
    prod matmul_ar "$(bf16 matmul_allreduce)" "$g" -D S=4 -D M=16384 -D K=16384 -D N=8192
    prod matmul_rs "$(bf16 matmul_reduce_scatter)" "$g" -D M=16384 -D K=16384 -D N=8192
    prod ag_linear_auto examples/ag_linear_bf16.hir "$g" -D M=16384 -D K=8192 -D N=8192
    prod tp_mlp "$(bf16 tp_mlp)" "$g" -D L=2 -D M=16384 -D D=8192 -D F=16384
  done
  cat /dev/null "$out"/logs/*-prod_*.log | grep -E "^(run|check) |left at the poison|MISMATCH" |
    sed 's/^/  /' >"$out/prod-summary.txt"
  part_end
fi

# ---- memcheck ----
if part memcheck; then
  part_begin memcheck
  if [ -n "$san" ]; then
    # the p2p ring with every API error reported; the pipelines that make an
    # NCCL communicator without API errors: ncclCommInitRankConfig probes its
    # own kernels with cudaFuncGetAttributes and meets "no kernel image" for
    # architectures it was not built for (4 reports, NCCL's, not memory errors)
    step "memcheck ag_matmul_p2p g1" 300 "$san" --tool memcheck --error-exitcode 3 \
      "$hirnode" run --backend cuda --gpus 1 --check examples/ag_matmul_p2p.hir
    for f in ag_linear_bf16 tp_mlp; do
      step "memcheck $f g1 (NCCL's API probes not reported)" 300 \
        "$san" --tool memcheck --report-api-errors no --error-exitcode 3 \
        "$hirnode" run --backend cuda --gpus 1 --check "examples/$f.hir"
    done
  else
    fail_now "memcheck" "no compute-sanitizer"
  fi
  part_end
fi

# ---- ll: the latency path ----
if part ll; then
  part_begin ll
  read -r -a ll_opts <<<"${LL_BENCH_OPTS-"--reps 3"}"
  bench_ll() { # NAME WHAT OPTIONS...: bench collectives at $g GPUs into ll-NAME-gG.md; #wrong fails it
    local name=$1 what=$2
    shift 2
    step_to "$out/ll-$name-g$g.md" "ll g$g bench collectives $what" 600 \
      "$hirnode" bench collectives --backend cuda --gpus "$g" --min 8K "$@" ${ll_opts[@]+"${ll_opts[@]}"} --markdown
  }
  for g in $(gpus_from 2); do
    bench_ll collectives "every op and communicator" --max 16M
    bench_ll algos "one-shot against two-shot" --op allreduce --via "ll oneshot,ll twoshot" --max 16M
    # in graphs: the calls captured, replayed; raw NCCL captured the same way
    bench_ll graph "in graphs" --graph --max 16M
    bench_ll algos-graph "one-shot, two-shot, nccl in graphs" --graph --op allreduce \
      --via "ll oneshot,ll twoshot,nccl" --max 16M
    bench_ll norm "allreduce_rmsnorm" --op allreduce_rmsnorm --max 2M
    bench_ll norm-graph "allreduce_rmsnorm in graphs" --graph --op allreduce_rmsnorm --via "ll,nccl" --max 2M
  done
  if [ "$ngpu" -ge 2 ]; then
    if [ -n "$san" ]; then
      for f in decode_allreduce_ll decode_layer_ll; do
        step "ll memcheck $f g2" 300 "$san" --tool memcheck --error-exitcode 3 \
          "$hirnode" run --backend cuda --gpus 2 --check "examples/$f.hir"
      done
    else
      fail_now "ll memcheck" "no compute-sanitizer"
    fi
  else
    echo "ll: needs 2 GPUs: not run"
  fi
  part_end
fi

# ---- graphs ----
if part graphs; then
  part_begin graphs
  step "graphs hn_tests runtime/graph" 300 build/hn_tests --backend cuda --suite runtime/graph
  step "graphs strategy stress replayed" 300 env HN_STRESS_GRAPH_RUNS="${GRAPH_STRESS_RUNS:-300}" \
    build/hn_tests --backend cuda --suite tools/stress
  grep -E "stress:" "$last_log"
  # replay against eager, bit for bit, at production sizes (the last of 3 runs: a replay)
  g=$((ngpu >= 2 ? 2 : 1))
  gcmp() { # NAME FILE -D...
    local name=$1 file=$2 gr
    shift 2
    for gr in 0 1; do
      rm -rf "$prod_dir/g$gr" && mkdir -p "$prod_dir/g$gr"
      step "graphs $name g$g HIRNODE_GRAPHS=$gr" 300 env HIRNODE_GRAPHS=$gr \
        "$hirnode" run --backend cuda --gpus "$g" --iters 3 --save "$prod_dir/g$gr" "$@" "$file"
    done
    same "graphs $name g$g replay vs eager" "$prod_dir/g0" "$prod_dir/g1"
    rm -rf "$prod_dir/g0" "$prod_dir/g1"
  }
  gcmp ag_p2p_16k examples/ag_matmul_p2p.hir -D M=16384 -D K=8192 -D N=8192
  gcmp tp_mlp "$(bf16 tp_mlp)" -D L=2 -D M=16384 -D D=8192 -D F=16384
  gcmp matmul_rs "$(bf16 matmul_reduce_scatter)" -D M=16384 -D K=16384 -D N=8192
  gcmp decode_ll examples/decode_allreduce_ll.hir
  gcmp decode_layer examples/decode_layer_ll.hir
  for g in $(gpus_in "1 2 8"); do
    step_to "$out/graphs-bench-issue-g$g.md" "graphs g$g bench issue --replay all" 300 \
      "$hirnode" bench issue --backend cuda --gpus "$g" --n 1000 --reps 20 --replay all --markdown
  done
  # the embedding example against the installed library, every replay path
  # shellcheck disable=SC2016 # the cc line is expanded by its own bash
  if step "graphs make install" 300 make -s CUDA=1 install PREFIX="$prod_dir/prefix" &&
     step "graphs embedding example builds" 120 bash -c \
       'cc -O2 examples/embed/serve.c $(PKG_CONFIG_PATH="$1/prefix/lib/pkgconfig" pkg-config --cflags --libs hirnode) -lm -o "$1/serve"' \
       _ "$prod_dir"; then
    for g in $(gpus_in "1 2 8"); do
      : >"$out/graphs-serve-g$g.txt"
      for path in bells jobs caller; do
        step "graphs g$g embedding example HIRNODE_REPLAY=$path" 120 \
          env HIRNODE_REPLAY=$path HIRNODE_BACKEND=cuda LD_LIBRARY_PATH="$prod_dir/prefix/lib" \
          "$prod_dir/serve" 10000 "$g"
        grep -v '^# ' "$last_log" >>"$out/graphs-serve-g$g.txt"
      done
    done
  fi
  part_end
fi

# ---- procs: process mode ----
# no_compute_left: no compute process on any GPU within 10 s
no_compute_left() {
  local i left
  for i in $(seq 1 20); do
    left=$(nvidia-smi --query-compute-apps=pid,process_name,used_memory --format=csv,noheader) || return 1
    [ -z "$left" ] && return 0
    sleep 0.5
  done
  echo "left on the GPUs: $left"
  return 1
}
if part procs; then
  part_begin procs
  pn=$(gpus_in "2 4")
  for n in $pn; do
    for f in examples/*.hir; do
      step "procs $n $(basename "$f")" 120 "$hirnode" run --backend cuda --procs "$n" --check --iters 2 "$f"
    done
  done
  if [ -n "$pn" ]; then
    for f in examples/*.hir; do
      for g in 0 1; do
        step "procs 2 via nccl graphs=$g $(basename "$f")" 120 env HIRNODE_DEFAULT_VIA=nccl HIRNODE_GRAPHS=$g \
          "$hirnode" run --backend cuda --procs 2 --check --iters 4 "$f"
      done
    done
    if python3 -c 'import torch' 2>/dev/null; then
      make -s python >/dev/null 2>&1
      for a in "--graph" "--graph --via nccl" "--graph --via p2p" "--via p2p" ""; do
        # shellcheck disable=SC2086 # $a: the script's arguments, split
        step_to "$out/tp-decode-$(echo "x$a" | tr -dc '[:lower:]').md" "procs torchrun tp_decode.py $a" 300 \
          env PYTHONPATH=build/python python3 -m torch.distributed.run --nproc-per-node 2 \
          examples/python/tp_decode.py $a
      done
      # torch tensors of expandable segments (cuMem) registered; p2p in torch graphs checked replay by replay
      for a in "--via p2p" "--graph --via p2p"; do
        # shellcheck disable=SC2086 # $a: the script's arguments, split
        step "procs torchrun tp_decode.py $a, expandable segments" 300 \
          env PYTHONPATH=build/python PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True \
          python3 -m torch.distributed.run --nproc-per-node 2 examples/python/tp_decode.py $a
      done
      for conf in "" "expandable_segments:True"; do
        step "procs torchrun torchrun_graph_p2p.py ${conf:-caching allocator}" 300 \
          env PYTHONPATH=build/python ${conf:+PYTORCH_CUDA_ALLOC_CONF=$conf} \
          python3 -m torch.distributed.run --nproc-per-node 2 python/tests/torchrun_graph_p2p.py
      done
      if step_fails "procs torchrun tp_decode.py --via p2p --no-register is refused" 300 env PYTHONPATH=build/python \
           python3 -m torch.distributed.run --nproc-per-node 2 examples/python/tp_decode.py --via p2p --no-register; then
        step "procs tp_decode.py --via p2p --no-register: the tensor and the statement named" 10 \
          grep -qE "binding 'P' on rank 0: .* at tp_decode.hir:7:1: .allreduce_rmsnorm Y, Rn <- P, R, G" "$last_log"
      fi
    else
      echo "procs: no torch: tp_decode.py under torchrun not run"
    fi
    # a rank killed mid-run (its own SIGKILL at line 25): the other names it
    # at once, the launcher the signal, the run fails within its limit
    if step_fails "procs 2 --fault 1:25:kill exits non-zero" 60 \
         "$hirnode" run --backend cuda --procs 2 --check --timeout 20 --fault 1:25:kill examples/ag_matmul_p2p.hir; then
      step "procs 2 --fault 1:25:kill: rank 1 named by rank 0" 10 \
        grep -qE "error: rank 1: its process \(pid [0-9]+\) died without leaving the world" "$last_log"
    fi
    step "procs 2 --fault 1:25:kill: no compute process left" 30 \
      bash -c "$(declare -f no_compute_left); no_compute_left"
  else
    echo "procs: needs 2 GPUs: not run"
  fi
  part_end
fi

# ---- nodes: worlds across nodes, NCCL over sockets ----
if part nodes; then
  part_begin nodes
  sock="NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1 NCCL_SOCKET_IFNAME=lo"
  for g in $(gpus_from 2); do
    [ "$g" = 2 ] || [ "$g" = 4 ] || continue
    m=$((g / 2))
    for f in examples/*.hir; do
      if grep -qE "via[ =](p2p|ll)" "$f"; then
        if step_fails "nodes 2x$m $(basename "$f") is refused" 120 env $sock \
             "$hirnode" run --backend cuda --nodes 2 --procs "$m" --check --iters 2 "$f"; then
          step "nodes 2x$m $(basename "$f"): cannot cross nodes" 10 grep -q "cannot cross nodes" "$last_log"
        fi
      else
        step "nodes 2x$m $(basename "$f")" 120 env $sock \
          "$hirnode" run --backend cuda --nodes 2 --procs "$m" --check --iters 2 "$f"
      fi
    done
    if step_fails "nodes 2x$m --fault $m:17:kill exits non-zero" 60 env $sock \
         "$hirnode" run --backend cuda --nodes 2 --procs "$m" --check --timeout 20 --fault "$m:17:kill" examples/tp_mlp.hir; then
      step "nodes 2x$m --fault $m:17:kill: rank $m named" 10 grep -qE "error: rank $m: its process \(pid [0-9]+" "$last_log"
    fi
    step_to "$out/nodes-g$g.md" "nodes 2x$m bench collectives nccl, one process then across nodes" 600 \
      bash -c "env $sock '$hirnode' bench collectives --backend cuda --gpus $g --via nccl --min 8K --max 16M --markdown &&
               env $sock '$hirnode' bench collectives --backend cuda --nodes 2 --procs $m --via nccl,auto --min 8K --max 16M --markdown"
  done
  part_end
fi

# ---- bench: tables for the docs ----
if part bench; then
  part_begin bench
  for g in $(gpus_from 2); do
    step_to "$out/bench-collectives-g$g.md" "bench g$g collectives ll,nccl,p2p 8K-256M" 600 \
      "$hirnode" bench collectives --backend cuda --gpus "$g" --via ll,nccl,p2p --min 8K --max 256M --markdown
    step_to "$out/bench-collectives-graph-g$g.md" "bench g$g collectives ll,nccl,p2p 8K-256M --graph" 600 \
      "$hirnode" bench collectives --backend cuda --gpus "$g" --graph --via ll,nccl,p2p --min 8K --max 256M --markdown
    step_to "$out/bench-overlap-g$g.md" "bench g$g overlap --op all, threads" 600 \
      "$hirnode" bench overlap --backend cuda --gpus "$g" --op all --markdown
    step_to "$out/bench-overlap-procs-g$g.md" "bench g$g overlap --op all, --procs $g" 600 \
      "$hirnode" bench overlap --backend cuda --procs "$g" --op all --markdown
  done
  [ -n "$(gpus_from 2)" ] || echo "bench: needs 2 GPUs: not run"
  part_end
fi

finish
