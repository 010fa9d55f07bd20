#!/bin/sh
# The house rules of src/, checked from the object files' symbols (run by
# `make check-layers` and `make test`):
#   (a) the calls among src/sched's objects form no cycle (lower.c and its
#       lower_*.c family count as one node);
#   (b) nor do the calls among src/core's objects, nor src/comm's;
#   (c) no file under src/ is longer than 900 lines (parse.c and
#       device_host.c, one concern each, excepted);
#   (d) no src/sched file calls a file of a higher layer than its own, in
#       the layer order that docs/ARCHITECTURE.md draws (the block after
#       the line "<!-- sched layers -->"); every src/sched source is in it.
# A call is an undefined symbol of one object that another defines (`nm`):
# a function, or data such as a backend's table (a registry that lists
# the tables sits above the backends). A layer below reaches one above
# only through a pointer it is handed (a hook), which no symbol shows.
# usage: tests/check_layers.sh [--doc ARCHITECTURE.md] [OBJECT.o ...]
#   (the library's objects, as `make check-layers` passes them; without
#   any, every object under build/obj/src)
set -u
doc=docs/ARCHITECTURE.md
if [ "${1:-}" = --doc ]; then
    doc=$2
    shift 2
fi
if [ $# -eq 0 ]; then
    [ -d build/obj/src ] || { echo "check-layers: no objects under build/obj/src (build first)" >&2; exit 2; }
    set -- $(find build/obj/src -name '*.o' | sort)
fi
command -v nm >/dev/null || { echo "check-layers: nm not found (binutils)" >&2; exit 2; }
max_lines=900
tmp=$(mktemp -d) || exit 2
trap 'rm -rf "$tmp"' EXIT

# every object's global symbols: "<source> <U|D> <symbol>"; the source is
# the object's path after its build's obj/, with its .c or .cu
for o in "$@"; do
    base=src/${o#*/obj/src/}
    base=${base%.o}
    if [ -f "$base.c" ]; then src=$base.c; elif [ -f "$base.cu" ]; then src=$base.cu; else continue; fi  # a stale object
    nm -P -g "$o" 2>/dev/null | awk -v src="$src" '
        $2 == "U" { print src, "U", $1; next }
        $2 ~ /^[TDBRCGS]$/ { print src, "D", $1 }'
done >"$tmp/syms"

# the layers of src/sched: "<layer> <file>"
awk '
    /<!-- sched layers -->/ { armed = 1; next }
    armed && /^```/ { if (inside) exit; inside = 1; next }
    !inside { next }
    {
        line = $0
        gsub(/[^A-Za-z0-9_. ]/, " ", line)
        n = split(line, w, " ")
        i = 1
        if (n >= 1 && w[1] ~ /^[0-9]+$/) { layer = w[1]; i = 2 }
        for (; i <= n && w[i] ~ /^[a-z0-9_]+\.c$/; i++)
            if (layer != "")
                print layer, w[i]
    }' "$doc" >"$tmp/layers"

find src -type f | sort | xargs wc -l | awk '$2 != "total" { print $1, $2 }' >"$tmp/lines"
{ ls src/base/settings.c src/ir/params.c; find src/model src/ranks src/trace src/exec src/sched src/runtime -name '*.c'; } | sort >"$tmp/sched_srcs"

awk -v max_lines="$max_lines" '
# ---- inputs ----
FILENAME ~ /syms$/ {
    if ($2 == "D") { if (!($3 in def)) def[$3] = $1 }
    else { nu++; usrc[nu] = $1; usym[nu] = $3 }
    next
}
FILENAME ~ /layers$/ { layer[$2] = $1 + 0; listed[$2] = 1; next }
FILENAME ~ /lines$/ { lines[$2] = $1 + 0; next }
FILENAME ~ /sched_srcs$/ { b = $1; sub(/.*\//, "", b); srcs[b] = 1; path[b] = $1; next }

function folder(f) { sub(/\/[^\/]*$/, "", f); return f }
function base(f) { sub(/.*\//, "", f); return f }
function node(f) { if (f ~ /^src\/sched\/lower(_[a-z0-9_]+)?\.c$/) return "src/sched/lower.c"; return f }
function short(f) { sub(/^src\/[a-z]+\//, "", f); return f }
function nice(v) { return v == "src/sched/lower.c" ? "lower.c (with lower_*.c)" : short(v) }

# Tarjan: strongly connected components of the graph of folder `fd`
function strong(v,   k, w) {
    idx[v] = lo[v] = ++counter
    stack[++sp] = v; onstack[v] = 1
    for (k = 1; k <= nout[v]; k++) {
        w = out[v, k]
        if (!(w in idx)) { strong(w); if (lo[w] < lo[v]) lo[v] = lo[w] }
        else if (onstack[w] && idx[w] < lo[v]) lo[v] = idx[w]
    }
    if (lo[v] == idx[v]) {
        ncomp++; size[ncomp] = 0
        do { w = stack[sp--]; onstack[w] = 0; comp[w] = ncomp; size[ncomp]++ } while (w != v)
    }
}

# one cycle through v inside its component, as "a -> b (sym) -> ... -> a"
function cycle_from(v,   path, seen, cur, k, w, found, steps) {
    path = nice(v); cur = v; delete seen; seen[v] = 1; steps = 0
    while (steps++ < 1000) {
        found = ""
        for (k = 1; k <= nout[cur]; k++) {
            w = out[cur, k]
            if (comp[w] != comp[v]) continue
            if (w == v) { return path " -> " nice(v) " (" why[cur, w] ")" }
            if (!(w in seen) && found == "") found = w
        }
        if (found == "") {  # a dead end in the component: take any edge on
            for (k = 1; k <= nout[cur]; k++) if (comp[out[cur, k]] == comp[v]) { found = out[cur, k]; break }
        }
        path = path " -> " nice(found) " (" why[cur, found] ")"
        seen[found] = 1; cur = found
    }
    return path " ..."
}

END {
    bad = 0
    # ---- the call graph, per folder ----
    for (i = 1; i <= nu; i++) {
        s = usym[i]
        if (!(s in def)) continue
        a = node(usrc[i]); b = node(def[s])
        if (a == b) continue
        # (d) layers of src/sched
        if ((base(a) in layer) && (base(b) in layer) && layer[base(a)] < layer[base(b)] && !((a, b) in up)) {
            up[a, b] = 1
            printf "check-layers: FAIL (d): %s (layer %d) calls %s (layer %d), a higher layer: %s\n",
                short(usrc[i]), layer[base(a)], short(def[s]), layer[base(b)], s
            bad++
        }
        if (folder(a) != folder(b)) continue
        if (!((a, b) in why)) { why[a, b] = s; nout[a]++; out[a, nout[a]] = b; nodes[a] = 1; nodes[b] = 1 }
        else if (length(why[a, b]) < 60) why[a, b] = why[a, b] ", " s
    }
    # (a), (b): cycles in src/sched and src/core
    for (v in nodes) if (!(v in idx) && folder(v) ~ /^src\//) strong(v)
    for (c = 1; c <= ncomp; c++) {
        if (size[c] < 2) continue
        members = ""
        for (v in comp) if (comp[v] == c) { members = members (members == "" ? "" : ", ") nice(v); first = v }
        printf "check-layers: FAIL (%s): the calls among %s objects form a cycle of %d files: %s\n",
            folder(first) == "src/sched" ? "a" : "b", folder(first), size[c], members
        printf "check-layers:   for instance %s\n", cycle_from(first)
        bad++
    }
    # (c) file lengths
    for (f in lines) {
        if (f == "src/ir/parse.c" || f == "src/device/device_host.c") continue
        if (lines[f] > max_lines) {
            printf "check-layers: FAIL (c): %s has %d lines (at most %d)\n", f, lines[f], max_lines
            bad++
        }
    }
    # (d) every sched source has a layer, every layer file exists
    for (f in srcs) if (!(f in listed)) {
        printf "check-layers: FAIL (d): %s is in no layer of the picture in the architecture document\n", f
        bad++
    }
    for (f in listed) if (!(f in srcs)) {
        printf "check-layers: FAIL (d): the layer picture names %s, which does not exist\n", f
        bad++
    }
    if (bad == 0) print "check-layers: ok (no cycle in src/sched, src/core or src/comm, files within " max_lines " lines, src/sched calls only downward)"
    else printf "check-layers: %d problem(s)\n", bad
    exit bad > 0
}' "$tmp/syms" "$tmp/layers" "$tmp/lines" "$tmp/sched_srcs"
