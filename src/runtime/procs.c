/* Process mode (procs.h): one rank per process, the world's state in
 * memory every process maps at the same address (src/world/rendezvous.c).
 * Launches and replays stay local; what ends a run is collective, so that
 * every process returns the same first error and recovers together. */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "../world/rendezvous.h"
#include "../world/world.h"
#include "config_cache.h"
#include "procs.h"
#include "../ranks/run_error.h"
#include "../ranks/teams.h"

#define TAG_KIND 0x7072ull /* "pr": the runtime's own exchanges */

static uint64_t next_tag(hn_runtime *rt, unsigned what)
{
    return (TAG_KIND << 48) ^ ((uint64_t)what << 40) ^ ++rt->xseq;
}

/* The world's memory: the block, the board, the shared regions. */
static size_t world_bytes(const hn_runtime *rt) { return hn_world_bytes(rt->world, HN_RUNTIME_SHARED_BYTES); }

hn_status_t hn_procs_join(hn_runtime *rt, const char *dir, const char *check_text, size_t device_bytes, void **arena,
                          size_t *arena_bytes, hn_strbuf *why)
{
    hn_rdv_setup c;
    hn_rdv *r;
    hn_status_t st;
    uint64_t h = 0x9e3779b97f4a7c15ull;
    memset(&c, 0, sizeof(c));
    for (const char *s = check_text; *s != '\0'; s++) /* FNV-1a */
        h = (h ^ (unsigned char)*s) * 0x100000001b3ull;
    c.dir = dir;
    c.world = rt->world;
    c.rank = rt->first;
    c.timeout_s = rt->cfg.timeout_s;
    c.check = h;
    c.check_text = check_text;
    c.world_bytes = world_bytes(rt);
    c.arena_bytes = device_bytes;
    c.share = rt->dev->share;
    c.ord = rt->cfg.devices != NULL ? rt->cfg.devices[0] : rt->first;
    if ((st = hn_rdv_join(&c, &r, why)) != HN_OK)
        return st;
    rt->rdv = r;
    *arena = hn_rdv_arena(r, rt->first);
    *arena_bytes = device_bytes;
    return HN_OK;
}


static void on_lost(void *ctx, int rank, const char *text)
{
    hn_runtime *rt = ctx;
    __atomic_store_n(&rt->world_lost, 1, __ATOMIC_RELEASE);
    hn_runtime_fail(rt, rank, -1, HN_ERR_PEER_LOST, text); /* the text first: those who see dead read it */
    hn_world_mark_dead(rt->world_state, rank);
}

hn_status_t hn_procs_watch(hn_runtime *rt) { return hn_rdv_watch(rt->rdv, on_lost, rt); }

void hn_procs_quiet(hn_runtime *rt)
{
    if (rt->rdv != NULL)
        hn_rdv_quiet(rt->rdv);
}

void hn_procs_leave(hn_runtime *rt)
{
    hn_rdv_leave(rt->rdv);
    rt->rdv = NULL;
}

hn_status_t hn_procs_check_lost(hn_runtime *rt)
{
    hn_world_error e;
    if (hn_world_dead_rank(rt->world_state) >= 0)
        __atomic_store_n(&rt->world_lost, 1, __ATOMIC_RELEASE);
    if (!__atomic_load_n(&rt->world_lost, __ATOMIC_ACQUIRE))
        return HN_OK;
    if (hn_world_error_get(rt->world_state, &e) == HN_OK && e.status == HN_ERR_PEER_LOST)
        hn_runtime_set_error_text(rt, e.text);
    else if (hn_runtime_error(rt)[0] == '\0')
        hn_runtime_set_error_text(rt, "hirnode: error: a process of the world died: this runtime cannot run "
                                      "again (destroy it)");
    return HN_ERR_PEER_LOST;
}

/* An exchange that itself failed (a process died, never came, diverged):
 * the world cannot go on together. */
static hn_status_t world_broken(hn_runtime *rt, hn_status_t st, const char *what, const hn_strbuf *why)
{
    char text[900];
    if (hn_procs_check_lost(rt) != HN_OK)
        return HN_ERR_PEER_LOST;
    snprintf(text, sizeof(text), "hirnode: error: rank %d, %s: %s", rt->first, what,
             why->data != NULL ? why->data : hn_status_string(st));
    hn_rdv_say_stopped(rt->rdv, text, sizeof(text));
    hn_runtime_set_error_text(rt, text);
    if (st == HN_ERR_TIMEOUT || st == HN_ERR_MISMATCH)
        return st;
    return HN_ERR_ABORTED;
}

static hn_status_t xchg(hn_runtime *rt, const char *what, unsigned kind, unsigned flags, const void *mine,
                        size_t bytes, void *all)
{
    hn_strbuf why;
    hn_status_t st;
    hn_sb_init(&why);
    st = hn_world_xchg(rt->world_state, rt->all_ranks, rt->world, rt->first, next_tag(rt, kind), mine, bytes, all,
                       flags, &why);
    if (st != HN_OK)
        st = world_broken(rt, st, what, &why);
    hn_sb_free(&why);
    return st;
}

hn_status_t hn_procs_xchg(hn_runtime *rt, const char *what, const void *mine, size_t bytes, void *all)
{
    if (hn_procs_check_lost(rt) != HN_OK)
        return HN_ERR_PEER_LOST;
    return xchg(rt, what, 1, 0, mine, bytes, all);
}

/* Whether any process says yes (an exchange of one word each). */
static hn_status_t any_of(hn_runtime *rt, const char *what, unsigned kind, int mine, int *any)
{
    int32_t v = mine, small[64], *all = rt->world <= 64 ? small : hn_calloc((size_t)rt->world, sizeof(int32_t));
    hn_status_t st;
    if (all == NULL)
        return HN_ERR_NOMEM;
    /* the end of a run (kind 2) waits a second past the deadline: a peer
     * still in its run ends it at the deadline naming what it waited for,
     * which is the error, not that it came late here */
    st = xchg(rt, what, kind, HN_WORLD_EVEN_ABORTED | (kind == 2 ? HN_WORLD_PATIENT : 0u), &v, sizeof(v), all);
    *any = 0;
    for (int i = 0; st == HN_OK && i < rt->world; i++)
        *any |= all[i] != 0;
    if (all != small)
        hn_free(all);
    return st;
}

/* Every process ends the run here. Nothing of the run is in flight
 * anywhere once the first exchange is done, so every process sees the
 * same abort word and the same first error; the failure path (graphs
 * dropped, communicators aborted and, where one process found them dead,
 * made anew everywhere) runs in every process alike, then rank 0 alone
 * clears the world's error between two barriers. */
hn_status_t hn_procs_finish_run(hn_runtime *rt, hn_status_t st)
{
    hn_world_error e;
    hn_status_t xst, drained;
    int failed, dead;
    if (hn_procs_check_lost(rt) != HN_OK) { /* nobody to agree with */
        xst = HN_ERR_PEER_LOST;
        goto broken;
    }
    if ((xst = any_of(rt, "the end of a run", 2,
                      st != HN_OK || __atomic_load_n(rt->abort_flag, __ATOMIC_ACQUIRE), &failed)) != HN_OK)
        goto broken;
    if (!failed) {
        hn_teams_reset(rt);
        return st;
    }
    dead = __atomic_load_n(&rt->teams_dead, __ATOMIC_ACQUIRE);
    {
        /* abort words first, the streams drained, then the graphs dropped
         * (config_cache.c); a process whose streams did not drain is lost */
        int aborted = 0;
        drained = hn_cache_abort_all(rt, &aborted);
        dead |= aborted;
    }
    if ((xst = any_of(rt, "recovery: the communicators' state", 3, dead, &dead)) != HN_OK)
        goto broken;
    if (dead && drained == HN_OK) {
        hn_teams_destroy(rt);
        hn_cache_forget(rt, NULL, 0, "the communicators were made anew after a failure");
    }
    __atomic_store_n(&rt->teams_dead, 0, __ATOMIC_RELEASE);
    rt->dev->recover(rt->dev_ctx);
    /* the world's first error is every process's */
    if (hn_world_error_get(rt->world_state, &e) == HN_OK && e.status != HN_OK) {
        pthread_mutex_lock(&rt->err_mu);
        if (rt->err_status == HN_OK || rt->err_status == HN_ERR_ABORTED || e.status != HN_ERR_ABORTED) {
            snprintf(rt->err_text, sizeof(rt->err_text), "%s", e.text);
            rt->err_status = e.status;
        }
        pthread_mutex_unlock(&rt->err_mu);
    }
    st = rt->err_status != HN_OK ? rt->err_status : st != HN_OK ? st : HN_ERR_ABORTED;
    if (hn_runtime_check_devices(rt) != HN_OK) {
        snprintf(rt->err_text + strlen(rt->err_text), sizeof(rt->err_text) - strlen(rt->err_text), "%s%s",
                 rt->err_text[0] ? "\n" : "", rt->lost_text);
        st = HN_ERR_DEVICE_LOST;
    }
    if (__atomic_load_n(&rt->world_lost, __ATOMIC_ACQUIRE))
        return HN_ERR_PEER_LOST;
    /* everyone has copied the error: rank 0 clears it, nobody runs before */
    if ((xst = any_of(rt, "recovery: the error read", 4, 0, &failed)) != HN_OK)
        goto broken;
    if (rt->first == 0) {
        hn_world_error_clear(rt->world_state);
        hn_teams_reset_shared(rt);
    }
    if ((xst = any_of(rt, "recovery: the error cleared", 5, 0, &failed)) != HN_OK)
        goto broken;
    hn_teams_reset(rt);
    return st;
broken:
    /* a process is gone or diverged: nothing can be agreed any more */
    __atomic_store_n(&rt->world_lost, 1, __ATOMIC_RELEASE);
    {
        int aborted;
        (void)hn_cache_abort_all(rt, &aborted);
    }
    if (xst == HN_ERR_PEER_LOST)
        (void)hn_procs_check_lost(rt);
    return xst;
}

hn_status_t hn_procs_max(hn_runtime *rt, double mine, double *worst)
{
    double small[64], *all;
    hn_status_t st;
    *worst = mine;
    if (!hn_procs(rt))
        return HN_OK;
    all = rt->world <= 64 ? small : hn_calloc((size_t)rt->world, sizeof(double));
    if (all == NULL)
        return HN_ERR_NOMEM;
    st = hn_procs_xchg(rt, "the slowest rank's time", &mine, sizeof(mine), all);
    for (int i = 0; st == HN_OK && i < rt->world; i++)
        *worst = all[i] < 0 || *worst < 0 ? -1 : HN_MAX(*worst, all[i]);
    if (all != small)
        hn_free(all);
    return st;
}
