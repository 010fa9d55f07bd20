#!/usr/bin/env bash
# GPU validation, one command for the device machine: build with CUDA, run
# every CUnit suite on the CUDA backend, every example with --check at 1, 2
# and 4 GPUs (as many as there are), and compute-sanitizer memcheck on one
# example. CUnit comes from .deps/*.deb when the machine has none
# (`apt-get download libcunit1 libcunit1-dev` into .deps beforehand).
# Usage: tools/gpu-check.sh [OUTDIR]
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
export HIRNODE_TIMEOUT=${HIRNODE_TIMEOUT:-30}
timeout "${SUITE_TIMEOUT:-400}" build/hn_tests --backend cuda > "$out/suites-cuda.log" 2>&1 || fail=1
grep -E "hn_tests:|tests  |asserts|Failed|failures" "$out/suites-cuda.log"
pass=0 bad=0
for g in 1 2 4 8; do
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
if command -v compute-sanitizer >/dev/null; then
  timeout 120 compute-sanitizer --tool memcheck --error-exitcode 3 \
    build/hirnode run --backend cuda --gpus 1 --check examples/ag_matmul_p2p.hir > "$out/memcheck.log" 2>&1
  echo "compute-sanitizer memcheck: exit $? ($(grep -c 'ERROR SUMMARY: 0 errors' "$out/memcheck.log") clean summaries)"
fi
exit $fail
