/* The evaluator's communications: collectives (each through the
 * communicator its `via` resolves to, on this rank's team) and the fused
 * allreduce + residual + RMSNorm, sends and
 * receives (alone or posted together in a group), and waits. A dry run
 * checks them and records them for the verifier's matching (comm_log.h). */
#include <string.h>

#include "comm_log.h"
#include "../model/cost.h"
#include "eval_int.h"
#include "../ranks/teams.h"
#include "../trace/trace.h"

/* Team of one instruction as this rank sees it: members into `out`
 * (capacity `cap`), count into *n. */
static hn_status_t team_of(hn_exec *x, const hn_instr *in, int *out, int cap, int *n)
{
    int64_t v[3];
    /* members are clamped to [-1, 2^30] so that out-of-range ones stay out of range */
    if (in->team_kind == HN_TEAM_ALL) {
        if (x->world > cap)
            return fail(x, in, HN_ERR_RUNTIME, "team larger than %d", cap);
        for (int i = 0; i < x->world; i++)
            out[i] = i;
        *n = x->world;
        return HN_OK;
    }
    if (in->team_kind == HN_TEAM_RANGE) {
        v[2] = 1;
        for (int i = 0; i < in->nteam; i++)
            if (eval(x, in, in->team[i], &v[i]) != HN_OK)
                return x->status;
        if (v[1] <= 0 || v[1] > cap)
            return fail(x, in, HN_ERR_RUNTIME, "team size %lld out of range [1, %d]", (long long)v[1], cap);
        for (int64_t i = 0; i < v[1]; i++)
            out[i] = (int)HN_MAX(HN_MIN((int64_t)((uint64_t)v[0] + (uint64_t)i * (uint64_t)v[2]),
                                        (int64_t)1 << 30), -1);
        *n = (int)v[1];
    } else {
        if (in->nteam > cap)
            return fail(x, in, HN_ERR_RUNTIME, "team larger than %d", cap);
        for (int i = 0; i < in->nteam; i++) {
            if (eval(x, in, in->team[i], &v[0]) != HN_OK)
                return x->status;
            out[i] = (int)HN_MAX(HN_MIN(v[0], (int64_t)1 << 30), -1);
        }
        *n = in->nteam;
    }
    for (int i = 0; i < *n; i++) {
        if (out[i] < 0 || out[i] >= x->world)
            return fail(x, in, HN_ERR_RUNTIME, "team member %d out of range [0, %d)", out[i], x->world);
        for (int j = 0; j < i; j++)
            if (out[j] == out[i])
                return fail(x, in, HN_ERR_RUNTIME, "rank %d appears twice in the team", out[i]);
    }
    return HN_OK;
}

static hn_status_t record_comm(hn_exec *x, const hn_instr *in, hn_dstream *s)
{
    int idx = x->comm_next++, event = -1;
    /* the event only serves a later `wait`: none, no event on the stream */
    if (!x->dry && x->p->has_wait) {
        hn_devent *ev;
        hn_status_t st;
        if (x->event_of == NULL) {
            if ((x->event_of = hn_malloc((size_t)x->p->ninstrs * sizeof(int) + 1)) == NULL)
                return fail(x, in, HN_ERR_NOMEM, "out of memory");
            for (int i = 0; i < x->p->ninstrs; i++)
                x->event_of[i] = -1;
        }
        if (x->event_of[in->id] < 0)
            x->event_of[in->id] = x->nevents++;
        event = x->event_of[in->id];
        if ((st = hn_rank_comm_event(x->r, event, &ev)) != HN_OK)
            return fail(x, in, st, "cannot create an event");
        if (issued(x, in, x->rt->dev->event_record(ev, s), "event record") != HN_OK)
            return x->status;
    }
    x->last_comm = idx;
    x->last_event = event;
    if (in->dst >= 0) {
        x->vals[in->dst].kind = HN_V_COMM;
        x->vals[in->dst].comm = idx;
        x->vals[in->dst].event = event;
    }
    return HN_OK;
}

static hn_status_t log_comm(hn_exec *x, const hn_instr *in, const hn_comm_rec *rec)
{
    if (x->log == NULL)
        return HN_OK;
    if (count_record(x, in) != HN_OK)
        return x->status;
    if (hn_comm_log_add(x->log, rec) != HN_OK)
        return fail(x, in, HN_ERR_NOMEM, "out of memory");
    return HN_OK;
}

/* Offset of this team in the log's pool of distinct teams, added if new. */
static hn_status_t intern_team(hn_exec *x, const hn_instr *in, const int *members, int n, int *off)
{
    *off = 0;
    if (x->log != NULL && hn_comm_log_team(x->log, members, n, off) != HN_OK)
        return fail(x, in, HN_ERR_NOMEM, "out of memory");
    return HN_OK;
}

/* The team of a collective and this rank's index in it (*me), or *me =
 * -1 when this rank is not a member: it skips the instruction, and a wait
 * on it waits for nothing. */
static hn_status_t member_of(hn_exec *x, const hn_instr *in, int *members, int *n, int *me)
{
    *me = -1;
    if (no_comm_in_reference(x, in) != HN_OK || team_of(x, in, members, 256, n) != HN_OK)
        return x->status;
    for (int i = 0; i < *n; i++)
        if (members[i] == x->rank)
            *me = i;
    if (*me < 0 && in->dst >= 0) {
        x->vals[in->dst].kind = HN_V_COMM;
        x->vals[in->dst].comm = -1;
        x->vals[in->dst].event = -1;
    }
    return HN_OK;
}

/* The communicator a collective of `kind`, count and dt over the team
 * `members` (n) goes through: `via auto` (and `via default`) resolved by
 * size as every member resolves it, once per instruction and size in a
 * run (x->via_memo); then kept off the p2p rings and the latency path
 * where the team spans nodes. */
static hn_via via_of(hn_exec *x, const hn_instr *in, hn_coll_kind kind, size_t count, hn_dtype dt,
                     const int *members, int n)
{
    int slot = in->id & (HN_ARRAY_LEN(x->via_memo) - 1);
    hn_via via;
    if (x->via_memo[slot].id1 == in->id + 1 && x->via_memo[slot].count == count && x->via_memo[slot].n == n &&
        x->via_memo[slot].dtype == dt) {
        via = x->via_memo[slot].via;
    } else {
        via = hn_via_resolve_prof(x->rt != NULL ? x->rt->profile : NULL, in->via, !x->dry && x->rt->default_auto,
                                  x->graph != NULL, kind, count, dt, n);
        x->via_memo[slot].id1 = in->id + 1;
        x->via_memo[slot].count = count;
        x->via_memo[slot].n = n;
        x->via_memo[slot].dtype = dt;
        x->via_memo[slot].via = via;
    }
    return hn_teams_via(x->rt, in->via, via, members, n);
}

/* The algorithm a statement hands the communicator `via` resolved to, for
 * a collective of `kind` and count (hn_coll_args) of dt over n ranks:
 * the statement's own where it named this via, else the communicator's
 * default made explicit — p2p pushes, the latency path goes one-shot or
 * two-shot by size (via_auto.c); the others take auto. The same on every
 * member. */
static hn_coll_algo algo_of(const hn_exec *x, const hn_instr *in, hn_via via, hn_coll_kind kind, size_t count,
                            hn_dtype dt, int n)
{
    hn_coll_algo algo = via == in->via ? (hn_coll_algo)in->algo : HN_ALGO_AUTO;
    if (algo != HN_ALGO_AUTO)
        return algo;
    if (via == HN_VIA_LL && in->op == HN_OP_ALLREDUCE_RMSNORM) /* the fused norm measured its own */
        return hn_via_ll_norm_algo(count * (size_t)hn_dtype_size(dt), n);
    return via == HN_VIA_P2P  ? HN_ALGO_PUSH
           : via == HN_VIA_LL ? hn_via_ll_algo(x->graph != NULL, kind, count, dt, n)
                              : HN_ALGO_AUTO;
}

/* A dry run's record of a collective (rec: its kind, sizes, reduction and
 * root filled in) on this team through `via`, then its name defined. */
static hn_status_t log_coll(hn_exec *x, const hn_instr *in, hn_comm_rec *rec, hn_via via, hn_coll_algo algo,
                            const int *members, int n)
{
    rec->instr = in->id;
    rec->via = (int)via;
    rec->asked = (int)in->via;
    rec->algo = algo;
    rec->nteam = n;
    if (intern_team(x, in, members, n, &rec->team_off) != HN_OK || log_comm(x, in, rec) != HN_OK)
        return x->status;
    return record_comm(x, in, NULL);
}

static hn_status_t exec_coll(hn_exec *x, const hn_instr *in, hn_coll_kind kind)
{
    int members[256], n = 0, me = -1;
    int64_t root = 0;
    hn_tensor out, inp;
    int64_t no, ni, total_in, total_out;
    size_t count;
    hn_via via;
    hn_coll_algo algo;
    const char *what = hn_op_table[in->op].keyword;
    const hn_comm_ops *comm;
    char why[256];
    if (member_of(x, in, members, &n, &me) != HN_OK || me < 0)
        return x->status;
    if (in->e[0] != NULL && eval(x, in, in->e[0], &root) != HN_OK)
        return x->status;
    if (root < 0 || root >= n)
        return fail(x, in, HN_ERR_RUNTIME, "root %lld out of range for a team of %d", (long long)root, n);
    if (tensor_of(x, in, &in->a, &out) != HN_OK || tensor_of(x, in, &in->b, &inp) != HN_OK ||
        need_contiguous(x, in, &out, "the output") != HN_OK ||
        need_contiguous(x, in, &inp, "the input") != HN_OK)
        return x->status;
    if (out.dtype != inp.dtype)
        return fail(x, in, HN_ERR_RUNTIME, "output is %s but input is %s", hn_dtype_name(out.dtype),
                    hn_dtype_name(inp.dtype));
    no = hn_tensor_numel(&out);
    ni = hn_tensor_numel(&inp);
    /* a buffer's count fits in int64; a team of n of them may not */
    if (hn_mul_overflows(ni, n, &total_in) || hn_mul_overflows(no, n, &total_out))
        return fail(x, in, HN_ERR_RUNTIME, "%s over a team of %d: %lld or %lld elements times %d overflows",
                    what, n, (long long)ni, (long long)no, n);
    switch (kind) {
    case HN_COLL_ALLGATHER:
    case HN_COLL_GATHER:
        if (no != total_in)
            return fail(x, in, HN_ERR_RUNTIME,
                        "%s of %lld elements over a team of %d needs an output of %lld, not %lld",
                        what, (long long)ni, n, (long long)total_in, (long long)no);
        count = (size_t)ni;
        break;
    case HN_COLL_REDUCE_SCATTER:
    case HN_COLL_SCATTER:
        if (ni != total_out)
            return fail(x, in, HN_ERR_RUNTIME,
                        "%s to %lld elements over a team of %d needs an input of %lld, not %lld",
                        what, (long long)no, n, (long long)total_out, (long long)ni);
        count = (size_t)no;
        break;
    case HN_COLL_ALL_TO_ALL:
        if (ni != no || ni % n != 0)
            return fail(x, in, HN_ERR_RUNTIME,
                        "all_to_all needs equal input and output sizes divisible by the team size %d "
                        "(input %lld, output %lld)", n, (long long)ni, (long long)no);
        count = (size_t)(ni / n);
        break;
    default:
        if (ni != no)
            return fail(x, in, HN_ERR_RUNTIME, "%s needs equal input and output sizes (%lld, %lld)",
                        what, (long long)ni, (long long)no);
        count = (size_t)ni;
        break;
    }
    /* `via auto` picks by size here, the same way on every member */
    via = via_of(x, in, kind, count, out.dtype, members, n);
    /* what the communicator cannot run, by its own rules */
    comm = x->dry ? hn_comm_find(hn_via_name(via)) : hn_runtime_comm(x->rt, via)->ops;
    if (comm != NULL && comm->refuses != NULL && comm->refuses(kind, out.dtype, count, n, why, sizeof(why)) != NULL)
        return fail(x, in, HN_ERR_UNSUPPORTED, "%s", why);
    algo = algo_of(x, in, via, kind, count, out.dtype, n);
    if (x->dry) {
        hn_comm_rec rec;
        memset(&rec, 0, sizeof(rec));
        rec.kind = kind;
        rec.count = count;
        rec.dtype = out.dtype;
        rec.redop = (hn_redop)in->redop;
        rec.root = (int)root;
        return log_coll(x, in, &rec, via, algo, members, n);
    } else {
        hn_coll_args args = {kind, inp.data, out.data, count, out.dtype, (hn_redop)in->redop, (int)root, algo};
        hn_comm_team *team = hn_runtime_team(x->rt, via, members, n);
        hn_dstream *s;
        hn_origin o = origin_of(x, in);
        if (team == NULL)
            return fail(x, in, HN_ERR_RUNTIME, "no communicator for this team (not verified?)");
        if (x->trace != NULL) /* its match keys count the team's collectives */
            hn_trace_team(x->trace, in, (int)via, members, n);
        if (cur_stream(x, in, &s) != HN_OK ||
            issued(x, in, hn_runtime_comm(x->rt, via)->ops->collective(team, me, &args, s, &o), what) != HN_OK)
            return x->status;
        return record_comm(x, in, s);
    }
}

#define COLL(E, K) \
    hn_status_t hn_exec_##E(hn_exec *x, const hn_instr *in) { return exec_coll(x, in, K); }
COLL(ALLGATHER, HN_COLL_ALLGATHER)
COLL(ALLREDUCE, HN_COLL_ALLREDUCE)
COLL(REDUCE_SCATTER, HN_COLL_REDUCE_SCATTER)
COLL(BROADCAST, HN_COLL_BROADCAST)
COLL(REDUCE, HN_COLL_REDUCE)
COLL(GATHER, HN_COLL_GATHER)
COLL(SCATTER, HN_COLL_SCATTER)
COLL(ALL_TO_ALL, HN_COLL_ALL_TO_ALL)
#undef COLL

/* Whether two tensors' bytes overlap (contiguous ones). */
static int overlaps(const hn_tensor *a, const hn_tensor *b)
{
    uintptr_t a0 = (uintptr_t)a->data, b0 = (uintptr_t)b->data;
    return a0 < b0 + hn_tensor_bytes(b) && b0 < a0 + hn_tensor_bytes(a) && hn_tensor_bytes(a) > 0 &&
           hn_tensor_bytes(b) > 0;
}

/* The buffers of the fused step as the communicators take them: the two
 * outputs apart from each other and from the weight; out in place of the
 * input or apart from it and the residual, res_out in place of the
 * residual or apart from it and the input. Addresses exist in real runs
 * only: a dry run's buffers share one. */
/* The fused step's five buffers, in the order norm_buffers takes them. */
static const char *const norm_names[] = {"the output", "the residual's output", "the input", "the residual",
                                         "the weight"};

static hn_status_t norm_buffers(hn_exec *x, const hn_instr *in, const hn_tensor *t)
{
    const char *const *name = norm_names;
    /* t: out, res_out, input, residual, weight; pairs that may not overlap
     * unless they are one buffer (in place: out = input, res_out = residual) */
    static const int pairs[][3] = {{0, 1, 0}, {0, 4, 0}, {1, 4, 0}, {0, 2, 1}, {0, 3, 0}, {1, 3, 1}, {1, 2, 0}};
    if (x->dry)
        return HN_OK;
    for (int i = 0; i < HN_ARRAY_LEN(pairs); i++) {
        const hn_tensor *a = &t[pairs[i][0]], *b = &t[pairs[i][1]];
        if (overlaps(a, b) && !(pairs[i][2] && a->data == b->data))
            return fail(x, in, HN_ERR_RUNTIME, "%s overlaps %s%s", name[pairs[i][0]], name[pairs[i][1]],
                        pairs[i][2] ? " (in place it is the same buffer)" : "");
    }
    return HN_OK;
}

/* allreduce_rmsnorm Y, R' <- X, R, W: through the latency path one fused
 * kernel per member (hn_comm_ll_allreduce_norm); through any other
 * communicator the allreduce into Y, then the residual add and the norm
 * from Y into Y and R' on the same stream (the compute table's rmsnorm):
 * the same step, but for the reduced value's rounding to the dtype before
 * the add. */
hn_status_t hn_exec_ALLREDUCE_RMSNORM(hn_exec *x, const hn_instr *in)
{
    const char *what = hn_op_table[in->op].keyword;
    int members[256], n = 0, me = -1;
    hn_coll_algo algo;
    hn_tensor t[5]; /* out, res_out, input, residual, weight */
    const hn_tref *tr[5];
    double eps = HN_NORM_EPS;
    size_t count, hidden;
    hn_via via;
    char why[256];
    if (member_of(x, in, members, &n, &me) != HN_OK || me < 0)
        return x->status;
    if (in->nargs != 3)
        return fail(x, in, HN_ERR_RUNTIME, "%s takes Y, R <- X, R, W", what);
    tr[0] = &in->a;
    tr[1] = &in->args[0].t;
    tr[2] = &in->b;
    tr[3] = &in->args[1].t;
    tr[4] = &in->args[2].t;
    for (int i = 0; i < 5; i++) {
        if (tensor_of(x, in, tr[i], &t[i]) != HN_OK || need_contiguous(x, in, &t[i], norm_names[i]) != HN_OK)
            return x->status;
        if (i > 0 && i < 4 && need_same_shape(x, in, &t[0], &t[i], what) != HN_OK)
            return x->status;
        if (t[i].dtype != t[0].dtype)
            return fail(x, in, HN_ERR_RUNTIME, "%s is %s but the output %s", norm_names[i],
                        hn_dtype_name(t[i].dtype), hn_dtype_name(t[0].dtype));
    }
    if (in->e[1] != NULL && eval_num(x, in, in->e[1], &eps) != HN_OK)
        return x->status;
    if (norm_check(x, in, &t[0], &t[4], eps) != HN_OK || norm_buffers(x, in, t) != HN_OK)
        return x->status;
    count = (size_t)hn_tensor_numel(&t[0]);
    hidden = (size_t)t[0].shape[t[0].ndim - 1];
    /* `via auto` picks by the allreduce's size, the same way on every member */
    via = via_of(x, in, HN_COLL_ALLREDUCE, count, t[0].dtype, members, n);
    if (via == HN_VIA_LL) {
        const char *r = hn_comm_ll_norm_refuses(t[0].dtype, n);
        if (r != NULL)
            return fail(x, in, HN_ERR_UNSUPPORTED, "%s via ll: %s", what, r);
    } else {
        const hn_comm_ops *comm = x->dry ? hn_comm_find(hn_via_name(via)) : hn_runtime_comm(x->rt, via)->ops;
        if (comm != NULL && comm->refuses != NULL &&
            comm->refuses(HN_COLL_ALLREDUCE, t[0].dtype, count, n, why, sizeof(why)) != NULL)
            return fail(x, in, HN_ERR_UNSUPPORTED, "%s: %s", what, why);
    }
    algo = algo_of(x, in, via, HN_COLL_ALLREDUCE, count, t[0].dtype, n);
    if (x->dry) {
        hn_comm_rec rec;
        memset(&rec, 0, sizeof(rec));
        rec.kind = HN_COLL_ALLREDUCE;
        rec.count = count;
        rec.norm = 1;
        rec.hidden = hidden;
        rec.dtype = t[0].dtype;
        rec.redop = (hn_redop)in->redop;
        return log_coll(x, in, &rec, via, algo, members, n);
    } else {
        hn_comm_team *team = hn_runtime_team(x->rt, via, members, n);
        hn_dstream *s;
        hn_origin o = origin_of(x, in);
        hn_status_t st;
        if (team == NULL)
            return fail(x, in, HN_ERR_RUNTIME, "no communicator for this team (not verified?)");
        if (x->trace != NULL) /* its match keys count the team's collectives */
            hn_trace_team(x->trace, in, (int)via, members, n);
        if (cur_stream(x, in, &s) != HN_OK)
            return x->status;
        if (count == 0) /* rows of no element, or no rows: nothing to move */
            return record_comm(x, in, s);
        if (via == HN_VIA_LL) {
            hn_norm_args na = {t[2].data, t[0].data, t[3].data, t[1].data, t[4].data, count / hidden, hidden,
                               t[0].dtype, (float)eps, (hn_redop)in->redop, algo};
            st = hn_comm_ll_allreduce_norm(team, me, &na, s, &o);
        } else {
            hn_coll_args args = {HN_COLL_ALLREDUCE, t[2].data, t[0].data, count, t[0].dtype, (hn_redop)in->redop, 0,
                                 algo};
            st = hn_runtime_comm(x->rt, via)->ops->collective(team, me, &args, s, &o);
            if (st == HN_OK)
                st = x->rt->compute->rmsnorm(s, &t[0], &t[1], &t[0], &t[3], &t[4], (float)eps, &o);
        }
        if (issued(x, in, st, what) != HN_OK)
            return x->status;
        return record_comm(x, in, s);
    }
}

/* Evaluates one send/recv into a posted operation. */
static hn_status_t p2p_op(hn_exec *x, const hn_instr *in, hn_p2p_op *op)
{
    hn_tensor t;
    int64_t peer;
    if (tensor_of(x, in, &in->a, &t) != HN_OK ||
        need_contiguous(x, in, &t, in->op == HN_OP_SEND ? "a sent tensor" : "a received tensor") != HN_OK ||
        eval(x, in, in->e[0], &peer) != HN_OK)
        return x->status;
    if (peer < 0 || peer >= x->world)
        return fail(x, in, HN_ERR_RUNTIME, "peer %lld out of range [0, %d)", (long long)peer, x->world);
    op->is_send = in->op == HN_OP_SEND;
    /* p2p: pull as the statement says, else its default push, made explicit */
    op->algo = in->via == HN_VIA_P2P && in->algo != HN_ALGO_PULL ? HN_ALGO_PUSH : (hn_coll_algo)in->algo;
    op->peer = (int)peer;
    op->buf = t.data;
    op->bytes = hn_tensor_bytes(&t);
    if (x->dry) {
        hn_comm_rec rec;
        memset(&rec, 0, sizeof(rec));
        rec.instr = in->id;
        rec.via = rec.asked = (int)in->via;
        rec.algo = op->algo;
        rec.is_p2p = 1;
        rec.kind = op->is_send;
        rec.peer = op->peer;
        rec.group = x->comm_next; /* the post these ops go out with */
        rec.count = (size_t)hn_tensor_numel(&t);
        rec.dtype = t.dtype;
        return log_comm(x, in, &rec);
    }
    return HN_OK;
}

static hn_status_t post_p2p(hn_exec *x, const hn_instr *in, hn_via via, const hn_p2p_op *ops, int n)
{
    hn_dstream *s;
    hn_origin o;
    const hn_comm_slot *c;
    if (x->dry)
        return record_comm(x, in, NULL);
    o = origin_of(x, in);
    c = hn_runtime_comm(x->rt, via);
    if (cur_stream(x, in, &s) != HN_OK ||
        issued(x, in, c->ops->p2p(c->world, x->rank, ops, n, s, &o), "send/recv") != HN_OK)
        return x->status;
    return record_comm(x, in, s);
}

static hn_status_t exec_p2p(hn_exec *x, const hn_instr *in)
{
    hn_p2p_op op;
    if (no_comm_in_reference(x, in) != HN_OK || p2p_op(x, in, &op) != HN_OK)
        return x->status;
    return post_p2p(x, in, in->via, &op, 1);
}

hn_status_t hn_exec_SEND(hn_exec *x, const hn_instr *in) { return exec_p2p(x, in); }
hn_status_t hn_exec_RECV(hn_exec *x, const hn_instr *in) { return exec_p2p(x, in); }

hn_status_t hn_exec_GROUP(hn_exec *x, const hn_instr *in)
{
    hn_p2p_op stack_ops[16], *ops = stack_ops;
    hn_status_t st = HN_OK;
    int nops = 0;
    if (no_comm_in_reference(x, in) != HN_OK)
        return x->status;
    if (in->body.n > HN_ARRAY_LEN(stack_ops) &&
        (ops = hn_malloc((size_t)in->body.n * sizeof(*ops))) == NULL)
        return fail(x, in, HN_ERR_NOMEM, "out of memory");
    for (int i = 0; i < in->body.n && st == HN_OK; i++) {
        const hn_instr *a = in->body.items[i], *first = in->body.items[0];
        if (a->via != first->via || a->algo != first->algo)
            st = fail(x, a, HN_ERR_RUNTIME, "a group posts through one communicator and protocol: this is "
                      "via %s%s, the first via %s%s", hn_via_name(a->via), hn_via_variant(a->via, a->algo),
                      hn_via_name(first->via), hn_via_variant(first->via, first->algo));
        else if (!x->dry && !x->reference && x->rt->faults.n > 0 &&
                 inject_faults(x, in->body.items[i]) != HN_OK) /* its members are instructions too */
            st = x->status != HN_OK ? x->status : HN_ERR_ABORTED;
        else if (x->fault_skip) /* an injected skip: this member is not posted */
            x->fault_skip = 0;
        else
            st = p2p_op(x, in->body.items[i], &ops[nops++]);
    }
    if (st == HN_OK && nops > 0)
        st = post_p2p(x, in, in->body.items[0]->via, ops, nops);
    if (ops != stack_ops)
        hn_free(ops);
    return st;
}

hn_status_t hn_exec_WAIT(hn_exec *x, const hn_instr *in)
{
    int idx = x->last_comm, event = x->last_event;
    hn_dstream *s;
    hn_origin o;
    if (in->wait_var >= 0) {
        const hn_value *v = &x->vals[in->wait_var];
        if (v->kind != HN_V_COMM)
            return fail(x, in, HN_ERR_RUNTIME, "'%s' is not a communication", vname(x, in->wait_var));
        idx = v->comm;
        event = v->event;
    }
    if (idx < 0 || event < 0 || x->dry)
        return HN_OK;
    o = origin_of(x, in);
    if (cur_stream(x, in, &s) != HN_OK ||
        issued(x, in, x->rt->dev->stream_wait_event(s, x->r->comm_events[event], &o), "wait") != HN_OK)
        return x->status;
    return HN_OK;
}
