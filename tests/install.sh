#!/usr/bin/env bash
# make install into a temporary prefix: headers, libhirnode.so (soname) and
# .a, hirnode.pc, the CLI; only the public API's hn_* symbols exported;
# examples/embed/serve.c, server.c and workers.c built with pkg-config and run (host
# backend), and
# README's embedding commands run as written; make uninstall leaves nothing
# behind.
set -u
fail=0 pass=0
ok() { pass=$((pass + 1)); }
bad() { echo "FAIL: $*"; fail=$((fail + 1)); }
prefix=$(mktemp -d)
make -s install PREFIX="$prefix" >/dev/null || { echo "FAIL: make install"; exit 1; }
lib="$prefix/lib"
[ -f "$prefix/include/hirnode/runtime.h" ] && [ -f "$lib/libhirnode.a" ] && [ -x "$prefix/bin/hirnode" ] && ok || bad "installed files"
[ "$(readelf -d "$lib/libhirnode.so" | sed -n 's/.*SONAME.*\[\(.*\)\]/\1/p')" = "libhirnode.so.0.$(sed -n 's/^#define HN_VERSION_MINOR //p' include/hirnode/hirnode.h)" ] && ok || bad "soname"
# exported: exactly the functions the public headers declare
declared=$(grep -ohE '\bhn_[a-z0-9_]+\(' "$prefix"/include/hirnode/*.h | tr -d '(' | sort -u)
exported=$(nm -D --defined-only "$lib/libhirnode.so" | awk '$2 == "T" {print $3}' | sort -u)
if [ "$declared" = "$exported" ]; then ok; else
  bad "exports differ from the headers: $(diff <(echo "$declared") <(echo "$exported") | grep '^[<>]' | tr '\n' ' ')"; fi
export PKG_CONFIG_PATH="$lib/pkgconfig"
[ "$(pkg-config --modversion hirnode)" = "$(build/hirnode info | sed -n 's/^hirnode \([0-9.]*\).*/\1/p')" ] && ok || bad "pkg-config version"
if cc -std=c11 -Wall -Wextra -Werror -O2 examples/embed/serve.c $(pkg-config --cflags --libs hirnode) -lm -o "$prefix/serve" 2>"$prefix/cc.log"; then ok
else bad "the embedding example does not build against the installed library: $(cat "$prefix/cc.log")"; fi
out=$(LD_LIBRARY_PATH="$lib" HIRNODE_BACKEND=host "$prefix/serve" 300 2 2>&1); rc=$?
[ $rc = 0 ] && echo "$out" | grep -q "^check: ok" && ok || bad "serve: rc=$rc $out"
echo "$out" | sed -n 's/^/  /p' | head -2
# the server-shaped example: io list, its own buffers, capture, rebinds
if cc -std=c11 -Wall -Wextra -Werror -O2 examples/embed/server.c $(pkg-config --cflags --libs hirnode) -lm -o "$prefix/server" 2>"$prefix/cc.log"; then ok
else bad "the server example does not build against the installed library: $(cat "$prefix/cc.log")"; fi
out=$(LD_LIBRARY_PATH="$lib" HIRNODE_BACKEND=host "$prefix/server" 2 16 2>&1); rc=$?
[ $rc = 0 ] && echo "$out" | grep -q "^check: ok" && echo "$out" | grep -q "^a short buffer: invalid argument: .*binding 'X' on rank 1: 4096 bytes needed (f32\[32, 32\]), 4092 given" \
  && ok || bad "server: rc=$rc $out"
echo "$out" | grep "rebind took" | sed 's/^/  /'
# a worker process per rank, each embedding one rank of a world of processes
if cc -std=c11 -Wall -Wextra -Werror -O2 examples/embed/workers.c $(pkg-config --cflags --libs hirnode) -lm -o "$prefix/workers" 2>"$prefix/cc.log"; then ok
else bad "the workers example does not build against the installed library: $(cat "$prefix/cc.log")"; fi
for n in 2 4; do
  out=$(LD_LIBRARY_PATH="$lib" HIRNODE_BACKEND=host "$prefix/workers" "$n" 30 2>&1); rc=$?
  [ $rc = 0 ] && echo "$out" | grep -q "^check: ok ($n workers)" && [ "$(echo "$out" | grep -c ': ok$')" = "$n" ] \
    && ok || bad "workers $n: rc=$rc $out"
done
# README's embedding commands as they are written there, HOME in a
# temporary folder (what they install and build goes there and is removed)
home=$(mktemp -d)
cmds=$(sed -n '/^<!-- embedding commands -->$/,/^```$/p' README.md | sed '1,2d;$d')
[ "$(echo "$cmds" | grep -c .)" = 4 ] && ok || bad "README's embedding commands not found: $cmds"
out=$(HOME="$home" HIRNODE_BACKEND=host bash -euo pipefail -c "$cmds" 2>&1); rc=$?
[ $rc = 0 ] && echo "$out" | grep -q "^check: ok" && ok || bad "README's embedding commands: rc=$rc $(echo "$out" | tail -5)"
HOME="$home" make -s uninstall PREFIX="$home/hirnode" >/dev/null
rm -f serve
rm -rf "$home"
make -s uninstall PREFIX="$prefix" >/dev/null
rm -f "$prefix/serve" "$prefix/server" "$prefix/workers" "$prefix/cc.log"
[ -z "$(find "$prefix" -mindepth 1)" ] && ok || bad "uninstall left $(find "$prefix" -mindepth 1 | head -5)"
rm -rf "$prefix"
echo "install: $pass passed, $fail failed"
[ $fail = 0 ]
