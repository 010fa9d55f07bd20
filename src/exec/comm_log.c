/* A dry run's records (comm_log.h): appended by the evaluator as it plays
 * a rank, read by the verifier, the preparation of runs and the
 * scheduler. */
#include <string.h>

#include "comm_log.h"

hn_status_t hn_comm_log_add(hn_comm_log *l, const hn_comm_rec *rec)
{
    if (hn_grow((void **)&l->recs, &l->cap, l->n, sizeof(*l->recs)) != 0)
        return HN_ERR_NOMEM;
    l->recs[l->n++] = *rec;
    return HN_OK;
}

hn_status_t hn_comm_log_add_alloc(hn_comm_log *l, int instr, int occurrence, size_t bytes)
{
    if (hn_grow((void **)&l->allocs, &l->allocs_cap, l->nallocs, sizeof(*l->allocs)) != 0)
        return HN_ERR_NOMEM;
    l->allocs[l->nallocs].instr = instr;
    l->allocs[l->nallocs].occurrence = occurrence;
    l->allocs[l->nallocs].bytes = bytes;
    l->nallocs++;
    return HN_OK;
}

hn_status_t hn_comm_log_add_pipe(hn_comm_log *l, const hn_pipe_rec *rec)
{
    if (hn_grow((void **)&l->pipes, &l->pipes_cap, l->npipes, sizeof(*l->pipes)) != 0)
        return HN_ERR_NOMEM;
    l->pipes[l->npipes++] = *rec;
    return HN_OK;
}

/* The pool holds each team as its size, then its members (the offset is
 * that of the first member); looking through the distinct teams rather
 * than the records keeps logging linear in the communications. */
hn_status_t hn_comm_log_team(hn_comm_log *l, const int *members, int n, int *off)
{
    for (int at = 0; at < l->nteams_used; at += 1 + l->teams[at])
        if (l->teams[at] == n && memcmp(l->teams + at + 1, members, (size_t)n * sizeof(int)) == 0) {
            *off = at + 1;
            return HN_OK;
        }
    if (hn_grow((void **)&l->teams, &l->teams_cap, l->nteams_used + n + 1, sizeof(int)) != 0)
        return HN_ERR_NOMEM;
    l->teams[l->nteams_used] = n;
    memcpy(l->teams + l->nteams_used + 1, members, (size_t)n * sizeof(int));
    *off = l->nteams_used + 1;
    l->nteams_used += n + 1;
    return HN_OK;
}

void hn_comm_logs_free(hn_comm_log *logs, int world)
{
    if (logs == NULL)
        return;
    for (int i = 0; i < world; i++) {
        hn_free(logs[i].recs);
        hn_free(logs[i].allocs);
        hn_free(logs[i].teams);
        hn_free(logs[i].pipes);
    }
    hn_free(logs);
}
