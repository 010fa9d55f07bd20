/* Preparing configurations for runs (prepare.c). From the caller's
 * thread, with no launch in flight that the preparation could disturb. */
#ifndef HN_SCHED_PREPARE_H
#define HN_SCHED_PREPARE_H

#include "bind.h"
#include "../ranks/runtime_int.h"

/* Prepares p for these parameters unless prepared lately: lowers it,
 * dry-runs every rank (verify_run.c), makes and joins the teams the dry
 * run saw, makes every rank's pool streams and sizes its allocation cache
 * (giving other programs' buffers back once when memory runs short).
 * Diagnostics into diag. */
hn_status_t hn_runtime_prepare(hn_runtime *rt, const hn_program *p, const int64_t *params,
                               hn_strbuf *diag);
/* 1 when runs of p with these parameters need no preparation: prepared
 * lately, and not given up since (hn_prepare_release). */
int hn_runtime_prepared(hn_runtime *rt, const hn_program *p, const int64_t *params);

/* Parameters and bindings of a run or launch, resolved; the program
 * prepared (verified, lowered, teams and buffers made) for them. */
typedef struct hn_resolved {
    int64_t *params;
    void ***io;  /* [k][rank]: b.ptr */
    hn_bound b;  /* the bindings' pointers and sizes */
} hn_resolved;
/* Parameters resolved, bindings matched by name, the configuration
 * prepared, then every binding checked on every rank (bind.c). On failure
 * the error text says why and rs holds nothing. */
hn_status_t hn_runtime_resolve(hn_runtime *rt, const hn_program *p, const hn_run_args *args, hn_resolved *rs);
void hn_resolved_free(hn_resolved *rs);

/* Device memory held for the cached buffers of every program but `keep`
 * (NULL: of every program), given back when an allocation runs out: the
 * launches in flight finish first, and the programs given up are prepared
 * anew at their next run (their graphs unusable). The number of blocks
 * freed (0: nothing to give back, or a launch failed). */
int hn_prepare_release(hn_runtime *rt, const hn_program *keep);

#endif
