#!/usr/bin/env python3
"""The house rules of src/ (run by `make check-layers`; `make test` runs it
and its own tests, `make check-layers-test`).

The layers come from one place: the ```text block after the line
`<!-- layers -->` in docs/ARCHITECTURE.md. It lists them bottom first, one
layer a line; a line names folders or files (paths from the repository's
root; `#` starts a comment). A folder stands for its own files, not its
subfolders (each subfolder is named itself); a file named on its own is
taken out of its folder's layer. Folders on one line are siblings: a
layer uses its own folder and the layers below, never a sibling or a
layer above. A layer below reaches one above only through a pointer it is
handed (a hook), which neither an include nor a symbol shows. "A uses B"
is allowed when B is on a lower layer, or on A's layer in A's own folder.

(a) Includes. Every `#include "..."` of every source under src/ (.c .h .cu
    .cuh .def), resolved against the including file's folder, names a file
    under src/ that the including file may use. `#include "hirnode/..."`
    (the public headers) is fine anywhere.

(b) Calls. In the library's objects (`nm -P -g`), a symbol that one object
    uses and another defines, a function or data such as a backend's
    table, is a use of the defining source by the using one: allowed as
    for includes, across folders too.

(c) No cycle. The calls among the sources of one folder form no cycle
    (Tarjan's strongly connected components); src/sched/lower.c and its
    lower_*.c family count as one node.

(d) Sizes. No file under src/ is longer than 900 lines (src/ir/parse.c and
    src/device/device_host.c, one concern each, excepted), and no folder's
    own files (not its subfolders') add up to more than 6000 lines.

(e) The picture is whole. Every source under src/ is in exactly one layer
    (its own entry, else its folder's), no entry is named twice, and
    every entry names a file or folder that exists.

(f) The tools. tools/*.c and tools/*.h include only public headers
    (`hirnode/...`), the tools' own headers (tools/*.h) and one internal
    header, src/runtime/tools.h, which declares what they use of src/.

Errors name the file (and line, for includes), the symbol (for calls) and
both layers; a passing run prints one `check-layers: ok (...)` line.

usage: tests/check_layers.py [--root DIR] [--doc FILE] [OBJECT.o ...]
         the objects as `make check-layers` passes them (the library's);
         without any, every object under ROOT/build/obj/src
       tests/check_layers.py --self-test [OBJECT.o ...]
         the check's own tests: the real tree passes, and copies of it
         (in a temporary folder) with a planted violation each fail
"""

import os
import re
import shutil
import subprocess
import sys
import tempfile

MARKER = "<!-- layers -->"
MAX_FILE_LINES = 900
MAX_FOLDER_LINES = 6000
LONG_FILES = {"src/ir/parse.c", "src/device/device_host.c"}
SOURCE_EXTS = (".c", ".h", ".cu", ".cuh", ".def")
TOOLS_HEADER = "src/runtime/tools.h"

INCLUDE_RE = re.compile(r'^\s*#\s*include\s*"([^"]+)"')


def folder(path):
    return os.path.dirname(path)


def node(path):
    """The node of a source in the call graph of its folder."""
    if re.fullmatch(r"src/sched/lower(_[a-z0-9_]+)?\.c", path):
        return "src/sched/lower.c"
    return path


def nice(n):
    return "lower.c (with lower_*.c)" if n == "src/sched/lower.c" else n


def count_lines(path):
    with open(path, "rb") as f:
        return f.read().count(b"\n")


# ---- the picture ----

def read_layers(doc):
    """[(line number in doc, [entry, ...]), ...], bottom first; or an error."""
    try:
        with open(doc, encoding="utf-8") as f:
            text = f.read().splitlines()
    except OSError as e:
        return None, "cannot read %s: %s" % (doc, e.strerror)
    try:
        i = next(k for k, line in enumerate(text) if line.strip() == MARKER)
    except StopIteration:
        return None, "%s has no line %s" % (doc, MARKER)
    i += 1
    while i < len(text) and text[i].strip() == "":
        i += 1
    if i >= len(text) or text[i].strip() != "```text":
        return None, "%s: the line after %s opens no ```text block" % (doc, MARKER)
    layers = []
    for k in range(i + 1, len(text)):
        line = text[k]
        if line.strip().startswith("```"):
            if not layers:
                return None, "%s: the block after %s lists no layer" % (doc, MARKER)
            return layers, None
        words = line.split("#", 1)[0].split()
        if words:
            layers.append((k + 1, [w.rstrip("/") for w in words]))
    return None, "%s: the block after %s is not closed" % (doc, MARKER)


class Picture:
    def __init__(self, root, layers):
        self.root = root
        self.layers = layers
        self.entry_layer = {}  # entry -> layer number (1 = bottom)
        self.twice = []
        for n, (_, entries) in enumerate(layers, 1):
            for e in entries:
                if e in self.entry_layer:
                    self.twice.append((e, self.entry_layer[e], n))
                else:
                    self.entry_layer[e] = n

    def layer_of(self, path):
        """(layer, entry) of a file under src/, or (None, None)."""
        if path in self.entry_layer:
            return self.entry_layer[path], path
        d = folder(path)
        if d in self.entry_layer:
            return self.entry_layer[d], d
        return None, None

    def name(self, path):
        """'src/base (layer 1)': the entry a file under src/ is in."""
        n, entry = self.layer_of(path)
        return "%s (layer %d)" % (entry, n)


def allowed(pic, a, b):
    """May file a (under src/) use file b (under src/)? (ok, why not)."""
    la, _ = pic.layer_of(a)
    lb, _ = pic.layer_of(b)
    if la is None or lb is None:
        return True, None  # rule (e) says so
    if lb < la or (lb == la and folder(a) == folder(b)):
        return True, None
    if lb == la:
        return False, "a sibling on the same layer"
    return False, "a higher layer"


# ---- the tree ----

def walk(root, top):
    """Every file under root/top, as paths from root, sorted."""
    out = []
    for d, dirs, files in os.walk(os.path.join(root, top)):
        dirs.sort()
        for f in files:
            out.append(os.path.relpath(os.path.join(d, f), root))
    return sorted(out)


def includes(root, path):
    """[(line, text, resolved path from root), ...] of the file's quoted includes."""
    out = []
    with open(os.path.join(root, path), encoding="utf-8", errors="replace") as f:
        for k, line in enumerate(f, 1):
            m = INCLUDE_RE.match(line)
            if m:
                target = os.path.normpath(os.path.join(folder(path), m.group(1)))
                out.append((k, m.group(1), target))
    return out


_nm_cache = {}


def symbols(obj):
    """(defined, undefined) global symbols of an object (nm -P -g)."""
    st = os.stat(obj)
    key = (os.path.realpath(obj), st.st_mtime_ns, st.st_size)
    if key not in _nm_cache:
        r = subprocess.run(["nm", "-P", "-g", obj], capture_output=True, text=True)
        if r.returncode != 0:
            raise RuntimeError("nm %s: %s" % (obj, r.stderr.strip()))
        defs, undefs = [], []
        for line in r.stdout.splitlines():
            w = line.split()
            if len(w) < 2:
                continue
            if w[1] == "U":
                undefs.append(w[0])
            elif w[1] in "TDBRCGS":  # strong definitions (weak ones may be anywhere)
                defs.append(w[0])
        _nm_cache[key] = (defs, undefs)
    return _nm_cache[key]


def source_of(root, obj):
    """The source under root/src of an object .../obj/src/X.o, or None (stale)."""
    o = obj.replace(os.sep, "/")
    k = o.rfind("/obj/src/")
    if k < 0:
        return None
    base = "src/" + o[k + len("/obj/src/"):-len(".o")]
    for ext in (".c", ".cu"):
        if os.path.isfile(os.path.join(root, base + ext)):
            return base + ext
    return None


def strong_components(nodes, out):
    """Tarjan: the strongly connected components (lists) of the graph."""
    index, low, on, stack, comps = {}, {}, set(), [], []
    counter = [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(out.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            comps.append(sorted(comp))

    for v in sorted(nodes):
        if v not in index:
            visit(v)
    return comps


def cycle_in(comp, out, why):
    """One cycle through comp[0] inside comp: 'a -> b (sym) -> ... -> a'."""
    members, start = set(comp), comp[0]
    # breadth first from start back to start, inside the component
    prev, frontier = {start: None}, [start]
    while frontier:
        nxt = []
        for v in frontier:
            for w in sorted(out.get(v, ())):
                if w not in members:
                    continue
                if w == start:
                    path = [v]
                    while prev[path[-1]] is not None:
                        path.append(prev[path[-1]])
                    path.reverse()
                    path.append(start)
                    return nice(path[0]) + "".join(
                        " -> %s (%s)" % (nice(path[i + 1]), why[path[i], path[i + 1]][0])
                        for i in range(len(path) - 1))
                if w not in prev:
                    prev[w] = v
                    nxt.append(w)
        frontier = nxt
    return ""


# ---- the check ----

def check(root, doc, objects):
    """(problems, summary): the lines of each failure, and the ok line's text."""
    problems = []

    def fail(rule, text):
        problems.append("check-layers: FAIL (%s): %s" % (rule, text))

    layers, err = read_layers(doc)
    if layers is None:
        fail("e", err)
        return problems, None
    pic = Picture(root, layers)
    files = walk(root, "src")
    sources = [f for f in files if f.endswith(SOURCE_EXTS)]

    # (e) the picture is whole
    for e, first, second in pic.twice:
        fail("e", "the picture names %s twice (layers %d and %d)" % (e, first, second))
    for lineno, entries in layers:
        for e in entries:
            if not e.startswith("src/") or not os.path.exists(os.path.join(root, e)):
                fail("e", "%s:%d: the picture names %s, which does not exist under src/" % (doc, lineno, e))
    for f in sources:
        if pic.layer_of(f)[0] is None:
            fail("e", "%s is in no layer of the picture (%s, after %s): name it or its folder there"
                 % (f, doc, MARKER))

    # (a) includes
    nincludes = 0
    for f in sources:
        for line, text, target in includes(root, f):
            if text.startswith("hirnode/"):
                continue
            if not target.startswith("src/") or not os.path.isfile(os.path.join(root, target)):
                fail("a", "%s:%d includes \"%s\", which is no file under src/ next to it" % (f, line, text))
                continue
            nincludes += 1
            ok, why = allowed(pic, f, target)
            if ok:
                continue
            fail("a", "%s:%d includes %s: %s may not use %s, %s"
                 % (f, line, target, pic.name(f), pic.name(target), why))

    # (b) calls between objects, and the graph for (c)
    owner, uses = {}, []
    for o in objects:
        src = source_of(root, o)
        if src is None:
            continue  # a stale object (its source is gone)
        defs, undefs = symbols(o)
        for s in defs:
            owner.setdefault(s, src)
        uses.extend((src, s) for s in undefs)
    edges = {}  # (user, definer) -> [symbol, ...]
    for a, s in uses:
        b = owner.get(s)
        if b is not None and b != a:
            edges.setdefault((a, b), []).append(s)
    for (a, b), syms in sorted(edges.items()):
        ok, why = allowed(pic, a, b)
        if ok:
            continue
        more = " and %d more" % (len(syms) - 3) if len(syms) > 3 else ""
        fail("b", "%s uses %s%s of %s: %s may not use %s, %s"
             % (a, ", ".join(sorted(syms)[:3]), more, b,
                pic.name(a), pic.name(b), why))

    # (c) no call cycle within a folder
    out, why_edge, nodes = {}, {}, set()
    for (a, b), syms in edges.items():
        na, nb = node(a), node(b)
        if na == nb or folder(na) != folder(nb):
            continue
        out.setdefault(na, set()).add(nb)
        why_edge.setdefault((na, nb), []).extend(sorted(syms))
        nodes.update((na, nb))
    ncycles = 0
    for comp in strong_components(nodes, out):
        if len(comp) < 2:
            continue
        ncycles += 1
        fail("c", "the calls among %s's objects form a cycle of %d files: %s; for instance %s"
             % (folder(comp[0]), len(comp), ", ".join(nice(v) for v in comp), cycle_in(comp, out, why_edge)))

    # (d) sizes
    per_folder = {}
    for f in files:
        n = count_lines(os.path.join(root, f))
        per_folder[folder(f)] = per_folder.get(folder(f), 0) + n
        if n > MAX_FILE_LINES and f not in LONG_FILES:
            fail("d", "%s has %d lines (at most %d)" % (f, n, MAX_FILE_LINES))
    for d, n in sorted(per_folder.items()):
        if n > MAX_FOLDER_LINES:
            fail("d", "%s's own files have %d lines (at most %d a folder)" % (d, n, MAX_FOLDER_LINES))

    # (f) the tools include only public headers, their own and tools.h
    for f in walk(root, "tools"):
        if not f.endswith((".c", ".h")) or folder(f) != "tools":
            continue
        for line, text, target in includes(root, f):
            if text.startswith("hirnode/") or target == TOOLS_HEADER or \
                    (folder(target) == "tools" and target.endswith(".h")):
                continue
            fail("f", "%s:%d includes %s: a tool includes only hirnode/*.h, tools/*.h and %s"
                 % (f, line, target, TOOLS_HEADER))

    ncalls = sum(1 for a, b in edges if folder(a) != folder(b))
    summary = ("%d layers; %d includes and %d cross-folder uses between objects go down; no call cycle "
               "within a folder; files within %d lines, folders within %d; tools include public headers "
               "and %s only" % (len(layers), nincludes, ncalls, MAX_FILE_LINES, MAX_FOLDER_LINES, TOOLS_HEADER))
    return problems, summary


def run(root, doc, objects):
    problems, summary = check(root, doc, objects)
    for p in problems:
        print(p)
    if problems:
        print("check-layers: %d problem(s)" % len(problems))
        return 1
    print("check-layers: ok (%s)" % summary)
    return 0


# ---- the check's own tests ----

def self_test(objects):
    """The real tree passes; copies of it with a planted violation fail."""
    cc = os.environ.get("CC") or "cc"
    results = []

    def expect(name, problems, rule, *words):
        hits = [p for p in problems if p.startswith("check-layers: FAIL (%s)" % rule) and all(w in p for w in words)]
        ok = len(hits) > 0 if rule else not problems
        results.append(ok)
        print("check-layers-test: %s: %s" % ("ok" if ok else "FAILED", name))
        if not ok:
            for p in problems or ["(the check found nothing)"]:
                print("    " + p)

    problems, _ = check(".", "docs/ARCHITECTURE.md", objects)
    expect("the real tree passes", problems, None)

    with tempfile.TemporaryDirectory(prefix="check-layers-") as tmp:
        def tree(name):
            t = os.path.join(tmp, name)
            for d in ("src", "tools", "docs"):
                shutil.copytree(d, os.path.join(t, d))
            # the real objects, mapped to the copy's sources by their paths under obj/src
            objs = []
            for o in objects:
                rel = o.replace(os.sep, "/")
                k = rel.rfind("/obj/src/")
                if k >= 0:
                    dst = os.path.join(t, "build/obj/src", rel[k + len("/obj/src/"):])
                    os.makedirs(os.path.dirname(dst), exist_ok=True)
                    os.symlink(os.path.abspath(o), dst)
                    objs.append(dst)
            return t, objs

        def append(t, path, text):
            with open(os.path.join(t, path), "a") as f:
                f.write(text)

        def planted_object(t, objs, path, text):
            """A source of the copy, compiled into its build/obj."""
            with open(os.path.join(t, path), "w") as f:
                f.write(text)
            o = os.path.join(t, "build/obj", path[:-2] + ".o")
            os.makedirs(os.path.dirname(o), exist_ok=True)
            subprocess.run([cc, "-c", "-o", o, os.path.join(t, path)], check=True)
            objs.append(o)

        doc = lambda t: os.path.join(t, "docs/ARCHITECTURE.md")

        t, objs = tree("upward-include")
        append(t, "src/base/util.c", '#include "../runtime/run.h"\n')
        expect("a src/base file including a src/runtime header fails", check(t, doc(t), objs)[0],
               "a", "src/base/util.c:", "src/runtime/run.h", "src/base (layer", "src/runtime (layer", "a higher layer")

        t, objs = tree("sibling-include")
        append(t, "src/comm/ll/ll_host.c", '#include "../p2p/comm_p2p_int.h"\n')
        expect("src/comm/ll including a src/comm/p2p header fails", check(t, doc(t), objs)[0],
               "a", "src/comm/ll/ll_host.c:", "src/comm/p2p/comm_p2p_int.h", "src/comm/ll (layer",
               "src/comm/p2p (layer", "a sibling")

        t, objs = tree("upward-call")
        planted_object(t, objs, "src/runtime/planted_high.c", "int hn_planted_high(void);\n"
                       "int hn_planted_high(void) { return 1; }\n")
        planted_object(t, objs, "src/base/planted_low.c", "int hn_planted_high(void);\n"
                       "int hn_planted_low(void);\n"
                       "int hn_planted_low(void) { return hn_planted_high(); }\n")
        expect("a src/base object calling a src/runtime object fails", check(t, doc(t), objs)[0],
               "b", "src/base/planted_low.c", "hn_planted_high", "src/runtime/planted_high.c", "src/base (layer",
               "src/runtime (layer", "a higher layer")

        t, objs = tree("cycle")
        planted_object(t, objs, "src/world/planted_a.c", "int hn_planted_b(int);\nint hn_planted_a(int);\n"
                       "int hn_planted_a(int n) { return n ? hn_planted_b(n - 1) : 0; }\n")
        planted_object(t, objs, "src/world/planted_b.c", "int hn_planted_a(int);\nint hn_planted_b(int);\n"
                       "int hn_planted_b(int n) { return n ? hn_planted_a(n - 1) : 0; }\n")
        expect("a call cycle within src/world fails", check(t, doc(t), objs)[0],
               "c", "src/world", "hn_planted_a", "hn_planted_b")

        t, objs = tree("long-file")
        append(t, "src/world/world.c", "\n" * MAX_FILE_LINES)
        expect("a file over %d lines fails" % MAX_FILE_LINES, check(t, doc(t), objs)[0], "d", "src/world/world.c")

        t, objs = tree("unlisted")
        os.makedirs(os.path.join(t, "src/planted"))
        append(t, "src/planted/x.c", "int hn_planted_x;\n")
        expect("a folder in no layer fails", check(t, doc(t), objs)[0], "e", "src/planted/x.c")

        t, objs = tree("missing")
        shutil.rmtree(os.path.join(t, "src/sched"))
        expect("a layer naming what does not exist fails", check(t, doc(t), [])[0], "e", "src/sched")

        t, objs = tree("tool-include")
        append(t, "tools/options.c", '#include "../src/base/util.h"\n')
        expect("a tool including an internal header other than tools.h fails", check(t, doc(t), objs)[0],
               "f", "tools/options.c:", "src/base/util.h")

    failed = results.count(False)
    print("check-layers-test: %s (%d of %d)" % ("ok" if not failed else "FAILED", len(results) - failed,
                                                len(results)))
    return 1 if failed else 0


def main(argv):
    root, doc, test = ".", None, False
    args = list(argv)
    while args and args[0].startswith("--"):
        a = args.pop(0)
        if a == "--self-test":
            test = True
        elif a in ("--root", "--doc") and args:
            if a == "--root":
                root = args.pop(0)
            else:
                doc = args.pop(0)
        else:
            print("usage:" + __doc__.split("usage:")[1].rstrip(), file=sys.stderr)
            return 2
    if shutil.which("nm") is None:
        print("check-layers: nm not found (binutils)", file=sys.stderr)
        return 2
    objects = args
    if not objects:
        obj_dir = os.path.join(root, "build/obj/src")
        if not os.path.isdir(obj_dir):
            print("check-layers: no objects under %s (build first)" % obj_dir, file=sys.stderr)
            return 2
        objects = sorted(os.path.join(d, f) for d, _, fs in os.walk(obj_dir) for f in fs if f.endswith(".o"))
    if test:
        return self_test(objects)
    return run(root, doc or os.path.join(root, "docs/ARCHITECTURE.md"), objects)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
