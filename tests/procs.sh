#!/usr/bin/env bash
# The launcher of process mode (`hirnode run --procs N`, tools/launch.c):
# its usage errors, and with workers that exit, fail, die, stop or hang on
# purpose (HIRNODE_LAUNCH_TEST, a hook for this script only) that each is
# named, the exit code, whose output is shown, that nothing of a run is
# left behind (every case in a session of its own, searched after), that
# SIGINT reaches the workers and that a launcher killed with SIGKILL takes
# its workers with it; then real workers (the runtime across processes):
# a rank killed or stopped mid-run named by the others, a launcher killed
# under real workers, workers whose settings differ.
set -u
cli=${1:-build/hirnode}
prog=examples/ag_linear_bf16.hir
fail=0 pass=0
ok() { pass=$((pass + 1)); }
bad() { echo "FAIL: $*"; fail=$((fail + 1)); }
t=$(mktemp -d)
trap 'rm -rf "$t"' EXIT

# the processes of session $1 that still run (a zombie waits for its reaper only)
left_in() { ps -e -o sid=,pid=,stat= | awk -v s="$1" '$1 == s && $3 !~ /^Z/ { print $2 }'; }

# run_case NAME RC SPEC ARGS...: the launcher as the leader of a new process
# session (setsid) with HIRNODE_LAUNCH_TEST=SPEC; its exit code must be RC
# and no process of that setsid group may be left. Output in $t/out and $t/err, seconds in $secs.
run_case() {
  local name=$1 want=$2 spec=$3 rc start sid left
  shift 3
  rm -f "$t/sid"
  start=$(date +%s.%N)
  HIRNODE_LAUNCH_TEST=$spec setsid sh -c 'echo $$ >"$0"; exec "$@"' "$t/sid" "$cli" run "$@" >"$t/out" 2>"$t/err"
  rc=$?
  secs=$(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN { printf "%.2f", b - a }')
  sid=$(cat "$t/sid")
  [ "$rc" = "$want" ] && ok || { bad "$name: exit $rc, not $want"; cat "$t/out" "$t/err"; }
  left=$(left_in "$sid")
  [ -z "$left" ] && ok || { bad "$name: left running: $left"; kill -9 $left 2>/dev/null; }
  # the rendezvous the launcher made (the test hook names it) is gone
  dir=$(sed -n 's/^launch test: rank 0 (pid [0-9]*) in \(.*\): .*/\1/p' "$t/out")
  if [ -n "$dir" ] && [ "${made_dir:-1}" = 1 ]; then
    [ ! -e "$dir" ] && ok || { bad "$name: $dir is left"; ls -la "$dir"; }
  fi
}
has() { grep -qF -- "$2" "$t/$1" && ok || { bad "$3: no '$2' on $1"; cat "$t/out" "$t/err"; }; }
hasnt() { grep -qF -- "$2" "$t/$1" && { bad "$3: '$2' on $1"; cat "$t/err"; } || ok; }
# true when $1 < $2, decimals both
less() { awk -v a="$1" -v b="$2" 'BEGIN { exit !(a < b) }'; }
took_under() { less "$secs" "$1" && ok || bad "$2: took $secs s (not under $1)"; }

# usage: --gpus and --devices must agree with --procs; --rendezvous wants --procs
for args in "--gpus 2 --procs 3" "--procs 2 --devices 0,1,2" "--rendezvous $t"; do
  "$cli" run $args "$prog" >"$t/out" 2>"$t/err"
  rc=$?
  [ "$rc" = 2 ] && ok || bad "run $args: exit $rc, not 2"
  [ "$(wc -l <"$t/err")" = 2 ] && ok || { bad "run $args: not one error and the usage's place"; cat "$t/err"; }
done
has err "hirnode run: --rendezvous goes with --procs N" "--rendezvous alone"
"$cli" run --gpus 2 --procs 3 "$prog" 2>&1 | grep -qF "hirnode run: --gpus 2 with --procs 3" && ok ||
  bad "--gpus 2 --procs 3: not named"
"$cli" run --procs 0 "$prog" >/dev/null 2>&1; [ $? = 2 ] && ok || bad "--procs 0 accepted"
"$cli" run --procs 257 "$prog" >/dev/null 2>&1; [ $? = 2 ] && ok || bad "--procs 257 accepted"
"$cli" run --procs 2 "$t/missing.hir" >/dev/null 2>"$t/err"; [ $? = 2 ] && ok || bad "a missing program: not 2"
[ "$(grep -c missing.hir "$t/err")" = 1 ] && ok || { bad "a missing program: not said once"; cat "$t/err"; }
HIRNODE_LAUNCH_TEST=2:melt HIRNODE_WORKER=1 HIRNODE_WORLD=3 HIRNODE_RANK=2 "$cli" run --procs 3 "$prog" \
  >/dev/null 2>"$t/err"; [ $? = 2 ] && ok || bad "a bad HIRNODE_LAUNCH_TEST is not refused"
HIRNODE_WORKER=yes "$cli" run --procs 3 "$prog" >/dev/null 2>&1; [ $? = 2 ] && ok || bad "HIRNODE_WORKER=yes taken"
# a worker of a world other than --procs says so
HIRNODE_WORKER=1 HIRNODE_WORLD=4 HIRNODE_RANK=1 "$cli" run --procs 3 "$prog" >/dev/null 2>"$t/err"
[ $? = 2 ] && grep -qF "HIRNODE_WORLD=3" "$t/err" && ok || { bad "a worker of another world"; cat "$t/err"; }

# --rendezvous DIR: must exist, be a directory of this user, not writable
# by everyone without the sticky bit, and short enough for a socket path
touch "$t/file"
mkdir -m 0777 "$t/open"; chmod 0777 "$t/open"
long="$t/$(printf 'd%.0s' $(seq 1 100))"
mkdir -p "$long"
for d in "$t/none:No such file" "$t/file:not a directory" "$t/open:anyone may write to it (mode 777" \
         "$long:too long for the path of a Unix socket"; do
  HIRNODE_LAUNCH_TEST=exit0 "$cli" run --procs 2 --rendezvous "${d%%:*}" "$prog" >"$t/out" 2>"$t/err"
  rc=$?
  [ "$rc" = 2 ] && ok || bad "--rendezvous ${d%%:*}: exit $rc, not 2"
  has err "hirnode run: --rendezvous ${d%%:*}: ${d#*:}" "--rendezvous ${d%%:*}"
  hasnt out "launch test" "--rendezvous ${d%%:*} (a worker started)"
done
if [ "$(id -u)" = 0 ]; then
  mkdir "$t/theirs" && chown nobody "$t/theirs"
  other="$t/theirs"
else
  other=/
fi
"$cli" run --procs 2 --rendezvous "$other" "$prog" >/dev/null 2>"$t/err"
[ $? = 2 ] && grep -qF "not by this user" "$t/err" && ok || { bad "--rendezvous of another user"; cat "$t/err"; }
# a good one (a private one; a shared one with the sticky bit) is used and kept
mkdir -m 0700 "$t/mine"; mkdir "$t/sticky"; chmod 1777 "$t/sticky"
made_dir=0
for d in "$t/mine" "$t/sticky"; do
  run_case "--rendezvous $d" 0 sock --procs 2 --rendezvous "$d" "$prog"
  has out "in $d: sock" "--rendezvous $d"
  [ -d "$d" ] && [ -S "$d/rank-1.sock" ] && ok || bad "--rendezvous $d: not kept as the workers left it"
done
made_dir=1

# a world of one process runs without process mode: the worker is real
run_case "a real worker" 0 "" --procs 1 --check "$prog"
has out "check: passed" "a real worker"
# kill and sigstop are refused where one process holds every rank
run_case "kill in one process" 2 "" --procs 1 --fault 0:9:kill "$prog"
has err "fault '0:9:kill': kill acts on the process of rank 0, and this process holds every rank" \
  "kill in one process"

# every worker ends well: exit 0, only rank 0's output, the others' dropped
run_case "all exit 0" 0 exit0 --procs 4 "$prog"
has out "launch test: rank 0 (pid" "all exit 0"
has err "launch test: rank 0 on stderr" "all exit 0"
hasnt err "rank 1:" "all exit 0"
hasnt out "rank 1" "all exit 0"
# the sockets the ranks leave in the directory the launcher made go with it
run_case "sockets left" 0 sock --procs 3 "$prog"

# one fails: exit 1, its output shown, not the others'
run_case "rank 2 exits 3" 1 exit0,2:exit3 --procs 4 "$prog"
has err "rank 2: launch test: rank 2 on stderr" "rank 2 exits 3"
has err "rank 2: launch test: rank 2 (pid" "rank 2 exits 3"
hasnt err "rank 1:" "rank 2 exits 3"
has err "hirnode: ranks 0, 1, 3 exited with 0; rank 2 exited with 3" "rank 2 exits 3"

# a rank that writes more than the launcher keeps: its first and last lines
run_case "rank 1 spews" 1 exit0,1:spew --procs 2 "$prog"
for line in "rank 1: spew 1 " "rank 1: spew 500 " "rank 1: spew 19000 " "rank 1: spew 20000 " "bytes left out)"; do
  has err "$line" "rank 1 spews"
done
for line in "rank 1: spew 5000 " "rank 1: spew 10000 "; do
  hasnt err "$line" "rank 1 spews"
done
[ "$(grep -c '^rank 1: spew' "$t/err")" -lt 15000 ] && ok || bad "rank 1 spews: kept it all"

# rank 0 fails: everyone's output is shown; all failing alike keeps rank 0's code
run_case "rank 0 exits 1" 1 exit0,0:exit1 --procs 3 "$prog"
has err "rank 1: launch test: rank 1 on stderr" "rank 0 exits 1"
has err "rank 2: launch test: rank 2 on stderr" "rank 0 exits 1"
run_case "all exit 2" 2 exit2 --procs 3 "$prog"
run_case "all exit 4" 4 exit4 --procs 2 "$prog"
run_case "exits 2 and 1" 1 exit2,1:exit1 --procs 2 "$prog"

# a worker killed by a signal is named at once; the others still end
run_case "rank 1 killed" 1 exit0,1:kill9 --procs 3 --timeout 0.5 "$prog"
grep -qE "^hirnode: rank 1 \(pid [0-9]+\) was killed by signal 9 \(Killed\)$" "$t/err" && ok ||
  { bad "rank 1 killed: not named"; cat "$t/err"; }
has err "rank 1: launch test: rank 1 (pid" "rank 1 killed"
took_under 4 "rank 1 killed"

# a stopped worker is named, then killed once the others' grace is over
# (--timeout 0.5: 6 s after the first end), with nothing left behind
run_case "rank 2 stopped" 1 exit0,2:stop --procs 3 --timeout 0.5 "$prog"
grep -qE "^hirnode: rank 2 \(pid [0-9]+\) was stopped by signal 19" "$t/err" && ok ||
  { bad "rank 2 stopped: not named"; cat "$t/err"; }
grep -qE "^hirnode: rank 2 \(pid [0-9]+\) was still stopped 6 s after rank [0-2] (ended|stopped); killed$" \
  "$t/err" && ok || { bad "rank 2 stopped: not killed by name"; cat "$t/err"; }
took_under 11 "rank 2 stopped"
less 5.9 "$secs" && ok || bad "rank 2 stopped: killed after $secs s, before the grace"

# hung workers past the grace: each named, ended by SIGTERM
run_case "ranks 1-2 hung" 1 sleep,0:exit1 --procs 3 --timeout 0.5 "$prog"
for r in 1 2; do
  grep -qE "^hirnode: rank $r \(pid [0-9]+\) did not exit within 6 s after rank 0 ended; killed$" "$t/err" && ok ||
    { bad "rank $r hung: not named"; cat "$t/err"; }
done
has err "hirnode: rank 0 exited with 1; ranks 1, 2 overdue, killed" "ranks 1-2 hung"
grep -qE "^hirnode: rank 0 \(pid [0-9]+\) exited with 1$" "$t/err" && ok ||
  { bad "ranks 1-2 hung: rank 0's failure not said at once"; cat "$t/err"; }
has err "hirnode: the other ranks have 6 s to end (twice the timeout and 5 s)" "ranks 1-2 hung"
took_under 10 "ranks 1-2 hung"
# ... and by SIGKILL 2 s later when they do not take SIGTERM (rank 0 among them)
run_case "ranks deaf to SIGTERM" 1 hang,1:exit4 --procs 3 --timeout 0.5 "$prog"
for r in 0 2; do
  grep -qE "^hirnode: rank $r \(pid [0-9]+\) did not exit within 6 s after rank 1 ended; killed$" "$t/err" && ok ||
    { bad "rank $r deaf: not named"; cat "$t/err"; }
done
took_under 12 "ranks deaf to SIGTERM"
less 7.9 "$secs" && ok || bad "ranks deaf to SIGTERM: killed after $secs s, before SIGKILL's time"

# SIGINT to the launcher reaches the workers; it then ends by SIGINT itself
# (exit 130 through sh), the directory it made removed. (A command put in
# the background by a script starts with SIGINT ignored, which the
# launcher would respect: env gives it back its default.)
rm -f "$t/sid"
HIRNODE_LAUNCH_TEST=sleep setsid sh -c 'echo $$ >"$0"; exec env --default-signal=INT "$@"' "$t/sid" "$cli" run \
  --procs 3 "$prog" >"$t/out" 2>"$t/err" &
job=$!
for i in $(seq 1 300); do [ -s "$t/sid" ] && grep -q 'launch test: rank 0' "$t/out" && break; sleep 0.1; done
sid=$(cat "$t/sid")
for i in $(seq 1 300); do [ "$(left_in "$sid" | wc -l)" = 4 ] && break; sleep 0.1; done
[ "$(left_in "$sid" | wc -l)" = 4 ] && ok || bad "SIGINT: not a launcher and 3 workers"
kill -INT "$sid"
wait "$job"
rc=$?
[ "$rc" = 130 ] && ok || { bad "SIGINT: exit $rc, not 130"; cat "$t/err"; }
has err "hirnode: SIGINT: passed on to the workers" "SIGINT"
[ -z "$(left_in "$sid")" ] && ok || bad "SIGINT: left running"
dir=$(sed -n 's/^launch test: rank 0 (pid [0-9]*) in \(.*\): .*/\1/p' "$t/out")
[ -n "$dir" ] && [ ! -e "$dir" ] && ok || bad "SIGINT: the rendezvous '$dir' is left"

# started ignoring SIGHUP (nohup), the launcher does not pass it on: the
# workers stay until SIGTERM
rm -f "$t/sid"
HIRNODE_LAUNCH_TEST=sleep setsid sh -c 'echo $$ >"$0"; exec nohup "$@"' "$t/sid" "$cli" run --procs 2 "$prog" \
  >"$t/out" 2>"$t/err" &
job=$!
for i in $(seq 1 300); do [ -s "$t/sid" ] && [ "$(left_in "$(cat "$t/sid")" | wc -l)" = 3 ] && break; sleep 0.1; done
sid=$(cat "$t/sid")
kill -HUP "$sid"
sleep 0.5
[ "$(left_in "$sid" | wc -l)" = 3 ] && ok || bad "nohup: SIGHUP was passed on"
kill -TERM "$sid"
wait "$job"
[ -z "$(left_in "$sid")" ] && ok || bad "nohup: left running after SIGTERM"

# a file the launcher does not know in the directory it made: it is left,
# and said so
HIRNODE_LAUNCH_TEST=sleep "$cli" run --procs 2 "$prog" >"$t/out" 2>"$t/err" &
job=$!
for i in $(seq 1 300); do grep -q 'launch test: rank 0' "$t/out" 2>/dev/null && break; sleep 0.1; done
dir=$(sed -n 's/^launch test: rank 0 (pid [0-9]*) in \(.*\): .*/\1/p' "$t/out")
if [ -d "$dir" ]; then
  touch "$dir/other"
  kill -TERM "$job"
  wait "$job"
  has err "hirnode: left the rendezvous directory $dir" "a stranger in the rendezvous"
  [ -e "$dir/other" ] && ok || bad "a stranger in the rendezvous: removed"
  rm -rf "$dir"
else
  bad "a stranger in the rendezvous: the workers did not start in 30 s"
  kill -TERM "$job"
  wait "$job"
fi

# the launcher killed with SIGKILL: its workers (deaf to SIGTERM) die within 2 s
rm -f "$t/sid" "$t/mine/rank-"*.sock
HIRNODE_LAUNCH_TEST=hang setsid sh -c 'echo $$ >"$0"; exec "$@"' "$t/sid" "$cli" run --procs 4 --rendezvous \
  "$t/mine" "$prog" >"$t/out" 2>"$t/err" &
job=$!
for i in $(seq 1 300); do [ -s "$t/sid" ] && [ "$(left_in "$(cat "$t/sid")" | wc -l)" = 5 ] && break; sleep 0.1; done
sid=$(cat "$t/sid")
[ "$(left_in "$sid" | wc -l)" = 5 ] && ok || bad "kill -9: not a launcher and 4 workers"
kill -9 "$sid"
wait "$job" 2>/dev/null
for i in $(seq 1 20); do [ -z "$(left_in "$sid")" ] && break; sleep 0.1; done
left=$(left_in "$sid")
[ -z "$left" ] && ok || { bad "kill -9 of the launcher: left running after 2 s: $left"; kill -9 $left 2>/dev/null; }

# ---- real workers: the runtime across processes ----
p2p=examples/ag_matmul_p2p.hir
# every example's --check passes through the launcher (examples.sh runs them all)
run_case "real workers" 0 "" --procs 2 --check --iters 2 "$p2p"
has out "run $p2p: 2 ranks (a process each) on the host backend" "real workers"
has out "check: passed (2 comparisons)" "real workers"
# a rank killed mid-run (its own SIGKILL at line 25): the others name it at
# once, the launcher names the signal, nothing is left
run_case "fault kill" 1 "" --procs 2 --check --timeout 20 --fault 1:25:kill "$p2p"
grep -qE "error: rank 1: its process \(pid [0-9]+\) died without leaving the world" "$t/err" && ok ||
  { bad "fault kill: rank 0 does not name rank 1"; cat "$t/err"; }
grep -qE "^hirnode: rank 1 \(pid [0-9]+\) was killed by signal 9 \(Killed\)$" "$t/err" && ok ||
  { bad "fault kill: the launcher does not name the signal"; cat "$t/err"; }
took_under 8 "fault kill (timeout 20)"
run_case "fault kill at 4" 1 "" --procs 4 --check --timeout 20 --fault 2:25:kill "$p2p"
grep -qE "error: rank 2: its process \(pid [0-9]+\) died without leaving the world" "$t/err" && ok ||
  { bad "fault kill at 4: rank 2 not named"; cat "$t/err"; }
took_under 8 "fault kill at 4 (timeout 20)"
# a rank that stops (SIGSTOP at line 25): named as stopped at the deadline,
# killed by the launcher after the grace, nothing left
run_case "fault sigstop" 1 "" --procs 4 --check --timeout 2 --fault 2:25:sigstop "$p2p"
grep -qE "rank 2 \(pid [0-9]+\) (is stopped|was stopped by signal 19)" "$t/err" && ok ||
  { bad "fault sigstop: rank 2 not named stopped"; cat "$t/err"; }
took_under 25 "fault sigstop (timeout 2)"
# a peer that never arrives (skip: rank 1 leaves out a collective) on the
# latency path and on the rings across processes: named by what waited,
# within the deadline (2 s; generous bound for loaded cores under TSan)
run_case "fault skip via ll" 1 "" --procs 2 --check --timeout 2 --fault 1:20:skip examples/decode_allreduce_ll.hir
has err "rank 0: allgather Z <- G[0] via ll: ll allgather (one-shot, generation 7): rank 1 never arrived" "fault skip via ll"
took_under 12 "fault skip via ll (timeout 2)"
run_case "fault skip via p2p" 1 "" --procs 2 --check --timeout 2 --fault 1:16:skip examples/allgather_p2p.hir
has err "error: rank 0: group { ... }: a peer never signalled" "fault skip via p2p"
took_under 12 "fault skip via p2p (timeout 2)"
# a worker killed from outside during a long run (rank 1 sleeps 8 s at line 25)
# (4 processes, 1 launcher: 5 in the setsid group)
rm -f "$t/sid"
setsid sh -c 'echo $$ >"$0"; exec "$@"' "$t/sid" "$cli" run --procs 4 --timeout 30 --fault 1:25:slow:8000 "$p2p" \
  >"$t/out" 2>"$t/err" &
job=$!
for i in $(seq 1 300); do [ -s "$t/sid" ] && [ "$(left_in "$(cat "$t/sid")" | wc -l)" = 5 ] && break; sleep 0.1; done
sid=$(cat "$t/sid")
sleep 1
victim=$(ps -e -o sid=,pid=,args= | awk -v s="$sid" '$1 == s { print $2 }' | while read -r p; do
  tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null | grep -qx HIRNODE_RANK=1 && echo "$p"; done | head -1)
start=$(date +%s.%N)
[ -n "$victim" ] && kill -9 "$victim"
wait "$job"
rc=$?
secs=$(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN { printf "%.2f", b - a }')
[ "$rc" = 1 ] && ok || { bad "kill -9 of rank 1: exit $rc, not 1"; cat "$t/err"; }
grep -qF "error: rank 1: its process (pid $victim) died without leaving the world" "$t/err" && ok ||
  { bad "kill -9 of rank 1 ($victim): not named"; cat "$t/err"; }
took_under 5 "kill -9 of rank 1"
[ -z "$(left_in "$sid")" ] && ok || bad "kill -9 of rank 1: left running"
# the launcher killed with SIGKILL while real workers run: they go within 2 s
rm -f "$t/sid"
setsid sh -c 'echo $$ >"$0"; exec "$@"' "$t/sid" "$cli" run --procs 2 --timeout 30 --fault 0:25:slow:8000 "$p2p" \
  >"$t/out" 2>"$t/err" &
job=$!
for i in $(seq 1 300); do [ -s "$t/sid" ] && [ "$(left_in "$(cat "$t/sid")" | wc -l)" = 3 ] && break; sleep 0.1; done
sid=$(cat "$t/sid")
sleep 0.5
kill -9 "$sid"
wait "$job" 2>/dev/null
for i in $(seq 1 20); do [ -z "$(left_in "$sid")" ] && break; sleep 0.1; done
left=$(left_in "$sid")
[ -z "$left" ] && ok || { bad "kill -9 of a launcher of real workers: left: $left"; kill -9 $left 2>/dev/null; }
# workers whose settings differ: named, both exit 2 (by hand, without the launcher)
mkdir -m 0700 "$t/rv"
for r in 0 1; do
  lanes=1; [ "$r" = 1 ] && lanes=2
  HIRNODE_P2P_LANES=$lanes HIRNODE_WORLD=2 HIRNODE_RANK=$r HIRNODE_RENDEZVOUS="$t/rv" HIRNODE_TIMEOUT=20 \
    "$cli" run --gpus 1 "$p2p" >"$t/out$r" 2>"$t/err$r" &
done
wait
cat "$t/err0" "$t/err1" >"$t/err"
grep -qF "rank 1 differs from rank 0" "$t/err" && grep -qF "HIRNODE_P2P_LANES=2" "$t/err" && ok ||
  { bad "differing settings: not named"; cat "$t/err"; }
[ -z "$(ls "$t/rv")" ] && ok || bad "differing settings: the socket is left"

# workers started as torchrun starts them (RANK-like variables, MASTER_ADDR and
# MASTER_PORT, no directory): they meet through rank 0's store on
# MASTER_PORT + 1, and the directory rank 0 made goes with it
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
mkdir -m 0700 "$t/tmp"
for r in 0 1; do
  TMPDIR="$t/tmp" HIRNODE_WORLD=2 HIRNODE_RANK=$r MASTER_ADDR=127.0.0.1 MASTER_PORT=$((port - 1)) HIRNODE_TIMEOUT=20 \
    "$cli" run --gpus 1 --check "$p2p" >"$t/out$r" 2>"$t/err$r" &
done
wait
grep -qF "check: passed" "$t/out0" && grep -qF "check: passed" "$t/out1" && ok ||
  { bad "workers meeting through MASTER_ADDR: not passed"; cat "$t/err0" "$t/err1"; }
[ -z "$(ls "$t/tmp")" ] && ok || bad "workers meeting through MASTER_ADDR: left $(ls "$t/tmp")"
# hirnode run as torchrun starts it (RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR,
# MASTER_PORT; no --gpus): one rank of that world each
for r in 0 1; do
  TMPDIR="$t/tmp" RANK=$r WORLD_SIZE=2 LOCAL_RANK=$r LOCAL_WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=$((port - 1)) \
    HIRNODE_TIMEOUT=20 "$cli" run --check "$p2p" >"$t/out$r" 2>"$t/err$r" &
done
wait
grep -qF "2 ranks (a process each)" "$t/out0" && grep -qF "check: passed" "$t/out0" && grep -qF "check: passed" "$t/out1" &&
  ok || { bad "hirnode run under a launcher's RANK and WORLD_SIZE: not passed"; cat "$t/err0" "$t/err1"; }
# --gpus says its own ranks: the launcher's world is not joined; a bad RANK is named
RANK=1 WORLD_SIZE=2 "$cli" run --gpus 2 --check "$p2p" >"$t/out" 2>"$t/err" && grep -qF "check: passed" "$t/out" && ok ||
  bad "--gpus 2 under a launcher's variables: not run alone"
RANK=x WORLD_SIZE=2 "$cli" run "$p2p" >/dev/null 2>"$t/err"
[ $? = 2 ] && grep -qF "started by a launcher (WORLD_SIZE=2, RANK=x" "$t/err" && ok || { bad "RANK=x: not named"; cat "$t/err"; }
# rank 1 alone: no store answers; named within its deadline
HIRNODE_WORLD=2 HIRNODE_RANK=1 HIRNODE_STORE=127.0.0.1:$port HIRNODE_TIMEOUT=1 "$cli" run --gpus 1 "$p2p" \
  >/dev/null 2>"$t/err"
grep -qF "store 127.0.0.1:$port: no server answered before the deadline" "$t/err" && ok ||
  { bad "a store nobody serves: not named"; cat "$t/err"; }

echo "procs.sh: $pass passed, $fail failed"
[ "$fail" = 0 ]
