/* Static verifier: names, kinds and dtypes, independent of parameter values
 * and of the number of ranks (the dry run in src/sched checks the rest). */
#ifndef HN_VERIFY_H
#define HN_VERIFY_H

#include "ir.h"

/* Appends every error found as `file:line:col: error: ...` lines to diag;
 * HN_ERR_VERIFY if there was any. */
hn_status_t hn_verify_static(const hn_program *p, hn_strbuf *diag);

#endif
