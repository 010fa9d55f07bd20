#!/usr/bin/env bash
# End-to-end checks of the `hirnode` command: every example with --check at
# 1, 2, 4 and 8 ranks (also with random stream delays) and in 2 and 4
# processes, exit codes, error
# format, dump round trip, .npy save/load, traces and their summary and
# picture.
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

# process mode: every example with --check as a world of 2 processes (with
# and without random stream delays) and of 4, one rank each, through the
# launcher; and in graphs
for f in examples/*.hir; do
  for spec in "2 0" "2 100" "4 100"; do
    set -- $spec
    if out=$("$cli" run --procs "$1" --check --delay "$2" --iters 2 "$f" 2>&1); then ok
    else bad "$f --procs $1 --delay $2"; echo "$out" | tail -8; fi
  done
  if out=$(HIRNODE_GRAPHS=1 "$cli" run --procs 2 --check --iters 3 "$f" 2>&1); then ok
  else bad "$f --procs 2 in graphs"; echo "$out" | tail -8; fi
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
# bench collectives on the host backend at small sizes: the latency path,
# NCCL (the CPU communicator here), the rings and auto, device-side timing,
# every output exact (a #wrong fails the command); one-shot against two-shot.
# `via auto` picks the latency path one-shot at these sizes eagerly (the
# measured tables of 2 ranks), and leaves it out with HIRNODE_AUTO_LL=0
out=$("$cli" bench collectives --gpus 2 --min 8K --max 32K --iters 3 --warmup 1 --reps 2 2>&1); rc=$?
[ $rc = 0 ] && [ "$(echo "$out" | grep -c '^# .* via ll, nccl, p2p, auto; .* device time')" = 3 ] &&
  [ "$(echo "$out" | grep -cE '^ +[0-9]+ .* ll/1shot$')" = 9 ] && ok || bad "bench collectives: rc=$rc $out"
out=$(HIRNODE_AUTO_LL=0 "$cli" bench collectives --gpus 2 --min 8K --max 32K --iters 3 --warmup 1 --reps 2 2>&1); rc=$?
[ $rc = 0 ] && [ "$(echo "$out" | grep -cE '^ +[0-9]+ .* nccl$')" = 9 ] && ok || bad "bench collectives, HIRNODE_AUTO_LL=0: rc=$rc $out"
out=$(HIRNODE_AUTO_LL=1 "$cli" bench collectives --gpus 4 --op allreduce --via "ll oneshot,ll twoshot" --min 8K --max 16K \
      --iters 2 --reps 1 --markdown 2>&1); rc=$?
[ $rc = 0 ] && echo "$out" | grep -q '^| 16384 | .* | 0 | .* | 0 | ll/1shot |$' && ok || bad "bench collectives --via list: rc=$rc $out"
# the latency path's probe on the host backend: its buffers made and given back, nothing stamped, nothing said
out=$(HIRNODE_LL_PROBE=1 "$cli" bench collectives --gpus 2 --op allreduce --via ll --min 8K --max 8K --iters 2 --reps 1 2>&1); rc=$?
[ $rc = 0 ] && ! echo "$out" | grep -q "ll probe" && ok || bad "HIRNODE_LL_PROBE=1 on the host backend: rc=$rc $out"
# --graph: the calls captured in one graph and replayed, every output checked;
# auto in graphs as measured there: the latency path for the allreduces and
# the 8 KiB allgather, NCCL for the rest
out=$("$cli" bench collectives --gpus 2 --graph --min 8K --max 16K --iters 3 --reps 2 2>&1); rc=$?
[ $rc = 0 ] && [ "$(echo "$out" | grep -c '^# .* via ll, nccl, p2p, auto; 3 calls captured in one graph')" = 3 ] &&
  [ "$(echo "$out" | grep -cE '^ +[0-9]+ .* ll/1shot$')" = 3 ] &&
  [ "$(echo "$out" | grep -cE '^ +[0-9]+ .* nccl$')" = 3 ] && ok || bad "bench collectives --graph: rc=$rc $out"
# --soak: replays of a graph of calls, each its own row, every output of every replay checked; not
# for other collectives
out=$("$cli" bench collectives --gpus 4 --graph --op allreduce --via "ll oneshot,ll twoshot,p2p" --min 8K --max 8K \
      --iters 4 --reps 1 --soak 120 2>&1); rc=$?
[ $rc = 0 ] && [ "$(echo "$out" | grep -c '^soak: allreduce of 8192 bytes via .* on 4 ranks: 480 calls in 120 replays of 4, every output checked: 0 wrong')" = 3 ] &&
  ok || bad "bench collectives --soak: rc=$rc $out"
out=$("$cli" bench collectives --gpus 2 --op allgather --soak 2 2>&1); rc=$?
[ $rc = 2 ] && echo "$out" | grep -q -- "--soak checks allreduce: with --op allreduce" && ok || bad "bench --soak --op allgather: rc=$rc $out"
# the fused norm through every communicator, eager and in a graph, checked against its reference
for mode in "" --graph; do
  out=$("$cli" bench collectives --gpus 4 --op allreduce_rmsnorm --hidden 1024 $mode --min 8K --max 32K --iters 3 \
        --reps 2 --markdown 2>&1); rc=$?
  [ $rc = 0 ] && [ "$(echo "$out" | grep -cE '^\| [0-9]+ \| .* \| 0 \| .* \| 0 \| .* \| 0 \| .* \| 0 \| ll/1shot \|$')" = 3 ] &&
    ok || bad "bench collectives --op allreduce_rmsnorm $mode: rc=$rc $out"
done
# without --gpus: every device (2 on the host backend), so that busbw is not 0; units in the headings
out=$("$cli" bench collectives --backend host --op allreduce --min 8K --max 8K --iters 2 --warmup 1 --reps 1 2>&1); rc=$?
[ $rc = 0 ] && echo "$out" | grep -q "^# allreduce, 2 ranks, " &&
  echo "$out" | grep -qE "^ +bytes +ll \(µs\) busbw \(GB/s\) #wrong +nccl \(µs\) busbw \(GB/s\) #wrong " &&
  ok || bad "bench collectives' default ranks and units: rc=$rc $out"
# its progress on stderr, a line a size, the table alone on stdout
err=$("$cli" bench collectives --backend host --op allreduce --min 8K --max 16K --iters 2 --warmup 1 --reps 1 2>&1 >/dev/null)
[ "$(echo "$err" | grep -c '^bench collectives: allreduce, [0-9]* bytes: ll, nccl, p2p, auto$')" = 2 ] &&
  ok || bad "bench collectives' progress on stderr: $err"
"$cli" bench collectives --graph --trace /dev/null >/dev/null 2>&1; [ $? = 2 ] && ok || bad "bench collectives --graph --trace"
"$cli" bench collectives --timing wall >/dev/null 2>&1; [ $? = 2 ] && ok || bad "bench collectives --timing takes device or host"
# on the host backend the benches take host-sized defaults and say what they do
out=$("$cli" bench overlap --op matmul_ar --backend host 2>&1 >/dev/null); rc=$?
[ $rc = 0 ] && echo "$out" | grep -q "^bench overlap: matmul_ar 256x128x64 bf16: the inputs" &&
  echo "$out" | grep -q "^bench overlap: matmul_ar 128x128x128 bf16: auto" && ok || bad "bench overlap on the host: rc=$rc $out"
out=$("$cli" bench collectives --gpus 2 --op allgather --backend host 2>&1); rc=$?
[ $rc = 0 ] && echo "$out" | grep -q "; 10 iterations x 3 repetitions after 2 warm-up;" &&
  echo "$out" | grep -qE '^ +262144 ' && ! echo "$out" | grep -qE '^ +524288 ' && ok || bad "bench collectives on the host: rc=$rc $out"
# hirnode tune on the host backend (host-sized, seconds): a step a line on
# stderr (no terminal), the profile written where -o says; HIRNODE_PROFILE
# makes it the one info names and runs use, and bench overlap --shapes tuner
# takes a profile's shapes (one at tune's least size here); a malformed,
# truncated, foreign or other-version file: a warning naming it and what is
# wrong, and the built-in default
out=$("$cli" tune --backend host --gpus 2 -o "$t/p.json" 2>"$t/tune.err"); rc=$?
[ $rc = 0 ] && [ -s "$t/p.json" ] && echo "$out" | grep -q "^profile: $t/p.json$" &&
  echo "$out" | grep -q "^the model's largest error on these pipelines: " &&
  grep -q '^tune: \[1/[0-9]*\] GEMM rates in bf16, 5 shapes in rounds$' "$t/tune.err" && grep -q "^tune: \[\([0-9]*\)/\1\] the model's fit$" "$t/tune.err" &&
  ok || bad "tune: rc=$rc $out $(cat "$t/tune.err")"
# --refit: nothing measured, the model fitted to what the file holds,
# written where -o says (a file info then takes); it takes no measuring option
out=$("$cli" tune --refit "$t/p.json" -o "$t/refit.json" 2>&1); rc=$?
[ $rc = 0 ] && echo "$out" | grep -q "^profile: $t/refit.json$" && echo "$out" | grep -q "^the model's largest error on these pipelines: " &&
  HIRNODE_PROFILE="$t/refit.json" "$cli" info 2>&1 | grep -q "^  host   2 ranks of host: $t/refit.json (measured" &&
  ok || bad "tune --refit: rc=$rc $out"
# the profiles measured on GPUs kept in perf/profiles stay readable, and
# refit with this hirnode's model: those of several GPUs on their pipelines,
# the one-GPU one with its GEMM in chunks
for f in perf/profiles/*.json; do
  out=$("$cli" tune --refit "$f" -o "$t/kept.json" 2>&1); rc=$?
  [ $rc = 0 ] && echo "$out" | grep -q "^machine: NVIDIA H[12]00[ A-Za-z0-9]* x[124] (cuda backend)" &&
    { echo "$out" | grep -q "^the model's largest error on these pipelines: " ||
      { echo "$out" | grep -q "x1 (cuda backend)" && echo "$out" | grep -q "^GEMM 4096x8192x8192 in chunks, time over"; }; } &&
    ok || bad "tune --refit $f: rc=$rc $out"
done
out=$("$cli" tune --refit "$t/p.json" --gpus 2 2>&1); rc=$?
[ $rc = 2 ] && echo "$out" | grep -q "^hirnode tune: --refit measures nothing: it takes no --gpus" && ok || bad "tune --refit --gpus: rc=$rc $out"
out=$("$cli" tune --refit "$t/none.json" 2>&1); rc=$?
[ $rc = 1 ] && echo "$out" | grep -q "^hirnode tune: --refit $t/none.json: cannot read" && ok || bad "tune --refit of no file: rc=$rc $out"
out=$("$cli" tune --backend host --gpus 2 --size tiny -o "$t/tiny.json" 2>/dev/null); rc=$?
[ $rc = 0 ] && echo "$out" | grep -qE "^while traffic overlaps it, a GEMM loses this share of its speed \(100 %: overlapping gains nothing\): copy engines ([0-9]+ %|100 % \(together [0-9.]+ s slower per s of traffic than in turn\)|not measured), " &&
  ok || bad "tune --size tiny: rc=$rc $out"
if command -v python3 >/dev/null; then
  python3 -c 'import json, sys; d = json.load(open(sys.argv[1])); assert d["version"] == 1 and d["machine"]["count"] == 2' "$t/p.json" &&
    ok || bad "the profile is not JSON to python"
fi
out=$(HIRNODE_PROFILE="$t/p.json" "$cli" info 2>&1); rc=$?
[ $rc = 0 ] && echo "$out" | grep -q "^  host   2 ranks of host: $t/p.json (measured .* on host x2)$" && ! echo "$out" | grep -q "^hirnode warn " &&
  echo "$out" | grep -q "^  profile *= $t/p.json " && ok || bad "info names the profile: rc=$rc $out"
out=$("$cli" info --gpus 2 2>&1); rc=$?
[ $rc = 0 ] && echo "$out" | grep -q "^  host   2 ranks of host: built-in default for host " && ok || bad "info without a profile: $out"
out=$(HIRNODE_PROFILE="$t/p.json" "$cli" dump --lowered --gpus 2 examples/matmul_reduce_scatter.hir 2>&1); rc=$?
[ $rc = 0 ] && echo "$out" | grep -q "^# the model's profile: $t/p.json (measured" && ok || bad "dump --lowered names the profile: $out"
out=$(HIRNODE_PROFILE="$t/p.json" "$cli" run --gpus 2 --check --iters 2 examples/matmul_allreduce.hir 2>&1); rc=$?
[ $rc = 0 ] && echo "$out" | grep -q "^check: passed" && ! echo "$out" | grep -q "^hirnode warn " && ok || bad "a run with the profile: rc=$rc $out"
out=$(HIRNODE_PROFILE="$t/tiny.json" "$cli" bench overlap --op all --gpus 2 --shapes tuner --iters 1 --warmup 0 2>/dev/null); rc=$?
[ $rc = 0 ] && [ "$(echo "$out" | grep -c '^pick: ')" = 3 ] && [ "$(echo "$out" | grep -c '^# .*, M=32 K=16 N=16, ')" = 3 ] &&
  echo "$out" | grep -q "the model's profile: $t/tiny.json" && ! echo "$out" | grep -q WRONG && ok || bad "bench overlap --shapes tuner: rc=$rc $out"
head -c 300 "$t/p.json" > "$t/cut.json"
sed 's/"count": 2/"count": 4/' "$t/p.json" > "$t/x4.json"
sed 's/"version": 1/"version": 7/' "$t/p.json" > "$t/v7.json"
sed 's/"hbm_gbps": /"hbm_gbps": -/' "$t/p.json" > "$t/neg.json"
for c in "cut.json:not valid JSON (truncated?): line " "x4.json:measured on host x4, not on this machine's host x2" \
         "v7.json:version 7; this hirnode reads version 1" "neg.json:model.hbm_gbps: expected a number from"; do
  f=${c%%:*} want=${c#*:}
  out=$(HIRNODE_PROFILE="$t/$f" "$cli" info --gpus 2 2>&1); rc=$?
  [ $rc = 0 ] && echo "$out" | grep -qF "profile $t/$f: $want" && echo "$out" | grep -qF "; using the built-in default for host" &&
    echo "$out" | grep -q "^  host   2 ranks of host: built-in default for host " && ok || bad "info with $f: rc=$rc $out"
  out=$(HIRNODE_PROFILE="$t/$f" "$cli" run --gpus 2 --check --iters 2 examples/matmul_allreduce.hir 2>&1); rc=$?
  [ $rc = 0 ] && echo "$out" | grep -q "^check: passed" && [ "$(echo "$out" | grep -cF "profile $t/$f: $want")" = 1 ] && ok ||
    bad "a run with $f: rc=$rc $out"
done
out=$(HIRNODE_PROFILE="$t/none.json" "$cli" info --gpus 2 2>&1)
echo "$out" | grep -qF "profile $t/none.json: cannot read" && ok || bad "info with a missing profile: $out"
out=$("$cli" tune --backend host --gpus 2 --size tiny -o "$t/p.json/x.json" 2>&1 >/dev/null); rc=$?
[ $rc = 1 ] && echo "$out" | grep -q "^hirnode tune: cannot write $t/p.json/x.json: " && ok || bad "tune to a path it cannot write: rc=$rc $out"
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
# every subcommand's --help: its usage on stdout, exit 0
for cmd in "run" "check" "dump" "info" "tune" "bench" "bench collectives" "bench overlap" "bench issue" "trace" \
           "trace summary" "trace svg"; do
  for h in --help -h; do
    out=$("$cli" $cmd $h 2>&1); rc=$?
    [ $rc = 0 ] && echo "$out" | grep -q "^usage: hirnode ${cmd%% *}" && ok || bad "$cmd $h: rc=$rc $out"
  done
done
"$cli" --help | grep -q "^  run FILE" && ok || bad "hirnode --help"
# every bad option and value: exit 2, one message naming the option and what
# it takes, no source location
usage_error() { # WANT ARGS...
  local want=$1 out rc; shift
  out=$("$cli" "$@" 2>&1 >/dev/null); rc=$?
  [ $rc = 2 ] && echo "$out" | grep -qF -- "$want" && ! echo "$out" | grep -qE '[a-z_]+\.c:[0-9]+' && ok ||
    bad "$*: rc=$rc, want '$want' in: $out"
}
p=examples/allgather.hir
usage_error "hirnode run: --gpus: expected an integer from 1 to 256, not '0'" run --gpus 0 $p
usage_error "--gpus: expected an integer from 1 to 256, not '2x'" run --gpus 2x $p
usage_error "--gpus: expected an integer from 1 to 256, not ''" check --gpus= $p
usage_error "--streams: expected an integer from 1 to 16, not '17'" run --streams 17 $p
usage_error "--iters: expected an integer from 1 to 1000000, not '5x'" run --iters 5x $p
usage_error "--iters: expected an integer from 1 to 1000000, not '0x'" run --iters 0x $p
usage_error "--seed: expected an integer of at least 0, not '-1'" run --seed -1 $p
usage_error "--delay: expected a number from 0 to 1e+06, not 'abc'" run --delay abc $p
usage_error "--delay: expected a number from 0 to 1e+06, not 'nan'" run --delay nan $p
usage_error "--timeout: expected a number from 0.001 to 1e+06, not '0'" run --timeout 0 $p
usage_error "--backend: expected auto, cuda or host, not 'gpu'" run --backend gpu $p
usage_error "-D: expected NAME=INTEGER, not 'N'" run -D N $p
usage_error "-D N: expected an integer, not '4k'" check -DN=4k $p
usage_error "--trace: expected FILE, not ''" run --trace "" $p
usage_error "--load needs a value (DIR)" run $p --load
usage_error "unknown option '--iter' — did you mean '--iters'?" run --iter 2 $p
usage_error "unknown option '--check'" check --check $p
usage_error "unknown option '--lowered'" run --lowered $p
usage_error "unexpected argument 'extra'" dump $p extra
usage_error "which program? (hirnode run FILE)" run --gpus 2
usage_error "unexpected argument 'x'" info x
usage_error "unknown command 'chek' — did you mean 'check'?" chek $p
usage_error "unknown benchmark 'overlay'" bench overlay
usage_error "--min: expected a size from 1 byte to 1 TiB" bench collectives --min 8X
usage_error "--max: expected a size from 1 byte to 1 TiB" bench collectives --max 0
usage_error "--min 65536 is more than --max 8192" bench collectives --gpus 2 --min 64K --max 8K
usage_error "--iters: expected an integer from 1 to 1000000, not '0'" bench collectives --iters 0
usage_error "--warmup: expected an integer from 0 to 1000000, not '-1'" bench collectives --warmup -1
usage_error "--dtype: expected bf16, f16 or f32, not 'i8'" bench collectives --dtype i8
usage_error "--op: expected all, allreduce, allgather, reduce_scatter or allreduce_rmsnorm, not 'bcast'" bench collectives --op bcast
usage_error "--timing: expected device or host, not 'wall'" bench collectives --timing wall
usage_error "--via: expected LIST, not ''" bench collectives --via ""
usage_error "which --op?" bench overlap
usage_error "--shapes: expected MxKxN[,MxKxN...], not '64x32'" bench overlap --op ag_matmul --shapes 64x32
usage_error "--shapes: expected an integer from 1 to 1048576, not '0'" bench overlap --op ag_matmul --shapes 64x32x0
usage_error "--reps: expected an integer from 20 to 100000, not '5'" bench overlap --op ag_matmul --reps 5
usage_error "--dtype: expected bf16[,f16,f32], not 'i32'" bench overlap --op ag_matmul --dtype i32
usage_error "--chunks: expected an integer from 1 to 1048576, not '0'" bench overlap --op ag_matmul --chunks 0
usage_error "--op: expected ag_matmul, matmul_rs, matmul_ar or all, not 'mm'" bench overlap --op mm
usage_error "--size: expected auto, gpu, host or tiny, not 'huge'" tune --size huge
usage_error "--gpus: expected an integer from 1 to 256, not '0'" tune --gpus 0
usage_error "--shapes: expected MxKxN[,MxKxN...], not 'tuner'" tune --shapes tuner
usage_error "-o: expected FILE, not ''" tune -o ""
usage_error "unexpected argument 'x'" tune x
usage_error "--gpus: expected an integer from 1 to 256, not '0'" info --gpus 0
usage_error "--n: expected an integer from 1 to 10000000, not '0'" bench issue --n 0
usage_error "--gpus: expected an integer from 1 to 256, not '300'" bench issue --gpus 300
usage_error "which command?" trace
usage_error "which trace?" trace summary
usage_error "where to? (-o OUT.svg)" trace svg x.json
usage_error "--width: expected an integer from 200 to 100000, not '10'" trace svg x.json -o y.svg --width 10
usage_error "unknown option '-o'" trace summary x.json -o y.svg
# files that are no programs, data or traces: exit 2, the file and why
mkdir "$t/dir.hir"
for cmd in check run dump; do
  usage_error "$t/dir.hir: error: not a regular file (a directory)" $cmd "$t/dir.hir"
  usage_error "/dev/zero: error: not a regular file (a character device)" $cmd /dev/zero
done
mkfifo "$t/fifo.hir"
out=$(timeout 20 "$cli" run "$t/fifo.hir" 2>&1); rc=$?
[ $rc = 2 ] && echo "$out" | grep -q "fifo.hir: error: not a regular file (a FIFO)" && ok || bad "run of a FIFO: rc=$rc $out"
truncate -s 65M "$t/big.hir"
usage_error "big.hir: error: 68157440 bytes, more than the 64 MiB a program file may have" check "$t/big.hir"
usage_error "dir.hir: error: not a regular file (a directory)" trace summary "$t/dir.hir"
printf 'input A : f32[4] replicated\noutput B : f32[4] replicated\nallreduc B <- A\n' > "$t/typo.hir"
usage_error "typo.hir:3:1: error: unknown instruction 'allreduc' — did you mean 'allreduce'?" check "$t/typo.hir"
# every HIRNODE_* variable read strictly: a bad one is exit 2 and one line
# in the options' format from each command that reads them; info marks it
# (stdout), says so (stderr) and exits 2; dump alone does not read them
env_error() { # VAR=VALUE WANT ARGS...
  local set=$1 want=$2 out rc; shift 2
  out=$(env "$set" "$cli" "$@" 2>&1 >/dev/null); rc=$?
  [ $rc = 2 ] && echo "$out" | grep -qF -- "$want" && ! echo "$out" | grep -qE '[a-z_]+\.c:[0-9]+' && ok ||
    bad "$set $*: rc=$rc, want '$want' in: $out"
}
while IFS='|' read -r set want; do
  env_error "$set" "hirnode run: $want" run --gpus 2 $p
  out=$(env "$set" "$cli" info 2>"$t/info.err"); rc=$?
  [ $rc = 2 ] && echo "$out" | grep -qF -- "bad: $want" && grep -q "^hirnode info: 1 HIRNODE_\* variable is bad" "$t/info.err" \
    && ok || bad "info with $set: rc=$rc $out $(cat "$t/info.err")"
done <<'VARS'
HIRNODE_BACKEND=gpu|HIRNODE_BACKEND: expected auto, cuda or host, not 'gpu'
HIRNODE_STREAMS=5x|HIRNODE_STREAMS: expected an integer from 1 to 16, not '5x'
HIRNODE_TIMEOUT=abc|HIRNODE_TIMEOUT: expected a number from 0.001 to 1e+06, not 'abc'
HIRNODE_HOST_DELAY_US=-5|HIRNODE_HOST_DELAY_US: expected a number from 0 to 1e+06, not '-5'
HIRNODE_HOST_MEM_MIB=64M|HIRNODE_HOST_MEM_MIB: expected an integer from 0 to 1073741824, not '64M'
HIRNODE_SEED=seed|HIRNODE_SEED: expected an integer of at least 0, not 'seed'
HIRNODE_LOG=verbose|HIRNODE_LOG: expected off, error, warn, info, debug or trace, not 'verbose'
HIRNODE_NCCL_BLOCKING=yes|HIRNODE_NCCL_BLOCKING: expected 0 or 1, not 'yes'
HIRNODE_DEFAULT_VIA=p2p|HIRNODE_DEFAULT_VIA: expected auto or nccl, not 'p2p'
HIRNODE_GRAPHS=on|HIRNODE_GRAPHS: expected 0 or 1, not 'on'
HIRNODE_REPLAY=2|HIRNODE_REPLAY: expected bells, jobs or caller, not '2'
HIRNODE_AUTO_LL=true|HIRNODE_AUTO_LL: expected auto, 1 or 0, not 'true'
HIRNODE_NCCL_MAX_CTAS=999|HIRNODE_NCCL_MAX_CTAS: expected an integer from 0 to 128, not '999'
HIRNODE_P2P_SYNC=flag|HIRNODE_P2P_SYNC: expected events or flags, not 'flag'
HIRNODE_P2P_PIECES=0|HIRNODE_P2P_PIECES: expected an integer from 1 to 64, not '0'
HIRNODE_P2P_AG_PIECES=x|HIRNODE_P2P_AG_PIECES: expected an integer from 1 to 64, not 'x'
HIRNODE_P2P_PIECE_KIB=4M|HIRNODE_P2P_PIECE_KIB: expected an integer from 1 to 1073741824, not '4M'
HIRNODE_P2P_LANES=8|HIRNODE_P2P_LANES: expected an integer from 1 to 4, not '8'
HIRNODE_FAULT=1:17:melt|HIRNODE_FAULT: fault '1:17:melt': expected RANK:LINE[:OCCURRENCE]:KIND[:MS]
HIRNODE_WATCHDOG_GRACE_S=-1|HIRNODE_WATCHDOG_GRACE_S: expected a number from 0 to 1e+06, not '-1'
HIRNODE_SPIN_US=1e9|HIRNODE_SPIN_US: expected a number from 0 to 1e+07, not '1e9'
HIRNODE_JOIN_SPIN=off|HIRNODE_JOIN_SPIN: expected 0 or 1, not 'off'
HIRNODE_PROFILE=a	b.json|HIRNODE_PROFILE: expected a file's path (below 4096 bytes, no control characters)
HIRNODE_WORLD=-2|HIRNODE_WORLD: expected an integer from 0 to 256, not '-2'
HIRNODE_RANK=x|HIRNODE_RANK: expected an integer from 0 to 255, not 'x'
VARS
[ "$("$cli" info | grep -c ' (HIRNODE_[A-Z0-9_]*) ')" = 33 ] && ok || bad "info lists 33 settings"
# several ranks of a world across processes in one process: refused once, saying why
out=$(HIRNODE_WORLD=4 HIRNODE_RANK=1 HIRNODE_RENDEZVOUS="$t" "$cli" run --gpus 2 $p 2>&1); rc=$?
[ $rc != 0 ] && [ "$(echo "$out" | grep -c "a world across processes takes one rank per process (this one asks for 2)")" = 1 ] \
  && ok || bad "HIRNODE_WORLD=4 with 2 ranks: rc=$rc $out"
out=$(HIRNODE_WORLD=2 "$cli" run --gpus 2 --check $p 2>&1) && echo "$out" | grep -q "^check: passed" \
  && ok || bad "HIRNODE_WORLD=2 with 2 ranks: $out"
env_error HIRNODE_STREAMS=0 "hirnode check: HIRNODE_STREAMS: expected an integer from 1 to 16, not '0'" check $p
env_error HIRNODE_STREAMS=0 "hirnode dump: HIRNODE_STREAMS: expected" dump --lowered $p
env_error HIRNODE_P2P_LANES=0 "hirnode bench collectives: HIRNODE_P2P_LANES: expected" bench collectives --gpus 2
env_error HIRNODE_GRAPHS=2 "hirnode bench overlap: HIRNODE_GRAPHS: expected 0 or 1, not '2'" bench overlap --op ag_matmul
env_error HIRNODE_GRAPHS=2 "hirnode bench issue: HIRNODE_GRAPHS: expected" bench issue
HIRNODE_STREAMS=0 "$cli" dump $p >/dev/null && ok || bad "dump reads no settings"
HIRNODE_STREAMS= "$cli" check $p >/dev/null && ok || bad "an empty variable is one not set"
out=$(HIRNODE_STREAMS=4 HIRNODE_TIMEOUT=2.5 HIRNODE_P2P_SYNC=flags "$cli" info 2>&1); rc=$?
[ $rc = 0 ] && echo "$out" | grep -qE '^  streams += 4 ' && ! echo "$out" | grep -q "bad:" && ok \
  || bad "info with good settings: rc=$rc $out"
# a division in a declared shape that leaves a remainder: both numbers, the
# fix, and nothing from the reference block; floor() says it is meant
out=$("$cli" run --gpus 3 --check examples/allgather.hir 2>&1); rc=$?
[ $rc = 2 ] && [ "$out" = "examples/allgather.hir:3:8: error: shape of 'X': M / world = 64 / 3 does not divide (the program floors it to 21): give M a multiple of 3 (63 or 66), or write floor(M / world) if flooring is meant" ] \
  && ok || bad "a shape that does not divide: rc=$rc $out"
"$cli" run --gpus 3 --check -D M=63 examples/allgather.hir >/dev/null && ok || bad "allgather at 3 ranks with M = 63"
printf 'param M = 64, N = 8\ninput X : f32[floor(M / world), N] shard(axis 0)\noutput Y : f32[floor(M / world), N] shard(axis 0)\ncopy Y <- X\nreference {\n  copy Y <- X\n}\n' > "$t/floor.hir"
"$cli" run --gpus 3 --check "$t/floor.hir" | grep -q "^check: passed" && ok || bad "floor(M / world) at 3 ranks"
"$cli" dump "$t/floor.hir" | grep -q "^input X : f32\[floor(M / world), N\] shard(axis 0)$" && ok || bad "dump of floor()"
# the body's error first and alone, though the reference block errs too
sed 's|M / world|floor(M / world)|' examples/allgather.hir > "$t/ag3.hir"
out=$("$cli" check --gpus 3 "$t/ag3.hir" 2>&1); rc=$?
[ $rc = 2 ] && [ "$(echo "$out" | wc -l)" = 1 ] && echo "$out" | grep -q "ag3.hir:6:1: error: all ranks: allgather Y <- X: " \
  && ok || bad "the body's error alone: rc=$rc $out"
sed 's|^  copy Y <- X$|  copy Y <- Y[0]|' examples/allgather.hir > "$t/ref.hir"
usage_error "ref.hir:9:3: error: rank 0: copy Y <- Y[0]: copy: f32[64, 8] does not match f32[8]" check --gpus 2 "$t/ref.hir"
# an auto that finds nothing: what it tried and why, what would fit
sed 's/pipelined()/pipelined(chunks=3)/' examples/ag_linear_bf16.hir > "$t/c3.hir"
usage_error "c3.hir:9:1: error: linear C <- allgather(A), W, bias pipelined(chunks=3): strategy=auto finds no strategy for chunks=3: sequential runs in one step, chunks=3 must be 1; ring moves one shard per step, chunks=3 must be world (2); collective: chunks=3 does not divide the 32 rows of each rank's shard of A; broadcast takes chunks from each rank in turn, chunks=3 is not a multiple of world (2); chunks=2 or chunks=4 would fit" \
  dump --lowered --gpus 2 -D M=64 "$t/c3.hir"
# faults naming a rank or a line that does not exist: refused, what exists named
usage_error "hirnode: error: fault '9:99:stop': rank 9 does not exist (ranks 0 to 3)" run --gpus 4 --fault 9:99:stop $p
usage_error "allgather.hir: error: fault '1:99:stop': line 99 holds no instruction of the body (the body's instructions are on lines 6)" \
  run --gpus 4 --fault 1:99:stop $p
usage_error "allgather.hir: error: fault '0:6:oom': line 6 holds no alloc (the body allocates nothing)" run --gpus 4 --check --fault 0:6:oom $p
env_error HIRNODE_FAULT=1:2:comm "allgather.hir: error: fault '1:2:comm': line 2 holds no communication (the body communicates on lines 6)" \
  run --gpus 2 $p
# one default rank count: run, check and dump --lowered at 8
"$cli" check examples/allreduce.hir | grep -q "ok (8 ranks)" && ok || bad "check's default ranks"
"$cli" check --gpus 1 examples/allreduce.hir | grep -q "ok (1 rank)$" && ok || bad "check at 1 rank: plural"
# --check names the error its tolerance bounds, and run --help says it
out=$("$cli" run --gpus 2 --check examples/allreduce.hir 2>&1); rc=$?
[ $rc = 0 ] && echo "$out" | grep -qE "^check S on rank 0: rel l2 err [0-9.e+-]+ \(must be at most 1e-05 for f32\); max abs err [0-9.e+-]+, max rel err [0-9.e+-]+: ok$" &&
  ok || bad "run --check's lines: rc=$rc $out"
"$cli" run --help | grep -q "relative L2 error ||out - ref|| / ||ref|| must be at most 1e-5" && ok || bad "run --help: the tolerance"
# a program without instructions: a warning, not a silent ok
printf 'output S : f32[8] replicated\n' >"$t/empty.hir"
out=$("$cli" check "$t/empty.hir" 2>&1); rc=$?
[ $rc = 0 ] && [ "$out" = "$t/empty.hir: warning: no instructions: the program does nothing" ] && ok ||
  bad "check of an empty program: rc=$rc $out"
"$cli" run examples/allreduce.hir | grep -q ": 8 ranks on the " && ok || bad "run's default ranks"
"$cli" dump --lowered examples/tp_mlp.hir | grep -q "^# examples/tp_mlp.hir lowered for 8 ranks" && ok || bad "dump --lowered's default ranks"
# a program the verifier rejects: exit 2
printf 'input A : f32[4] replicated\nB = alloc f32[4]\nallgather B <- A\n' > "$t/v.hir"
out=$("$cli" run --gpus 2 "$t/v.hir" 2>&1); rc=$?
[ $rc = 2 ] && echo "$out" | grep -q "v.hir:3:1: error: all ranks: allgather B <- A" && ok || bad "verify: rc=$rc $out"
# a failing check: exit 1
sed 's/Ag\[src\], W, bias/Ag[(src + 1) % world], W, bias/' examples/ag_matmul_p2p.hir > "$t/wrong.hir"
"$cli" run --gpus 4 --check "$t/wrong.hir" >/dev/null 2>&1; [ $? = 1 ] && ok || bad "a wrong pipeline must fail its check"
# an output left partly unwritten: the check counts the poisoned elements
sed 's/^for j in 0 .. S {$/for j in 0 .. S - 1 {/' examples/chunked_matmul.hir > "$t/unwritten.hir"
out=$("$cli" run --gpus 2 --check "$t/unwritten.hir" 2>&1); rc=$?
[ $rc = 1 ] && echo "$out" | grep -q "check C on rank 1: .* 16384 of 32768 elements left at the poison (never written): MISMATCH" \
  && ok || bad "unwritten output: rc=$rc $out"
# sizes that overflow: exit 2, the line, rank, tensor and values named
printf 'param N = 4\ninput X : f32[N, 4] shard(axis 0)\noutput Y : f32[N, 4] shard(axis 0)\ncopy Y <- X\nreference {\n  copy Y <- X\n}\n' > "$t/big.hir"
out=$("$cli" run --check -D N=4611686018427387904 "$t/big.hir" 2>&1); rc=$?
[ $rc = 2 ] && echo "$out" | grep -q "big.hir:2:7: error: rank 0: shape of 'X': 4611686018427387904 × 4 elements overflows" \
  && ok || bad "overflowing input: rc=$rc $out"
printf 'param N = 4\nT = alloc f32[16]\nV = view T as [N, 4]\nfill V[1000] <- 1.0\n' > "$t/view.hir"
out=$("$cli" run --gpus 1 -D N=4611686018427387908 "$t/view.hir" 2>&1); rc=$?
[ $rc = 2 ] && echo "$out" | grep -q "view.hir:3:1: error: rank 0: V = view T as \[N, 4\]: view of 'T': 4611686018427387908 × 4 elements overflows" \
  && ok || bad "overflowing view: rc=$rc $out"
out=$("$cli" check -D N=9223372036854775807 "$t/view.hir" 2>&1); rc=$?
[ $rc = 2 ] && echo "$out" | grep -q "integer overflow\|overflows" && ok || bad "check with N = 2^63 - 1: rc=$rc $out"
# parameters from the command line
"$cli" run --gpus 2 --check -D M=1024 -D N=16 examples/ag_matmul_p2p.hir >/dev/null && ok || bad "-D"
"$cli" run --gpus 2 -D NOPE=1 examples/allgather.hir >/dev/null 2>&1; [ $? = 2 ] && ok || bad "unknown -D"
# save, then load the saved outputs back as inputs of a copy program
"$cli" run --gpus 4 --check --save "$t" examples/allgather.hir >/dev/null && [ -s "$t/Y.npy" ] && ok || bad "--save"
printf 'param M = 64, N = 8\ninput Y : f32[M / world, N] shard(axis 0)\noutput Z : f32[M, N] replicated\nallgather Z <- Y\nreference {\n  copy Z <- Y\n}\n' > "$t/load.hir"
"$cli" run --gpus 2 --check --load "$t" --save "$t" "$t/load.hir" >/dev/null && cmp -s "$t/Y.npy" "$t/Z.npy" && ok || bad "--load"
# .npy inputs that are not what the program needs: exit 2, the file, the
# bytes expected and found
cp "$t/Y.npy" "$t/Y.good"
truncate -s -4 "$t/Y.npy"
usage_error "Y.npy: error: truncated data: shape (64, 8) of '<f4' takes 2048 bytes after the 128-byte header, the file has 2044" \
  run --gpus 2 --check --load "$t" "$t/load.hir"
cp "$t/Y.good" "$t/Y.npy"; printf 'abcd' >> "$t/Y.npy"
usage_error "Y.npy: error: bytes after the data: shape (64, 8) of '<f4' takes 2048 bytes" run --gpus 2 --load "$t" "$t/load.hir"
truncate -s 1G "$t/Y.npy"
usage_error "Y.npy: error: 1073741824 bytes, more than the 8202 bytes a .npy file of shape (64, 8) may have" \
  run --gpus 2 --load "$t" "$t/load.hir"
head -c 60 "$t/Y.good" > "$t/Y.npy"
usage_error "Y.npy: error: truncated header" run --gpus 2 --load "$t" "$t/load.hir"
rm "$t/Y.npy"; mkdir "$t/Y.npy"
usage_error "Y.npy: error: not a regular file (a directory)" run --gpus 2 --load "$t" "$t/load.hir"
rmdir "$t/Y.npy"; mv "$t/Y.good" "$t/Y.npy"
"$cli" info >/dev/null && ok || bad "info"
# HIRNODE_GRAPHS=1: repeated runs are captured and replayed, and still pass
# --check; `hirnode info` lists the setting; bench issue has the replay table
out=$(HIRNODE_GRAPHS=1 "$cli" run --gpus 4 --iters 4 --delay 20 --check examples/tp_mlp.hir 2>&1); rc=$?
[ $rc = 0 ] && echo "$out" | grep -q "^check: passed" && ok || bad "HIRNODE_GRAPHS=1 run: rc=$rc $out"
# the rings' copies inside graphs by SM kernels (HIRNODE_P2P_GRAPH_COPY=kernel): the same results
for f in examples/ag_matmul_p2p.hir examples/matmul_reduce_scatter.hir; do
  out=$(HIRNODE_P2P_GRAPH_COPY=kernel HIRNODE_GRAPHS=1 "$cli" run --gpus 4 --iters 3 --delay 20 --check "$f" 2>&1); rc=$?
  [ $rc = 0 ] && echo "$out" | grep -q "^check: passed" && ok || bad "HIRNODE_P2P_GRAPH_COPY=kernel $f: rc=$rc $out"
done
out=$(HIRNODE_GRAPHS=1 "$cli" run --gpus 2 --iters 3 --check examples/chunked_collectives.hir 2>&1); rc=$?
[ $rc = 0 ] && echo "$out" | grep -q "^check: passed" && ok || bad "HIRNODE_GRAPHS=1 chunked_collectives: rc=$rc $out"
"$cli" info 2>&1 | grep -q "HIRNODE_GRAPHS" && ok || bad "info does not list HIRNODE_GRAPHS"
out=$("$cli" bench issue --gpus 2 --n 50 --reps 2 --warmup 1 --markdown 2>&1); rc=$?
[ $rc = 0 ] && echo "$out" | grep -q "replay µs/instr" && ok || bad "bench issue: rc=$rc $out"
# the benches take --devices as run does (two ranks on one device)
out=$("$cli" bench issue --gpus 2 --devices 1,1 --n 20 --reps 2 --warmup 1 2>&1); rc=$?
[ $rc = 0 ] && echo "$out" | grep -qE "^ +2  host +20 " && ok || bad "bench issue --devices 1,1: rc=$rc $out"
out=$("$cli" bench collectives --gpus 2 --devices 0,0 --op allreduce --via "ll oneshot" --min 8K --max 8K 2>&1); rc=$?
[ $rc = 0 ] && echo "$out" | grep -qE "^ +8192 " && ok || bad "bench collectives --devices 0,0: rc=$rc $out"
usage_error "hirnode bench collectives: --devices: 1 ordinal for 2 ranks (--gpus): give one per rank" \
  bench collectives --gpus 2 --devices 0

# an injected fault: exit 1, rank and line named; a bad fault plan: exit 2
out=$("$cli" run --gpus 2 --check --fault 1:31:issue examples/ag_matmul_p2p.hir 2>&1); rc=$?
[ $rc = 1 ] && echo "$out" | grep -q "ag_matmul_p2p.hir:31:3: error: rank 1: linear .*: the device refused the instruction (injected fault)" \
  && ok || bad "--fault: rc=$rc $out"
"$cli" run --gpus 2 --fault 1:31:melt examples/ag_matmul_p2p.hir >/dev/null 2>&1; [ $? = 2 ] && ok || bad "--fault with a bad plan"
# a peer that never arrives (skip) on the latency path and the rings: named
# within the deadline (2 s; generous bound for loaded cores under TSan)
for c in "1:20:skip examples/decode_allreduce_ll.hir rank 0: allgather .*: ll allgather .*: rank 1 never arrived" \
         "1:16:skip examples/allgather_p2p.hir rank 0: group .*: p2p .*rank 1 never reached its side"; do
  set -- $c; f=$1; prog=$2; shift 2
  s0=$(date +%s)
  out=$("$cli" run --backend host --gpus 2 --check --timeout 2 --fault "$f" "$prog" 2>&1); rc=$?
  took=$(( $(date +%s) - s0 ))
  [ $rc = 1 ] && [ $took -lt 12 ] && echo "$out" | grep -q "$*" && ok || bad "--fault $f: rc=$rc after ${took}s: $out"
done
out=$("$cli" bench issue --gpus 2 --n 200 --reps 3 --warmup 1 2>&1); rc=$?
[ $rc = 0 ] && echo "$out" | grep -qE "^ +2  host +200 " && ok || bad "bench issue: rc=$rc $out"
# process mode writes what one process writes: the same outputs, bit for
# bit (reductions in team order), saved by rank 0; a trace per process
mkdir -p "$t/one" "$t/procs"
"$cli" run --gpus 2 --check --save "$t/one" examples/tp_mlp.hir >/dev/null &&
  "$cli" run --procs 2 --check --save "$t/procs" examples/tp_mlp.hir >/dev/null &&
  cmp -s "$t/one/Y.npy" "$t/procs/Y.npy" && ok || bad "--procs 2 --save differs from --gpus 2 --save"
# the peer copies' small allreduce and the rings in one program: at 2
# ranks bit for bit what the rings alone give (a + b either way); checked
# at 4, in processes and in graphs
mkdir -p "$t/small" "$t/rings"
"$cli" run --gpus 2 --check --save "$t/small" tests/programs/p2p_paths.hir >/dev/null &&
  HIRNODE_P2P_SMALL_KIB=0 "$cli" run --gpus 2 --check --save "$t/rings" tests/programs/p2p_paths.hir >/dev/null &&
  cmp -s "$t/small/S.npy" "$t/rings/S.npy" && cmp -s "$t/small/T.npy" "$t/rings/T.npy" && ok ||
  bad "p2p's small allreduce differs from the rings at 2 ranks"
for a in "--gpus 4" "--procs 2" "--procs 4"; do
  for g in 0 1; do
    HIRNODE_GRAPHS=$g "$cli" run $a --check --iters 3 tests/programs/p2p_paths.hir >/dev/null 2>&1 && ok ||
      bad "p2p_paths.hir $a graphs=$g"
  done
done
# a program every rank refuses alike: said once (by rank 0), no grace for ranks that end at once
printf 'output S : f32[8] replicated\noutput T : f32[4] replicated\ncopy S <- T\n' >"$t/mismatch.hir"
out=$("$cli" run --procs 2 --backend host "$t/mismatch.hir" 2>&1); rc=$?
[ $rc = 2 ] && [ "$(echo "$out" | grep -c "mismatch.hir:3:1: error: all ranks: copy S <- T")" = 1 ] &&
  ! echo "$out" | grep -q "to end" && ok || bad "--procs 2 with a program that does not verify: rc=$rc $out"
"$cli" run --procs 2 --iters 2 --trace "$t/ptrace.json" examples/ag_matmul_p2p.hir >/dev/null &&
  [ -s "$t/ptrace.json" ] && [ -s "$t/ptrace.json.rank1" ] &&
  "$cli" trace summary "$t/ptrace.json.rank1" >/dev/null && ok || bad "--procs 2 --trace: a trace per process"
# tracing: run --trace writes a trace, trace summary and trace svg read it
tr="$t/trace.json"
"$cli" run --gpus 4 --iters 2 --delay 20 --trace "$tr" examples/ag_matmul_p2p.hir >/dev/null && [ -s "$tr" ] && ok || bad "run --trace"
if command -v python3 >/dev/null; then
  python3 -c 'import json, sys; d = json.load(open(sys.argv[1])); assert d["otherData"]["ranks"] == 4' "$tr" && ok || bad "the trace is not JSON to python"
fi
out=$("$cli" trace summary "$tr" 2>&1) && echo "$out" | grep -q "^run 1 (the last" && echo "$out" | grep -q "^overlap: [0-9.]*% of the communications' time" \
  && echo "$out" | grep -q "^critical path of run 1: " && echo "$out" | grep -q "^    3  stream 2 " && ok || bad "trace summary: $out"
"$cli" trace summary "$tr" --run all | grep -q "^critical path of run 0: " && ok || bad "trace summary --run all"
# a trace that cannot be written: exit 2, said once, without the runtime's source location
out=$("$cli" run --trace /proc/nope.json examples/allreduce.hir 2>&1); rc=$?
[ $rc = 2 ] && [ "$out" = "hirnode: cannot write the trace to /proc/nope.json: No such file or directory" ] && ok ||
  bad "run --trace /proc/nope.json: rc=$rc $out"
# a group lowered from a pipelined statement is named by it, once (which
# spans the critical path crosses depends on timing: any line may name it)
"$cli" run --gpus 2 --trace "$t/rs.json" examples/matmul_reduce_scatter.hir >/dev/null &&
  out=$("$cli" trace summary "$t/rs.json" --run 0) && echo "$out" | grep -q "reduce_scatter C <- matmul(A, B) pipelined" &&
  ! echo "$out" | grep -q "group {" && ok || bad "trace summary names a lowered group twice: $out"
"$cli" trace svg "$tr" -o "$t/trace.svg" --run 0 >/dev/null && grep -q "overlap [0-9.]*%" "$t/trace.svg" && ok || bad "trace svg"
"$cli" run --gpus 4 --trace "$t/seq.json" examples/ag_matmul_sequential.hir >/dev/null \
  && "$cli" trace svg "$tr" "$t/seq.json" -o "$t/both.svg" >/dev/null && [ "$(grep -c 'overlap' "$t/both.svg")" = 2 ] \
  && ok || bad "trace svg of two traces"
if command -v xmllint >/dev/null; then
  xmllint --noout "$t/trace.svg" "$t/both.svg" && ok || bad "the pictures are not XML to xmllint"
fi
"$cli" trace summary "$t/none.json" >/dev/null 2>&1; [ $? = 2 ] && ok || bad "trace summary of a missing file"
out=$("$cli" trace summary examples/allgather.hir 2>&1); rc=$?
[ $rc = 2 ] && echo "$out" | grep -q "^examples/allgather.hir: error: 1:1: " && ok || bad "trace summary of no JSON: rc=$rc $out"
"$cli" trace svg "$tr" >/dev/null 2>&1; [ $? = 2 ] && ok || bad "trace svg without -o"
"$cli" trace summary "$tr" --run 9 >/dev/null 2>&1; [ $? = 2 ] && ok || bad "trace summary --run out of range"
"$cli" run --gpus 2 --trace "$t/no/such/dir.json" examples/allgather.hir >/dev/null 2>&1; [ $? = 2 ] && ok || bad "run --trace to a bad path"
"$cli" bench collectives --gpus 2 --op allreduce --min 64K --max 64K --iters 2 --reps 1 --warmup 0 --trace "$t/bench.json" >/dev/null \
  && "$cli" trace summary "$t/bench.json" | grep -q "allreduce Y <- X op sum" && ok || bad "bench --trace"
# serving: the runtime's start refused once, with no source location;
# ranks mapped to devices (--devices, hirnode info); memory flat through
# launches and replays of a serving step (hirnode soak: a short run here;
# a planted leak is caught)
out=$("$cli" run --backend cuda --gpus 256 $p 2>&1); rc=$?
[ $rc = 2 ] && [ "$(echo "$out" | grep -c "cannot start 256 ranks")" = 1 ] && ! echo "$out" | grep -qE '[a-z_]+\.c:[0-9]+' \
  && ok || bad "256 ranks on the cuda backend: rc=$rc $out"
usage_error "hirnode run: --devices: 1 ordinal for 2 ranks (--gpus): give one per rank" run --gpus 2 --devices 0 $p
usage_error "--devices: expected an integer from 0 to 4095, not 'x'" run --gpus 2 --devices 0,x $p
out=$("$cli" run --gpus 2 --devices 1,1 --check $p 2>&1); rc=$?
[ $rc = 0 ] && echo "$out" | grep -q "^check: passed" && ok || bad "two ranks on one (emulated) device: rc=$rc $out"
out=$(CUDA_VISIBLE_DEVICES=3,1 "$cli" info --gpus 2 --devices 1,0 2>&1); rc=$?
[ $rc = 0 ] && echo "$out" | grep -q "CUDA_VISIBLE_DEVICES=3,1" && echo "$out" | grep -q "rank 0 -> device 1, rank 1 -> device 0" \
  && ok || bad "info --devices: rc=$rc $out"
for h in --help -h; do
  "$cli" soak $h | grep -q "^usage: hirnode soak" && ok || bad "soak $h"
done
usage_error "--launches: expected an integer" soak --launches 1e6
# (6000 operations: on two loaded cores host RSS wanders by a few hundred
# KiB, up to ~66 bytes an operation here, so this short run allows 200; the
# planted leak below, 400 bytes an operation, is caught at the default 64)
out=$("$cli" soak --backend host --launches 6000 --replays 6000 --warmup 4000 --samples 12 --per-op 200 2>&1); rc=$?
[ $rc = 0 ] && echo "$out" | grep -q "^soak: flat" && echo "$out" | grep -q "^check: ok" && ok || bad "soak: rc=$rc $out"
out=$("$cli" soak --backend host --launches 3000 --replays 0 --warmup 1000 --samples 6 --leak 400 2>&1); rc=$?
[ $rc = 1 ] && echo "$out" | grep -q "host RSS .* GREW" && echo "$out" | grep -q "^soak: memory GREW" && ok || bad "soak --leak: rc=$rc $out"
rm -rf "$t"

echo "examples: $pass passed, $fail failed"
[ $fail = 0 ]
