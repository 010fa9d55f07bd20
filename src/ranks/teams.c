/* The communicators of a runtime and their teams: one instance per
 * distinct communicator, picked per `via`; teams created before runs for
 * what the dry runs saw (create on the caller's thread, then join, warm-up
 * and staging on every member's thread), aborted after a failure and made
 * anew by the next preparation. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../base/settings.h"
#include "pool.h"
#include "teams.h"

/* The communicators' settings (checked when the runtime was created). */
static void comm_settings(hn_comm_setup *cs)
{
    const char *sync;
    int64_t v;
    (void)hn_setting_flag("nccl_blocking", &cs->blocking, NULL);
    (void)hn_setting_int("nccl_max_ctas", &v, NULL);
    cs->nccl_max_ctas = (int)v;
    (void)hn_setting_word("p2p_sync", &sync, NULL);
    cs->p2p_events = strcmp(sync, "events") == 0;
    (void)hn_setting_int("p2p_pieces", &v, NULL);
    cs->p2p_pieces = (int)v;
    (void)hn_setting_int("p2p_ag_pieces", &v, NULL);
    cs->p2p_ag_pieces = (int)v;
    (void)hn_setting_int("p2p_lanes", &v, NULL);
    cs->p2p_lanes = (int)v;
    (void)hn_setting_word("p2p_graph_copy", &sync, NULL);
    cs->p2p_graph_kernel_copy = strcmp(sync, "kernel") == 0;
    (void)hn_setting_int("p2p_piece_kib", &v, NULL);
    cs->p2p_piece_min = (size_t)v << 10;
    (void)hn_setting_int("p2p_small_kib", &v, NULL);
    cs->p2p_small_max = (size_t)v << 10;
    (void)hn_setting_flag("ll_probe", &cs->ll_probe, NULL);
}

const hn_reg *hn_reg_find(const hn_runtime *rt, int rank, uintptr_t p)
{
    for (int i = 0; i < rt->nregs; i++)
        if (rt->regs[i].rank == rank && p >= rt->regs[i].base && p - rt->regs[i].base < rt->regs[i].bytes)
            return &rt->regs[i];
    return NULL;
}

void *hn_reg_peer_addr(void *ctx, int rank, void *p)
{
    const hn_reg *g = hn_reg_find(ctx, rank, (uintptr_t)p);
    return g != NULL ? (char *)g->local + ((uintptr_t)p - g->base) : p;
}

size_t hn_reg_room(const hn_runtime *rt, int rank, const void *p)
{
    const hn_reg *g = hn_reg_find(rt, rank, (uintptr_t)p);
    return g != NULL ? g->bytes - ((uintptr_t)p - g->base) : SIZE_MAX;
}

/* The communicator of each `via`: default and nccl are the device
 * backend's own (hn_device_ops.comm: NCCL on CUDA, the CPU emulation of
 * its collectives on the host backend), p2p is the peer-copy rings on any
 * backend, ll the latency path. */
hn_status_t hn_teams_init(hn_runtime *rt)
{
    const char *names[HN_VIA_COUNT];
    /* across nodes NCCL is the network's engine; the host backend's
     * collectives there go over the world's link (src/comm/net) */
    const char *own = rt->nodes > 1 && strcmp(rt->dev->comm, "host") == 0 ? "net" : rt->dev->comm;
    names[HN_VIA_DEFAULT] = own;
    names[HN_VIA_NCCL] = own;
    names[HN_VIA_P2P] = "p2p";
    names[HN_VIA_AUTO] = own; /* never used: resolved per instruction */
    names[HN_VIA_LL] = "ll";
    for (int v = 0; v < HN_VIA_COUNT; v++) {
        const hn_comm_ops *ops = hn_comm_find(names[v]);
        int found = -1;
        hn_comm_setup cs;
        hn_status_t st;
        if (ops == NULL) {
            HN_ERROR("no communicator '%s' for the %s backend", names[v], rt->dev->name);
            return HN_ERR_UNSUPPORTED;
        }
        for (int c = 0; c < rt->ncomms; c++)
            if (rt->comms[c].ops == ops)
                found = c;
        if (found < 0) {
            memset(&cs, 0, sizeof(cs));
            cs.nranks = rt->world;
            comm_settings(&cs);
            cs.dev = rt->dev;
            cs.dev_ctx = rt->dev_ctx;
            cs.compute = rt->compute;
            cs.sink = &rt->sink;
            cs.world = rt->world_state;
            if (hn_procs(rt)) { /* registered caller memory, mapped elsewhere in each process */
                cs.peer_addr = hn_reg_peer_addr;
                cs.peer_ctx = rt;
            }
            /* across processes streams do not wait on other processes'
             * events: the rings order devices with flags in shared memory */
            if (hn_procs(rt))
                cs.p2p_events = 0;
            if ((st = ops->init(&cs, &rt->comms[rt->ncomms].world)) != HN_OK)
                return st;
            rt->comms[rt->ncomms].ops = ops;
            found = rt->ncomms++;
        }
        rt->via_comm[v] = found;
    }
    return HN_OK;
}

static hn_team_entry *find_team(hn_runtime *rt, int comm, const int *ranks, int n)
{
    for (int i = 0; i < rt->nteams; i++)
        if (rt->teams[i].comm == comm && rt->teams[i].n == n &&
            memcmp(rt->teams[i].ranks, ranks, (size_t)n * sizeof(int)) == 0)
            return &rt->teams[i];
    return NULL;
}

const hn_comm_slot *hn_runtime_comm(const hn_runtime *rt, hn_via via)
{
    return &rt->comms[rt->via_comm[via]];
}

hn_comm_team *hn_runtime_team(hn_runtime *rt, hn_via via, const int *ranks, int n)
{
    hn_team_entry *e = find_team(rt, rt->via_comm[via], ranks, n);
    return e != NULL ? e->team : NULL;
}

int hn_teams_shared_device(const hn_runtime *rt, hn_via via, const int *ranks, int n, int *a, int *b)
{
    int most = rt->comms[rt->via_comm[via]].ops->ranks_per_device;
    if (most == 0 || rt->dev->emulated) /* emulated: every rank a device of its own */
        return 0;
    for (int i = 0; i < n; i++) {
        int on = 1;
        for (int j = i + 1; j < n; j++)
            if (hn_runtime_device_of(rt, ranks[i]) >= 0 &&
                hn_runtime_device_of(rt, ranks[i]) == hn_runtime_device_of(rt, ranks[j]) &&
                hn_world_node_of(rt->world_state, ranks[i]) == hn_world_node_of(rt->world_state, ranks[j]) &&
                ++on > most) {
                *a = ranks[i];
                *b = ranks[j];
                return most;
            }
    }
    return 0;
}

hn_status_t hn_teams_need(hn_runtime *rt, hn_via via, const int *ranks, int n, size_t reserve)
{
    int comm = rt->via_comm[via];
    hn_team_entry *e;
    hn_status_t st;
    if ((e = find_team(rt, comm, ranks, n)) != NULL) {
        e->reserve = HN_MAX(e->reserve, reserve);
        return HN_OK;
    }
    if (hn_grow((void **)&rt->teams, &rt->teams_cap, rt->nteams, sizeof(*rt->teams)) != 0)
        return HN_ERR_NOMEM;
    e = &rt->teams[rt->nteams];
    memset(e, 0, sizeof(*e));
    e->ranks = hn_malloc((size_t)n * sizeof(int));
    if (e->ranks == NULL)
        return HN_ERR_NOMEM;
    memcpy(e->ranks, ranks, (size_t)n * sizeof(int));
    e->n = n;
    e->comm = comm;
    if ((st = rt->comms[comm].ops->team_create(rt->comms[comm].world, ranks, n, &e->team)) != HN_OK) {
        hn_free(e->ranks);
        return st;
    }
    e->reserve = reserve;
    rt->nteams++;
    return HN_OK;
}

/* Every member of every team not yet joined joins it on its own thread,
 * all at once; then each warms its communicators up (peers connect lazily)
 * and reserves what the programs' reductions need. */
enum { JOIN, WARM, RESERVE };

static hn_status_t join_on_rank(hn_rank *r, void *arg)
{
    hn_runtime *rt = r->rt;
    hn_status_t st = HN_OK;
    int phase = *(const int *)arg;
    for (int t = 0; t < rt->nteams && st == HN_OK; t++) {
        hn_team_entry *e = &rt->teams[t];
        const hn_comm_ops *ops = rt->comms[e->comm].ops;
        hn_origin o = {&rt->sink, r->rank, -1, NULL, NULL};
        if (phase == RESERVE ? e->reserved >= e->reserve : e->joined)
            continue;
        for (int me = 0; me < e->n && st == HN_OK; me++) {
            if (e->ranks[me] != r->rank)
                continue;
            if (phase == JOIN && ops->team_join != NULL) /* NULL: nothing to do */
                st = ops->team_join(e->team, me, &o);
            else if (phase == WARM && ops->team_warmup != NULL)
                st = ops->team_warmup(e->team, me, r->caller, &o);
            else if (phase == RESERVE && ops->team_reserve != NULL)
                st = ops->team_reserve(e->team, me, e->reserve, &o);
        }
    }
    if (st == HN_OK && phase == WARM)
        st = rt->dev->stream_sync(r->caller);
    return st;
}

hn_status_t hn_teams_join_new(hn_runtime *rt)
{
    static const int join = JOIN, warm = WARM, reserve = RESERVE;
    hn_status_t st = hn_runtime_exec_all(rt, join_on_rank, (void *)&join);
    if (st == HN_OK)
        st = hn_runtime_exec_all(rt, join_on_rank, (void *)&warm);
    for (int t = 0; t < rt->nteams && st == HN_OK; t++)
        rt->teams[t].joined = 1;
    if (st == HN_OK)
        st = hn_runtime_exec_all(rt, join_on_rank, (void *)&reserve);
    for (int t = 0; t < rt->nteams && st == HN_OK; t++)
        rt->teams[t].reserved = HN_MAX(rt->teams[t].reserved, rt->teams[t].reserve);
    return st;
}

int hn_teams_destroy(hn_runtime *rt)
{
    int n = rt->nteams;
    for (int i = 0; i < rt->nteams; i++) {
        rt->comms[rt->teams[i].comm].ops->team_destroy(rt->teams[i].team);
        hn_free(rt->teams[i].ranks);
    }
    rt->nteams = 0;
    return n;
}

int hn_teams_abort(hn_runtime *rt)
{
    int dead = 0;
    for (int c = 0; c < rt->ncomms; c++)
        dead |= rt->comms[c].ops->abort(rt->comms[c].world);
    return dead;
}

int hn_teams_aborted(hn_runtime *rt, int how)
{
    if (how & HN_COMM_DEAD)
        __atomic_store_n(&rt->teams_dead, 1, __ATOMIC_RELEASE);
    if ((how & HN_COMM_STUCK) && !rt->lost) {
        snprintf(rt->lost_text, sizeof(rt->lost_text),
                 "hirnode: error: a communicator's abort did not return after the run was aborted: the runtime "
                 "is lost and refuses further runs (destroy it; restart the process to use the devices again)");
        rt->lost = 1;
        __atomic_store_n(&rt->stuck, 1, __ATOMIC_RELEASE);
    }
    return how & HN_COMM_DEAD;
}

void hn_teams_reset(hn_runtime *rt)
{
    for (int c = 0; c < rt->ncomms; c++)
        rt->comms[c].ops->reset(rt->comms[c].world);
    if (!hn_procs(rt)) /* across processes: once, in recovery (procs.c) */
        hn_teams_reset_shared(rt);
}

void hn_teams_forget_stream(hn_runtime *rt, int rank, const hn_dstream *s)
{
    for (int c = 0; c < rt->ncomms; c++)
        if (rt->comms[c].ops->forget_stream != NULL)
            rt->comms[c].ops->forget_stream(rt->comms[c].world, rank, s);
}

void hn_teams_reset_shared(hn_runtime *rt)
{
    for (int c = 0; c < rt->ncomms; c++)
        if (rt->comms[c].ops->reset_shared != NULL)
            rt->comms[c].ops->reset_shared(rt->comms[c].world);
}

void hn_teams_fini(hn_runtime *rt)
{
    hn_teams_destroy(rt);
    hn_free(rt->teams);
    rt->teams = NULL;
    rt->teams_cap = 0;
    for (int c = 0; c < rt->ncomms; c++)
        rt->comms[c].ops->fini(rt->comms[c].world);
    rt->ncomms = 0;
}

hn_via hn_teams_via(const hn_runtime *rt, hn_via asked, hn_via resolved, const int *ranks, int n)
{
    if ((asked == HN_VIA_AUTO || asked == HN_VIA_DEFAULT) && (resolved == HN_VIA_P2P || resolved == HN_VIA_LL) &&
        rt != NULL && rt->nodes > 1 && hn_world_spans_nodes(rt->world_state, ranks, n))
        return HN_VIA_NCCL;
    return resolved;
}
