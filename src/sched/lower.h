/* The scheduler's lowering pass (lower.c, with lower_build.c,
 * lower_allgather.c, lower_reduce.c, lower_collective.c;
 * docs/SCHEDULER.md). Pure: IR to IR, no device, any thread. */
#ifndef HN_SCHED_LOWER_PUBLIC_H
#define HN_SCHED_LOWER_PUBLIC_H

#include "../ir/ir.h"

struct hn_cost_profile;

/* Lowers the pipelined statements and stream-parallel loops of `src` for
 * one configuration (world, nstreams, parameter values) into the plain
 * instructions they stand for: a dry run of `src` reads its operands'
 * shapes, the cost model settles every `auto` from the machine profile
 * `prof` (NULL: the built-in default; cost.h), and each generated
 * instruction carries its statement's line, column and text. The result
 * passes the static verifier; *out is written only on success.
 * Diagnostics (file:line:col: error: ...) into diag; the plan chosen for
 * each statement, one line each, into notes (may be NULL). Across nodes
 * (nodes > 1: the statements' teams span them) `auto` goes through NCCL,
 * the only communicator between nodes. */
hn_status_t hn_sched_lower(const hn_program *src, int world, int nodes, int nstreams, const int64_t *params,
                           const struct hn_cost_profile *prof, hn_program **out, hn_strbuf *diag, hn_strbuf *notes);

#endif
