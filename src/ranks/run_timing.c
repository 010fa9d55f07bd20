/* Timed runs, for `hirnode bench collectives`: a timing marker on each
 * rank's caller stream before a run's body is issued and one after, read
 * once the run has synced — the device's time for the body (on CUDA,
 * events with timing; on the host backend, the stream workers' clocks). A
 * marker recorded before the body is reached at once, so the time counts
 * from when the rank began issuing, host gaps included: what a caller
 * issuing back to back would see. */
#include "rank.h"
#include "run_error.h"

void hn_runtime_time_runs(hn_runtime *rt, int on)
{
    rt->time_runs = on;
    for (int i = 0; i < rt->nlocal; i++)
        rt->ranks[i].run_seconds = -1;
}

double hn_runtime_run_seconds(const hn_runtime *rt)
{
    double worst = -1;
    for (int i = 0; i < rt->nlocal; i++) {
        if (rt->ranks[i].run_seconds < 0)
            return -1;
        worst = HN_MAX(worst, rt->ranks[i].run_seconds);
    }
    return worst;
}

hn_status_t hn_rank_run_mark(hn_rank *r, int end)
{
    hn_runtime *rt = r->rt;
    hn_status_t st;
    r->run_seconds = -1;
    if (r->run_mark[end] == NULL &&
        (st = rt->dev->timer_create(rt->dev_ctx, r->rank, &r->run_mark[end])) != HN_OK) {
        hn_runtime_fail(rt, r->rank, -1, st, "cannot create a timing marker");
        return st;
    }
    if ((st = rt->dev->timer_record(r->run_mark[end], r->active, NULL)) != HN_OK)
        hn_runtime_fail(rt, r->rank, -1, st, "cannot record a timing marker");
    return st;
}

void hn_rank_run_measure(hn_rank *r)
{
    double s;
    if (r->rt->dev->timer_elapsed(r->run_mark[0], r->run_mark[1], &s) == HN_OK)
        r->run_seconds = s;
}

void hn_rank_run_timers_free(hn_rank *r)
{
    for (int k = 0; k < 2; k++)
        if (r->run_mark[k] != NULL) {
            r->rt->dev->timer_destroy(r->run_mark[k]);
            r->run_mark[k] = NULL;
        }
}
