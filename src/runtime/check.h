/* The --check driver (check.c): global inputs (random or .npy), shards,
 * runs, gathers outputs and compares them with the reference block. From
 * the caller's thread of the runtime. */
#ifndef HN_SCHED_CHECK_H
#define HN_SCHED_CHECK_H

#include <stdio.h>

#include "hirnode/runtime.h"
#include "../base/util.h"

typedef struct hn_check_opts {
    int iters;
    uint64_t seed;
    int check;
    const char *load_dir, *save_dir;
    int noverrides;
    const char *const *names;
    const int64_t *values;
    FILE *out; /* report; NULL: quiet */
} hn_check_opts;

typedef struct hn_check_result {
    int checked, passed;
    int64_t left; /* output elements left at the poison, all outputs */
    double worst_rel_l2;
    double median_s;
} hn_check_result;

/* HN_OK when the program ran (see res->passed); HN_ERR_VERIFY, HN_ERR_INVALID
 * or HN_ERR_IO for a bad program or bad input (diag says why); other errors
 * for failed runs (hn_runtime_error says which rank and instruction). */
hn_status_t hn_check_run(hn_runtime *rt, const hn_program *p, const hn_check_opts *o,
                         hn_check_result *res, hn_strbuf *diag);

#endif
