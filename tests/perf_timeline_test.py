#!/usr/bin/env python3
"""perf/timeline.py on a timeline made up here: two devices, a graph of
five latency-path kernels and an epoch kernel replayed four times (the
first replay is left out as warm-up), kernels launched early (negative
gaps), an eager kernel outside the graph ignored. Exits non-zero on the
first thing it does not find."""
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
TOOL = os.path.join(HERE, "..", "perf", "timeline.py")


def main():
    rows = ["kind,device,stream,graph,node,start,end,blocks,name",
            "kernel,0,7,0,0,10,20,1,_Z5eagerv"]
    t = 1000
    for rep in range(4):
        for dev in (0, 1):
            at = t + (20000 if rep == 0 else 0)  # the first replay: slower, left out
            for i in range(5):
                rows.append(f"kernel,{dev},7,3,{100 + i},{at},{at + 6000},4,_Z8ll_shortI13__nv_bfloat16Lb0EEv10hn_ll_args")
                at += 4000  # each starts 2 us before the one before it ends
            rows.append(f"memset,{dev},7,3,200,{at + 2000},{at + 2500},0,16 bytes")
        t += 100000
    with tempfile.NamedTemporaryFile("w", suffix=".csv", delete=False) as f:
        f.write("\n".join(rows) + "\n")
        path = f.name
    try:
        out = subprocess.run([sys.executable, TOOL, path, "--nodes", "2"], capture_output=True, text=True,
                             check=True).stdout
    finally:
        os.unlink(path)
    want = ["## device 0, graph 3: 6 nodes, 3 replays", "## device 1, graph 3: 6 nodes, 3 replays",
            "5 calls matching", "| 1 | kernel ll_shortI13__nv_bfloat16Lb0EEv10hn_ll_args | 4 | 6000 | -2000 |",
            "duration median 6000 ns, gap from the one before -2000 ns, start to start 4000 ns"]
    # a replay spans the first kernel's start to the memset's end: 5 x 4000 + 2000 + 500 ns, over 5 calls
    want += ["span median 22.50 µs", "4.500 µs per call", "| 5 | memset 16 bytes | 0 | 500 | 0 |"]
    for w in want:
        if w not in out:
            print(f"perf/timeline.py: '{w}' not in its output:\n{out}", file=sys.stderr)
            return 1
    if "eager" in out:
        print("perf/timeline.py: a kernel outside any graph was listed", file=sys.stderr)
        return 1
    print("perf/timeline.py: the made-up timeline read as made")
    return 0


if __name__ == "__main__":
    sys.exit(main())
