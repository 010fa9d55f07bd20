/* What the tools (tools/: the hirnode command, its benchmarks, launcher
 * and trace commands) use of src/ besides the public headers: the one
 * internal header a tool includes (`make check-layers` checks it). Each
 * header below is here for what a tool uses of it, and no other is. */
#ifndef HN_RUNTIME_TOOLS_H
#define HN_RUNTIME_TOOLS_H

#include "hirnode/runtime.h"

#include "../base/util.h"         /* strict parsers, string buffers, hn_now, hn_median, HN_MIN/MAX/ARRAY_LEN */
#include "../base/dtype.h"        /* element types by name (the benchmarks) */
#include "../base/settings.h"     /* the settings: hirnode info, --set, HN_MAX_STREAMS */
#include "../ir/ir.h"             /* via and strategy kinds and names */
#include "../ir/params.h"         /* hn_params_resolve (hirnode's io shapes) */
#include "../device/device.h"     /* the device tables: backends by name, device counts, the raw baselines */
#include "../comm/comm.h"         /* collective names; raw NCCL, the collectives benchmark's baseline */
#include "../comm/ll/ll.h"        /* the latency path's algorithms (HN_LL_TWOSHOT) */
#include "../model/cost.h"        /* the cost model: via auto, pipelines, gemm seconds */
#include "../model/profile.h"     /* the machine profile: read, describe, write */
#include "../ranks/pool.h"        /* rank threads, jobs and doorbells (the issue benchmark's raw baseline) */
#include "../ranks/rank.h"        /* timed runs */
#include "../trace/trace.h"       /* trace files read back: spans, busy time, overlap, critical path, pictures */
#include "../exec/fault_inject.h" /* hn_runtime_set_faults (--fault) */
#include "backend.h"               /* the backend a configuration takes (hn_runtime_pick_backend) */
#include "../exec/verify_run.h"   /* hn_verify_run (the dry runs of hirnode verify) */
#include "../sched/lower.h"       /* hn_sched_lower (hirnode lower, the overlap benchmark) */
#include "check.h"                /* the --check driver */
#include "graph.h"                /* the replay paths (the issue benchmark) */
#include "procs.h"                /* hn_procs_max: the slowest rank across processes */
#include "tune.h"                 /* hirnode tune: measurements and fit */

#endif
