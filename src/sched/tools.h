/* What the tools (tools/: the hirnode command, its benchmarks and trace
 * commands) use besides the public headers — the one internal header a
 * tool includes: the --check driver, the settings, the scheduler's
 * lowering and cost model, the machine profile and its tuner, the dry-run
 * verifier, parameters, fault plans,
 * timed runs (their slowest rank across processes), trace files, the latency path's algorithms, raw NCCL for
 * the collectives benchmark's baseline, and, for the issue benchmark's
 * raw baseline, the rank threads, their doorbells and device tables and
 * the replay paths. */
#ifndef HN_SCHED_TOOLS_H
#define HN_SCHED_TOOLS_H

#include "../comm/comm.h"
#include "../core/ll.h"
#include "check.h"
#include "config.h"
#include "cost.h"
#include "fault_inject.h"
#include "graph.h"
#include "hirnode/runtime.h"
#include "lower.h"
#include "params.h"
#include "pool.h"
#include "procs.h"
#include "profile.h"
#include "rank.h"
#include "trace.h"
#include "tune.h"
#include "verify_run.h"

#endif
