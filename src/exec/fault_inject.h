/* Injected faults (fault_inject.c): the plan of a runtime, and what the
 * evaluator calls before it issues an instruction of a real run. */
#ifndef HN_SCHED_FAULT_INJECT_H
#define HN_SCHED_FAULT_INJECT_H

#include "../ranks/runtime_int.h"

typedef struct hn_exec hn_exec; /* the evaluator's state of a rank (eval.h) */

/* Replaces the injected faults (spec as HIRNODE_FAULT; NULL or "" none);
 * HN_ERR_INVALID with err set for a bad spec or a rank the runtime does
 * not have. Between runs only. */
hn_status_t hn_runtime_set_faults(hn_runtime *rt, const char *spec, hn_strbuf *err);

/* Whether every injected fault can act on program p, before it runs: its
 * line holds an instruction of p's body (a comm fault a communication, an
 * oom fault an alloc or a statement the scheduler lowers); else
 * HN_ERR_INVALID with a line into err naming the lines that exist. */
hn_status_t hn_faults_check_program(const hn_runtime *rt, const hn_program *p, hn_strbuf *err);

/* Sets off the faults of this rank that match instruction `in` (its line;
 * its occurrence counted in x->fault_seen), on the rank's thread before
 * `in` is issued. HN_OK: issue it (perhaps after a fault was set off
 * beside it), unless x->fault_skip was set (a skip fault: the rank goes on
 * as if it had issued it, its peers wait for it in vain); otherwise it is not issued and msg says why (empty: the rank
 * was held until the run's abort, no error of its own). */
hn_status_t hn_faults_set_off(hn_exec *x, const hn_instr *in, char *msg, size_t cap);

/* Whether a skip fault of the plan names this rank: a graph is captured
 * whole (skip faults do not fire in a capture), and such a rank does not
 * launch its part of any replay while the plan holds, so its peers' parts
 * wait for it in vain (on the caller's or the rank's thread). */
int hn_faults_skip_replay(hn_runtime *rt, int rank);

#endif
