/* Dynamic verification (verify_run.c): a dry run of every rank for one
 * configuration, then the matching of their communications. Pure: no
 * runtime, any thread. */
#ifndef HN_SCHED_VERIFY_RUN_H
#define HN_SCHED_VERIFY_RUN_H

#include "comm_log.h"

/* Dry-runs p on every rank (shapes, ranges, teams, peers) and, once
 * every rank's body passes, the reference block on rank 0; then checks
 * that each team's members issue the same collectives in the same order
 * and every send meets its receive, and plays the posts of sends and
 * receives to find cycles that would hang. Diagnostics are appended to
 * diag, all at once. logs: world entries filled with each rank's records
 * (the caller frees them: hn_comm_logs_free), or NULL. */
hn_status_t hn_verify_run(const hn_program *p, int world, int nstreams, const int64_t *params,
                          hn_strbuf *diag, hn_comm_log *logs);

#endif
