/* What the tools (tools/: the hirnode command, its benchmarks and trace
 * commands) use besides the public headers — the one internal header a
 * tool includes: the --check driver, the settings, the scheduler's
 * lowering and cost model, the machine profile and its tuner, the dry-run
 * verifier, parameters, fault plans,
 * timed runs (their slowest rank across processes), trace files, the latency path's algorithms, raw NCCL for
 * the collectives benchmark's baseline, and, for the issue benchmark's
 * raw baseline, the rank threads, their doorbells and device tables and
 * the replay paths; and the backend a configuration takes. */
#ifndef HN_SCHED_TOOLS_H
#define HN_SCHED_TOOLS_H

#include "../comm/comm.h"
#include "../comm/ll/ll.h"
#include "backend.h"
#include "check.h"
#include "../base/settings.h"
#include "../model/cost.h"
#include "../exec/fault_inject.h"
#include "graph.h"
#include "hirnode/runtime.h"
#include "../sched/lower.h"
#include "../ir/params.h"
#include "../ranks/pool.h"
#include "procs.h"
#include "../model/profile.h"
#include "../ranks/rank.h"
#include "../trace/trace.h"
#include "tune.h"
#include "../exec/verify_run.h"

#endif
