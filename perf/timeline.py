#!/usr/bin/env python3
"""What a CUPTI timeline (perf/cupti_timeline.c) says about the graphs a
program replayed: per device and graph, every node of a replay in order,
with its median duration and the median gap before it (from the end of
the node before it on that device: negative when it started first, as a
kernel launched early by programmatic dependent launch does), over all
replays but the first; then the replay's span and the period of the nodes
that match --per (per call = span / their number).

  python3 perf/timeline.py timeline.csv [--per REGEX] [--nodes N]

With --api (a timeline taken with HN_TIMELINE_API=1): the host's CUDA
calls per process and function (count, median and total time), then the
eager work per device (nodes outside graphs: count and median duration
per kernel, copy or memset), the slowest first; --top bounds each list.

  python3 perf/timeline.py --api timeline.csv [--top N]
"""
import argparse
import csv
import re
import statistics
import sys
from collections import defaultdict


def short(name, width=48):
    name = re.sub(r"\(.*", "", name)
    name = re.sub(r"void |_Z\d+", "", name)
    return name if len(name) <= width else name[: width - 1] + "…"


def replays(records):
    """Splits one (device, graph)'s records, sorted by start, into replays:
    a replay ends where a node id comes round again."""
    out, cur, seen = [], [], set()
    for r in records:
        if r["node"] in seen:
            out.append(cur)
            cur, seen = [], set()
        cur.append(r)
        seen.add(r["node"])
    if cur:
        out.append(cur)
    return out


def api_summary(path, top):
    """The --api report: host calls per process, eager work per device."""
    calls, work = defaultdict(list), defaultdict(list)
    with open(path) as f:
        for r in csv.DictReader(f):
            d = int(r["end"]) - int(r["start"])
            if r["kind"] in ("runtime", "driver"):
                calls[(int(r["device"]), r["kind"] + " " + r["name"])].append(d)
            elif r["graph"] in ("0", ""):
                what = short(r["name"]) if r["kind"] == "kernel" else r["name"]
                work[(int(r["device"]), r["kind"] + " " + what)].append(d)
    if not calls and not work:
        print("no API records and no eager work in the timeline")
        return 1
    for title, table, who in (("host calls", calls, "process"), ("eager work", work, "device")):
        for key in sorted({k[0] for k in table}):
            rows = sorted(((n, v) for (p, n), v in table.items() if p == key), key=lambda x: -sum(x[1]))
            print(f"\n## {title}, {who} {key}")
            print("| what | count | median (ns) | total (µs) |")
            print("|---|---:|---:|---:|")
            for n, v in rows[:top]:
                print(f"| {n} | {len(v)} | {statistics.median(v):.0f} | {sum(v) / 1e3:.1f} |")
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("csv")
    ap.add_argument("--per", default="ll_|ncclDevKernel|AllReduce",
                    help="nodes whose number divides the span (default: latency-path and NCCL kernels)")
    ap.add_argument("--nodes", type=int, default=12, help="nodes listed from the start and the end of a replay")
    ap.add_argument("--api", action="store_true", help="host calls and eager work instead of graphs")
    ap.add_argument("--top", type=int, default=15, help="--api: rows per list")
    args = ap.parse_args()
    if args.api:
        return api_summary(args.csv, args.top)
    by = defaultdict(list)
    with open(args.csv) as f:
        for r in csv.DictReader(f):
            if r["graph"] in ("0", ""):
                continue
            for k in ("start", "end", "blocks"):
                r[k] = int(r[k])
            by[(int(r["device"]), int(r["graph"]))].append(r)
    if not by:
        print("no graph nodes in the timeline")
        return 1
    per = re.compile(args.per)
    for (dev, graph), recs in sorted(by.items()):
        recs.sort(key=lambda r: r["start"])
        reps = replays(recs)
        if len(reps) > 1:
            reps = reps[1:]  # the first replay warms up
        shape = [len(r) for r in reps]
        n = statistics.mode(shape)
        reps = [r for r in reps if len(r) == n]
        spans = [r[-1]["end"] - r[0]["start"] for r in reps]
        calls = sum(1 for x in reps[0] if per.search(x["name"]))
        print(f"\n## device {dev}, graph {graph}: {n} nodes, {len(reps)} replays, span median "
              f"{statistics.median(spans) / 1e3:.2f} µs" +
              (f", {calls} calls matching /{args.per}/: {statistics.median(spans) / calls / 1e3:.3f} µs per call"
               if calls else ""))
        print("| # | node | blocks | duration (ns) | gap before (ns) |")
        print("|---:|---|---:|---:|---:|")
        rows = list(range(n))
        if n > 2 * args.nodes:
            rows = rows[: args.nodes] + [None] + rows[-args.nodes:]
        for i in rows:
            if i is None:
                print("| … | | | | |")
                continue
            dur = statistics.median(r[i]["end"] - r[i]["start"] for r in reps)
            gap = statistics.median(r[i]["start"] - r[i - 1]["end"] for r in reps) if i > 0 else 0
            x = reps[0][i]
            print(f"| {i} | {x['kind']} {short(x['name'])} | {x['blocks']} | {dur:.0f} | {gap:.0f} |")
        sel = [i for i in range(n) if per.search(reps[0][i]["name"])]
        if len(sel) > 1:
            durs = [r[i]["end"] - r[i]["start"] for r in reps for i in sel]
            gaps = [r[i]["start"] - r[j]["end"] for r in reps for j, i in zip(sel, sel[1:])]
            starts = [r[i]["start"] - r[j]["start"] for r in reps for j, i in zip(sel, sel[1:])]
            print(f"\nmatching nodes: duration median {statistics.median(durs):.0f} ns, gap from the one before "
                  f"{statistics.median(gaps):.0f} ns, start to start {statistics.median(starts):.0f} ns")
    return 0


if __name__ == "__main__":
    sys.exit(main())
