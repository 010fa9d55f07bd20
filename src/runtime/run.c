/* Runs and launches of a prepared configuration: replayed from its
 * automatic graph when the setting graphs = 1 has one, else issued
 * eagerly; the runs of --check, prepared by the driver; and its reference
 * run. */
#include <string.h>

#include "../base/settings.h"
#include "config_cache.h"
#include "graph.h"
#include "issue.h"
#include "prepare.h"
#include "../ranks/run_error.h"
#include "run.h"

hn_status_t hn_runtime_run_bound(hn_runtime *rt, const hn_program *p, const int64_t *params,
                                 void *const *const *io_ptrs, int poison)
{
    hn_graph *g;
    hn_status_t st;
    if ((st = hn_runtime_enter(rt, 0, 1)) != HN_OK)
        return st;
    /* graphs = 1: a configuration run before is replayed */
    if (rt->auto_graphs && !poison) {
        if ((st = hn_runtime_auto_graph(rt, p, params, io_ptrs, NULL, &g)) != HN_OK)
            return st;
        if (g != NULL) {
            if ((st = hn_runtime_replay_streams(rt, g, NULL)) != HN_OK)
                return st;
            return hn_runtime_finish_launches(rt);
        }
    }
    return hn_issue_run(rt, hn_runtime_lowered_of(rt, p, params), params, io_ptrs, poison);
}

hn_status_t hn_runtime_run_prepared(hn_runtime *rt, const hn_program *p, const int64_t *params,
                                    void *const *const *io_ptrs)
{
    hn_strbuf diag;
    hn_status_t st;
    /* given up since: prepared again after the preamble (which the run
     * repeats, polling the devices too) */
    if (!hn_runtime_prepared(rt, p, params)) {
        if ((st = hn_runtime_enter(rt, 0, 0)) != HN_OK || (st = hn_runtime_finish_launches(rt)) != HN_OK)
            return st;
        hn_sb_init(&diag);
        if ((st = hn_runtime_prepare(rt, p, params, &diag)) != HN_OK)
            hn_runtime_set_error_text(rt, diag.data ? diag.data : hn_status_string(st));
        hn_sb_free(&diag);
        if (st != HN_OK)
            return st;
    }
    return hn_runtime_run_bound(rt, p, params, io_ptrs, 0);
}

/* whether the peer copies order the devices with flags (else events,
 * whose waits a capture takes as its own edges) */
static int flags_order_devices(const hn_runtime *rt)
{
    const char *sync = "events";
    (void)hn_setting_word("p2p_sync", &sync, NULL);
    return hn_procs(rt) || strcmp(sync, "flags") == 0;
}

hn_status_t hn_runtime_launch_bound(hn_runtime *rt, const hn_program *p, const int64_t *params,
                                    void *const *const *io_ptrs, void *const *streams)
{
    hn_graph *g;
    hn_status_t st;
    const hn_program *low = hn_runtime_lowered_of(rt, p, params);
    const hn_verified *v;
    /* inside a capture of the embedder's (torch.cuda.graph), where the
     * peer copies order the devices with flags (across processes, or
     * p2p_sync = flags): flags with this launch's values would replay
     * stale, so the launch takes a graph's state of its own, as a capture
     * of the runtime's would (graph.c hn_graph_launch_foreign) */
    if (streams != NULL && rt->dev->native_capturing != NULL && flags_order_devices(rt) &&
        (v = hn_cache_config(rt, low, params)) != NULL && v->reach != NULL && v->reach_eager)
        for (int i = 0; i < rt->nlocal; i++)
            if (rt->dev->native_capturing(streams[i]))
                return hn_graph_launch_foreign(rt, low, p->uid, params, io_ptrs, streams);
    /* graphs = 1: a configuration launched before is replayed */
    if (rt->auto_graphs) {
        if ((st = hn_runtime_auto_graph(rt, p, params, io_ptrs, streams, &g)) != HN_OK || g != NULL)
            return st != HN_OK ? st : hn_runtime_replay_streams(rt, g, streams);
    }
    return hn_issue_launch(rt, low, p->uid, params, io_ptrs, streams);
}

hn_status_t hn_runtime_run_reference(hn_runtime *rt, const hn_program *p, const int64_t *params,
                                     void *const *io_ptrs)
{
    hn_status_t st;
    if ((st = hn_runtime_enter(rt, 0, 1)) != HN_OK)
        return st;
    return hn_issue_reference(rt, hn_runtime_lowered_of(rt, p, params), params, io_ptrs);
}
