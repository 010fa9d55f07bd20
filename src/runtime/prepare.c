/* Preparing a configuration (program, parameter values) for runs: lowered,
 * dry-run on every rank and verified, its communicator teams made and
 * joined, every rank's pool streams and allocation cache made — so that
 * nothing is created or allocated mid-run. Repeated runs of a prepared
 * configuration skip all of it. Also the resolution of a call's
 * parameters and bindings, and giving device memory back under pressure. */
#include <stdio.h>
#include <string.h>

#include "bind.h"
#include "../exec/comm_log.h"
#include "config_cache.h"
#include "../model/cost.h"
#include "../exec/fault_inject.h"
#include "issue.h"
#include "../ir/params.h"
#include "../ir/parse.h"
#include "../ranks/pool.h"
#include "prepare.h"
#include "../ranks/rank.h"
#include "../ranks/run_error.h"
#include "../ranks/teams.h"
#include "../exec/verify_run.h"

typedef struct prealloc_job {
    const hn_program *p;
    hn_comm_log *logs;
} prealloc_job;

static hn_status_t prealloc_on_rank(hn_rank *r, void *arg)
{
    prealloc_job *j = arg;
    const hn_comm_log *l = &j->logs[r->rank];
    hn_status_t made = hn_rank_make_streams(r, l->streams);
    if (made != HN_OK)
        return made;
    for (int i = 0; i < l->nallocs; i++) {
        void *ptr;
        hn_status_t st = hn_rank_alloc_cached(r, j->p, l->allocs[i].instr, l->allocs[i].occurrence,
                                              l->allocs[i].bytes, &ptr);
        if (st != HN_OK) {
            char msg[192];
            size_t free_b = 0, total_b = 0;
            r->rt->dev->mem_info(r->rt->dev_ctx, r->rank, &free_b, &total_b);
            snprintf(msg, sizeof(msg), "cannot allocate %zu bytes on device %d (%s): %zu of %zu bytes free",
                     l->allocs[i].bytes, r->rank, hn_status_string(st), free_b, total_b);
            hn_runtime_fail(r->rt, r->rank, l->allocs[i].instr, st, msg);
            return st;
        }
    }
    return HN_OK;
}

int hn_prepare_release(hn_runtime *rt, const hn_program *keep)
{
    int held = 0;
    for (int i = 0; i < rt->nlocal; i++)
        for (int b = 0; b < rt->ranks[i].nblocks; b++)
            held += keep == NULL || rt->ranks[i].blocks[b].prog != keep->uid;
    if (held == 0 || hn_runtime_finish_launches(rt) != HN_OK)
        return 0;
    hn_cache_forget(rt, keep, HN_FORGET_ALL_BUT | HN_FORGET_BUFFERS,
                    "its program's buffers were given back when device memory ran out");
    return held;
}

/* The teams the dry run saw, each on the communicator the run will
 * resolve its collectives to — eagerly and in a capture, where `via auto`
 * may pick another (cost.c) — with the staging its reductions need. */
static hn_status_t need_teams(hn_runtime *rt, const hn_program *p, const hn_comm_log *logs, hn_strbuf *diag)
{
    hn_status_t st = HN_OK;
    int a, b, most;
    for (int r = 0; r < rt->world && st == HN_OK; r++) /* every rank's teams, also those without a local member */
        for (int i = 0; i < logs[r].n && st == HN_OK; i++) {
            const hn_comm_rec *rec = &logs[r].recs[i];
            const int *ranks = rec->is_p2p ? rt->all_ranks : hn_rec_team(&logs[r], rec);
            int n = rec->is_p2p ? rt->world : rec->nteam, nvias = 1;
            hn_via vias[2] = {(hn_via)rec->via, (hn_via)rec->via}; /* eagerly, in a capture */
            if (!rec->is_p2p) /* as the run will resolve `via auto` and `via default`: from the via written */
                for (int graph = 0; graph < 2; graph++)
                    vias[graph] = hn_teams_via(rt, (hn_via)rec->asked,
                                               hn_via_resolve_prof(rt->profile, (hn_via)rec->asked, rt->default_auto,
                                                                   graph, (hn_coll_kind)rec->kind, rec->count,
                                                                   rec->dtype, n),
                                               ranks, n);
            if (vias[1] != vias[0])
                nvias = 2;
            for (int k = 0; k < nvias && st == HN_OK; k++) {
                hn_via via = vias[k];
                size_t reserve = 0;
                /* reductions stage chunks; the latency path stages allgathers too,
                 * and the fused norm by rows */
                if (!rec->is_p2p && rec->norm && rec->hidden > 0 && via == HN_VIA_LL)
                    reserve = hn_comm_ll_norm_reserve(rec->count / rec->hidden, rec->hidden, rec->dtype, n);
                else if (!rec->is_p2p && (rec->kind == HN_COLL_REDUCE_SCATTER || rec->kind == HN_COLL_ALLREDUCE ||
                                          (rec->kind == HN_COLL_ALLGATHER && via == HN_VIA_LL))) {
                    size_t chunk = rec->kind == HN_COLL_ALLREDUCE ? (rec->count + (size_t)n - 1) / (size_t)n
                                                                  : rec->count;
                    reserve = chunk * (size_t)hn_dtype_size(rec->dtype);
                }
                if ((via == HN_VIA_P2P || via == HN_VIA_LL) && hn_world_spans_nodes(rt->world_state, ranks, n)) {
                    const hn_instr *in = p->instrs[rec->instr];
                    hn_sb_printf(diag, "%s:%d:%d: error: `via %s` cannot cross nodes: %s spans nodes %d and %d of "
                                 "%d (%d ranks each); between nodes only NCCL moves data: `via nccl` or `via auto`\n",
                                 p->filename, in->line, in->col, hn_via_name(via),
                                 rec->is_p2p ? "point-to-point through it goes through the team of all ranks, which"
                                             : "its team",
                                 hn_world_node_of(rt->world_state, ranks[0]),
                                 hn_world_node_of(rt->world_state, ranks[n - 1]), rt->nodes, rt->per_node);
                    return HN_ERR_UNSUPPORTED;
                }
                if ((most = hn_teams_shared_device(rt, via, ranks, n, &a, &b)) > 0) {
                    hn_sb_printf(diag, "%s: error: ranks %d and %d are both on device %d, and the %s communicator "
                                 "cannot have more than %d rank%s of a team on one device: map them to distinct "
                                 "devices (hn_runtime_config.devices), or use `via p2p`\n", p->filename, a, b,
                                 hn_runtime_device_of(rt, a), hn_runtime_comm(rt, via)->ops->name, most,
                                 most == 1 ? "" : "s");
                    return HN_ERR_UNSUPPORTED;
                }
                /* point-to-point goes through the team of all ranks */
                st = hn_teams_need(rt, via, ranks, n, reserve);
            }
        }
    return st;
}

/* The first communication of a local rank whose communicator reaches the
 * other members' buffers themselves (hn_comm_ops.peers_reach_buffers),
 * eagerly or in a capture, as hn_verified.reach says it; NULL with *none
 * 1 when there is none, NULL with *none 0 when out of memory; *eager 1
 * when one reaches them as the run resolves it eagerly. */
static char *reach_of(hn_runtime *rt, const hn_program *p, const hn_comm_log *logs, int *none, int *eager)
{
    hn_strbuf sb;
    char *first = NULL;
    *none = 0;
    *eager = 0;
    for (int r = rt->first; r < rt->first + rt->nlocal && !*eager; r++)
        for (int i = 0; i < logs[r].n; i++) {
            const hn_comm_rec *rec = &logs[r].recs[i];
            int n = rec->is_p2p ? rt->world : rec->nteam;
            for (int graph = 0; graph < 2; graph++) {
                hn_via via = (hn_via)rec->via;
                const hn_comm_slot *c;
                if (!rec->is_p2p)
                    via = hn_teams_via(rt, (hn_via)rec->asked,
                                       hn_via_resolve_prof(rt->profile, (hn_via)rec->asked, rt->default_auto, graph,
                                                           (hn_coll_kind)rec->kind, rec->count, rec->dtype, n),
                                       hn_rec_team(&logs[r], rec), n);
                if ((c = hn_runtime_comm(rt, via)) == NULL || c->ops == NULL || !c->ops->peers_reach_buffers)
                    continue;
                *eager |= graph == 0;
                if (first != NULL)
                    break;
                hn_sb_init(&sb);
                hn_sb_printf(&sb, "%s:%d:%d: `", p->filename, p->instrs[rec->instr]->line,
                             p->instrs[rec->instr]->col);
                hn_print_instr_short(&sb, p, p->instrs[rec->instr]);
                hn_sb_printf(&sb, "` (via %s%s)", c->ops->name, graph ? ", in a capture" : "");
                if ((first = sb.data) == NULL)
                    return NULL; /* out of memory, *none 0 */
            }
        }
    *none = first == NULL;
    return first;
}

hn_status_t hn_runtime_prepare(hn_runtime *rt, const hn_program *p, const int64_t *params,
                               hn_strbuf *diag)
{
    const hn_program *src = p; /* what the caller binds */
    hn_comm_log *logs;
    hn_status_t st;
    prealloc_job pj;
    if (hn_runtime_check_devices(rt) != HN_OK) {
        hn_sb_printf(diag, "%s\n", rt->lost_text);
        return HN_ERR_DEVICE_LOST;
    }
    /* a fault that could never fire is refused, not ignored */
    if ((st = hn_faults_check_program(rt, p, diag)) != HN_OK)
        return st;
    /* pipelined statements and stream-parallel loops run lowered (lower.c) */
    if ((st = hn_runtime_lowered(rt, p, params, &p, diag)) != HN_OK)
        return st;
    if (hn_cache_verified(rt, p, params, 1))
        return HN_OK;
    rt->preparations++;
    logs = hn_calloc((size_t)rt->world, sizeof(*logs));
    if (logs == NULL)
        return HN_ERR_NOMEM;
    hn_runtime_clear_error(rt);
    hn_runtime_set_err_prog(rt, p); /* errors of the preparation name its instructions */
    st = hn_verify_run(p, rt->world, rt->cfg.nstreams, params, diag, logs);
    if (st == HN_OK)
        st = need_teams(rt, p, logs, diag);
    if (st == HN_OK && (st = hn_teams_join_new(rt)) != HN_OK)
        hn_sb_printf(diag, "%s: error: cannot set up the communicators: %s\n", p->filename,
                     rt->err_text[0] ? rt->err_text : hn_status_string(st));
    if (st == HN_OK) {
        pj.p = p;
        pj.logs = logs;
        st = hn_pool_exec(rt, prealloc_on_rank, &pj, 0);
        if (st == HN_ERR_NOMEM && hn_prepare_release(rt, p) > 0) {
            hn_runtime_clear_error(rt);
            hn_runtime_set_err_prog(rt, p);
            st = hn_pool_exec(rt, prealloc_on_rank, &pj, 0);
        }
        if (st != HN_OK) {
            /* said once, in diag */
            hn_sb_printf(diag, "%s\n", rt->err_text[0] ? rt->err_text : "error: cannot allocate the program's buffers");
            hn_runtime_clear_error(rt);
        }
    }
    if (st == HN_OK) { /* with what the bindings need, worked out once */
        int none, eager;
        char *reach = reach_of(rt, p, logs, &none, &eager);
        hn_cache_remember(rt, p, params, hn_bind_needs(src, params, rt->world, rt->cfg.nstreams),
                          src->ninputs + src->noutputs, reach, none, eager);
    }
    hn_comm_logs_free(logs, rt->world);
    return st;
}

void hn_resolved_free(hn_resolved *rs)
{
    hn_free(rs->params);
    rs->params = NULL;
    hn_bound_free(&rs->b);
    rs->io = NULL;
}

int hn_runtime_prepared(hn_runtime *rt, const hn_program *p, const int64_t *params)
{
    const hn_program *lp = hn_runtime_lowered_of(rt, p, params);
    return !(hn_runtime_lowers(rt, p) && lp == p) && hn_cache_verified(rt, lp, params, 0) && !rt->lost;
}

hn_status_t hn_runtime_resolve(hn_runtime *rt, const hn_program *p, const hn_run_args *args, hn_resolved *rs)
{
    hn_strbuf diag;
    hn_status_t st;
    hn_sb_init(&diag);
    memset(rs, 0, sizeof(*rs));
    if ((rs->params = hn_calloc((size_t)p->nparams + 1, sizeof(int64_t))) == NULL) {
        st = HN_ERR_NOMEM;
        goto done;
    }
    if (args->nparams > 0 && (args->param_names == NULL || args->param_values == NULL)) {
        hn_sb_printf(&diag, "%s: error: %d parameter overrides, but no names or values\n", p->filename,
                     args->nparams);
        st = HN_ERR_INVALID;
        goto done;
    }
    for (int i = 0; i < args->nparams; i++)
        if (args->param_names[i] == NULL) {
            hn_sb_printf(&diag, "%s: error: parameter override %d has no name\n", p->filename, i);
            st = HN_ERR_INVALID;
            goto done;
        }
    st = hn_params_resolve(p, rt->world, rt->cfg.nstreams, args->nparams, args->param_names,
                           args->param_values, rs->params, &diag);
    if (st == HN_OK && (st = hn_bind_match(p, args, &rs->b, &diag)) == HN_OK)
        rs->io = rs->b.ptr;
    /* a configuration not yet prepared allocates: launches in flight first */
    if (st == HN_OK && !hn_runtime_prepared(rt, p, rs->params) && (st = hn_runtime_finish_launches(rt)) != HN_OK) {
        hn_resolved_free(rs);
        hn_sb_free(&diag);
        return st; /* the earlier launch's error, in hn_runtime_error */
    }
    if (st == HN_OK)
        st = hn_runtime_prepare(rt, p, rs->params, &diag);
    /* every binding fits on every rank before anything is issued */
    if (st == HN_OK)
        st = hn_bind_check(rt, p, rs->params,
                           hn_cache_config(rt, hn_runtime_lowered_of(rt, p, rs->params), rs->params), &rs->b, &diag);
done:
    if (st != HN_OK) {
        hn_runtime_set_error_text(rt, diag.data ? diag.data : hn_status_string(st));
        hn_resolved_free(rs);
    }
    hn_sb_free(&diag);
    return st;
}
