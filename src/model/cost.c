/* The scheduler's cost model (docs/SCHEDULER.md): the model of pipelined
 * GEMMs (`via auto` of plain collectives is via_auto.c) that picks a statement's
 * strategy and parameters from a machine profile (the built-in default's
 * tables are cost_builtin.c), and its fit. Pure arithmetic on tables: the
 * same answer on every rank and every backend. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../comm/ll/ll.h"
#include "../base/settings.h"
#include "cost.h"

#define MIB ((double)(1 << 20))
#define HBM_BYTES_PER_S 3.0e12 /* a local copy on an H200, where a profile has none */
#define AUTO_STREAMS 2         /* one stream computes while the other communicates */

static const hn_cost_profile *prof_or_builtin(const hn_cost_profile *p) { return p != NULL ? p : hn_cost_builtin(); }

int hn_cost_dtype_index(hn_dtype dtype) { return dtype == HN_BF16 ? 0 : dtype == HN_F16 ? 1 : 2; }

/* ---- collectives ---- */

static double curve_seconds(const hn_cost_profile *p, hn_coll_kind kind, hn_cost_engine engine, int n,
                            double bytes)
{
    const hn_cost_curve *cv = hn_cost_curve_of(p, kind, engine, n);
    if (cv == NULL && engine != HN_ENGINE_LL && p != hn_cost_builtin()) /* a profile without it: the default's */
        cv = hn_cost_curve_of(hn_cost_builtin(), kind, engine, n);
    return cv != NULL ? hn_cost_curve_at(cv, bytes) : -1;
}

double hn_cost_coll_seconds(const hn_cost_profile *prof, hn_coll_kind kind, hn_cost_engine engine, int n,
                            double bytes)
{
    const hn_cost_profile *p = prof_or_builtin(prof);
    int ce = engine == HN_ENGINE_CE_PUT || engine == HN_ENGINE_CE_GET;
    if (bytes <= 0 || n < 1)
        return 0;
    if (n == 1) /* a team of one copies its input to its output */
        return bytes / (p->hbm_bytes_per_s > 0 ? p->hbm_bytes_per_s : HBM_BYTES_PER_S);
    switch (kind) {
    case HN_COLL_REDUCE_SCATTER:
    case HN_COLL_ALLREDUCE: return curve_seconds(p, kind, engine, n, bytes);
    case HN_COLL_BROADCAST:
        /* unmeasured: NCCL's ring forwards the buffer once per rank, like an
         * allgather moving as much per rank; p2p's root copies to all */
        if (engine == HN_ENGINE_LL)
            return -1;
        return ce ? curve_seconds(p, HN_COLL_ALLGATHER, engine, n, bytes * n)
                  : curve_seconds(p, HN_COLL_ALLGATHER, engine, n, bytes * n / (n - 1));
    default: return curve_seconds(p, HN_COLL_ALLGATHER, engine, n, bytes);
    }
}

/* ---- GEMMs ---- */

/* The measured rate at `flops`, log-log between the nearest measured
 * shapes below and above (flat beyond them); 0 with fewer than two. */
static double measured_rate(const hn_cost_profile *p, hn_dtype dtype, double flops)
{
    const hn_cost_gemm_point *lo = NULL, *hi = NULL;
    double flo = 0, fhi = 0, f;
    for (int i = 0; i < p->ngemm; i++) {
        const hn_cost_gemm_point *g = &p->gemm[i];
        double x = 2.0 * g->M * g->N * g->K;
        if (g->dtype != dtype || !(g->tflops > 0))
            continue;
        if (x <= flops && (lo == NULL || x > flo)) {
            lo = g;
            flo = x;
        }
        if (x >= flops && (hi == NULL || x < fhi)) {
            hi = g;
            fhi = x;
        }
    }
    if (lo == NULL || hi == NULL) { /* beyond the measured: the nearest end, if there are two points */
        const hn_cost_gemm_point *end = lo != NULL ? lo : hi;
        int n = 0;
        for (int i = 0; i < p->ngemm; i++)
            n += p->gemm[i].dtype == dtype && p->gemm[i].tflops > 0;
        return n >= 2 && end != NULL ? end->tflops : 0;
    }
    if (fhi <= flo)
        return lo->tflops;
    f = log(flops / flo) / log(fhi / flo);
    return exp(log(lo->tflops) * (1 - f) + log(hi->tflops) * f);
}

/* How much slower the pipelines' GEMM alone ran than the GEMM rates of
 * the same size: the rates are measured first, from a cold start, and a
 * GPU that has multiplied for a while holds lower clocks, as it does
 * through the pipelines and in use. Log-log between the pipelines' shapes
 * by flop, flat beyond them; 1 where the profile has no such pair. */
static double sustained(const hn_cost_profile *p, hn_dtype dtype, double flops)
{
    double flo = 0, fhi = 0, rlo = 1, rhi = 1, f;
    int lo = 0, hi = 0;
    for (int i = 0; i < p->npipes; i++) {
        const hn_cost_point *q = &p->pipes[i];
        double x = 2.0 * q->M * q->N * q->K, at, r = 0;
        int k = 0, seen = 0;
        if (q->reference || q->world < 2 || !(q->gemm_tflops > 0))
            continue;
        /* each shape once (at its first run), at the mean of its runs */
        for (int j = 0; j < p->npipes; j++) {
            const hn_cost_point *o = &p->pipes[j];
            if (o->reference || o->world < 2 || !(o->gemm_tflops > 0) || o->M != q->M || o->K != q->K || o->N != q->N)
                continue;
            seen |= j < i;
            r += o->gemm_tflops;
            k++;
        }
        if (seen || (at = measured_rate(p, dtype, x)) <= 0)
            continue;
        r /= k * at;
        if (x <= flops && (!lo || x > flo)) {
            lo = 1;
            flo = x;
            rlo = r;
        }
        if (x >= flops && (!hi || x < fhi)) {
            hi = 1;
            fhi = x;
            rhi = r;
        }
    }
    if (!lo || !hi || fhi <= flo)
        return lo ? rlo : hi ? rhi : 1;
    f = log(flops / flo) / log(fhi / flo);
    return exp(log(rlo) * (1 - f) + log(rhi) * f);
}

double hn_cost_gemm_seconds(const hn_cost_profile *prof, double flops, hn_dtype dtype)
{
    const hn_cost_profile *p = prof_or_builtin(prof);
    int d = hn_cost_dtype_index(dtype);
    hn_dtype m = dtype == HN_BF16 || dtype == HN_F16 ? dtype : HN_F32;
    double tflops;
    if (flops <= 0)
        return 0;
    /* the rates measured by shape, where there are, at the pace the
     * pipelines' bf16 GEMMs kept (tensor-core dtypes); else the power law */
    if ((tflops = measured_rate(p, m, flops)) > 0 && m != HN_F32)
        tflops *= sustained(p, HN_BF16, flops);
    if (tflops <= 0)
        tflops = p->gemm_tflops_at_1t[d] * pow(flops / 1e12, -p->gemm_gamma[d]);
    return tflops > 0 ? flops / (tflops * 1e12) : INFINITY;
}

/* ---- a GEMM in chunks on streams ---- */

/* The split ratio of one measured shape for `chunks` on one stream (two
 * = 0) or more (two = 1): linear in log2 of the chunks between the counts
 * measured, one chunk counting as 1; the nearest count beyond them. 0 when
 * the shape has none of that stream count. */
static double split_at_shape(const hn_cost_profile *p, const hn_cost_split_point *at, int chunks, int two)
{
    double lo_c = 1, lo_r = 1, hi_c = 0, hi_r = 0, f;
    int any = 0;
    for (int i = 0; i < p->nsplits; i++) {
        const hn_cost_split_point *q = &p->splits[i];
        if (q->M != at->M || q->K != at->K || q->N != at->N || (q->streams > 1) != two || q->chunks < 1)
            continue;
        any = 1;
        if (q->chunks <= chunks && q->chunks >= lo_c) {
            lo_c = q->chunks;
            lo_r = q->ratio;
        }
        if (q->chunks >= chunks && (hi_c == 0 || q->chunks < hi_c)) {
            hi_c = q->chunks;
            hi_r = q->ratio;
        }
    }
    if (!any)
        return 0;
    if (hi_c == 0 || hi_c <= lo_c) /* beyond the counts measured, or one of them */
        return lo_r;
    f = log2(chunks / lo_c) / log2(hi_c / lo_c);
    return lo_r + (hi_r - lo_r) * f;
}

double hn_cost_split_ratio(const hn_cost_profile *prof, int64_t M, int64_t K, int64_t N, int chunks, int streams)
{
    const hn_cost_profile *p = prof_or_builtin(prof);
    const hn_cost_split_point *lo = NULL, *hi = NULL;
    double flops = 2.0 * M * N * K, flo = 0, fhi = 0, rlo, rhi, f;
    int two = streams > 1;
    if (chunks <= 1 && streams <= 1)
        return 1;
    /* the measured shapes nearest below and above by flop */
    for (int i = 0; i < p->nsplits; i++) {
        const hn_cost_split_point *q = &p->splits[i];
        double x = 2.0 * q->M * q->N * q->K;
        if ((q->streams > 1) != two)
            continue;
        if (x <= flops && (lo == NULL || x > flo)) {
            lo = q;
            flo = x;
        }
        if (x >= flops && (hi == NULL || x < fhi)) {
            hi = q;
            fhi = x;
        }
    }
    if (lo == NULL && hi == NULL)
        return 0;
    rlo = lo != NULL ? split_at_shape(p, lo, chunks, two) : 0;
    rhi = hi != NULL ? split_at_shape(p, hi, chunks, two) : 0;
    if (lo == NULL || hi == NULL || fhi <= flo)
        return lo != NULL ? rlo : rhi;
    f = log(flops / flo) / log(fhi / flo);
    return rlo * (1 - f) + rhi * f;
}

/* ---- pipelines ---- */

static int is_gather(hn_pipe_kind k) { return k == HN_PIPE_AG_MM || k == HN_PIPE_AG; }
static int has_gemm(hn_pipe_kind k) { return k == HN_PIPE_AG_MM || k == HN_PIPE_MM_RS || k == HN_PIPE_MM_AR; }

static hn_coll_kind coll_of(hn_pipe_kind k)
{
    return is_gather(k) ? HN_COLL_ALLGATHER
                        : (k == HN_PIPE_MM_RS || k == HN_PIPE_RS) ? HN_COLL_REDUCE_SCATTER : HN_COLL_ALLREDUCE;
}

/* Bytes of the whole collective, in the curves' convention. */
static double total_bytes(const hn_pipe_shape *sh)
{
    double es = hn_dtype_size(sh->dtype), n = sh->world;
    switch (sh->kind) {
    case HN_PIPE_AG_MM: return (double)sh->M * (double)sh->K * es;
    case HN_PIPE_MM_RS:
    case HN_PIPE_MM_AR: return (double)sh->M * (double)sh->N * es;
    case HN_PIPE_AG:
    case HN_PIPE_RS: return n * (double)sh->M * es;
    default: return (double)sh->M * es;
    }
}

/* Who moves a collective of `bytes` through via/protocol (default
 * resolves like auto on CUDA, per instruction). */
static hn_cost_engine engine_of(hn_via via, hn_coll_algo protocol, hn_coll_kind kind, double bytes, int n)
{
    switch (via) {
    case HN_VIA_P2P: return protocol == HN_ALGO_PULL ? HN_ENGINE_CE_GET : HN_ENGINE_CE_PUT;
    case HN_VIA_LL: return HN_ENGINE_LL;
    case HN_VIA_DEFAULT: return bytes >= (double)hn_cost_crossover(kind, n) ? HN_ENGINE_CE_PUT : HN_ENGINE_NCCL;
    default: return HN_ENGINE_NCCL;
    }
}

static int on_copy_engines(hn_cost_engine e) { return e == HN_ENGINE_CE_PUT || e == HN_ENGINE_CE_GET; }

/* What a plan's time is made of: the GEMM, the communication that can
 * overlap it and its exposed first step, what follows exposed, steps,
 * and which coefficients apply. */
typedef struct parts {
    double G, C, first, extra;
    int steps, overlap, streams, gather, ce, pipelined;
    double split; /* G is the GEMM in the plan's chunks on its streams: the whole's times this (the
                     profile's splits); 0: the whole GEMM's */
} parts;

static void plan_parts(const hn_cost_profile *p, const hn_pipe_shape *sh, const hn_pipe_plan *pl, parts *o)
{
    int n = sh->world;
    hn_coll_kind ck = coll_of(sh->kind);
    double B = total_bytes(sh), piece;
    hn_cost_engine e;
    memset(o, 0, sizeof(*o));
    o->steps = HN_MAX(pl->chunks, 1);
    o->overlap = pl->streams > 1;
    o->streams = pl->streams;
    o->gather = is_gather(sh->kind);
    o->G = has_gemm(sh->kind) ? hn_cost_gemm_seconds(p, 2.0 * sh->M * sh->N * sh->K, sh->dtype) : 0;
    piece = B / o->steps;
    o->pipelined = pl->strategy != HN_STRAT_SEQUENTIAL;
    if (o->pipelined && o->G > 0) { /* the GEMM as the plan runs it: in chunks, on its streams */
        double r = hn_cost_split_ratio(p, sh->M, sh->K, sh->N, pl->strategy == HN_STRAT_RING ? n : o->steps,
                                       o->streams);
        if (r > 0) {
            o->G *= r;
            o->split = r;
        }
    }
    switch (pl->strategy) {
    case HN_STRAT_RING: {
        /* a ring moves what the whole collective moves; its first step is
         * local (allgather) or compute only (reduce-scatter); GEMM +
         * allreduce is the reduce-scatter ring, then an allgather of the
         * blocks through its own communicator, exposed */
        hn_coll_kind rk = ck == HN_COLL_ALLREDUCE ? HN_COLL_REDUCE_SCATTER : ck;
        e = engine_of(pl->via, pl->protocol, rk, B, n);
        o->C = n > 1 ? hn_cost_coll_seconds(p, rk, e, n, B) : 0; /* one rank: its one step is local */
        o->steps = n;
        if (sh->kind == HN_PIPE_MM_AR && n > 1) {
            hn_via av = pl->ag_via == HN_VIA_AUTO ? pl->via : pl->ag_via;
            hn_coll_algo ap = pl->ag_via == HN_VIA_AUTO ? pl->protocol : pl->ag_protocol;
            o->extra = hn_cost_coll_seconds(p, HN_COLL_ALLGATHER, engine_of(av, ap, HN_COLL_ALLGATHER, B, n), n, B);
        }
        break;
    }
    case HN_STRAT_COLLECTIVE:
        e = engine_of(pl->via, pl->protocol, ck, piece, n);
        o->C = o->steps * hn_cost_coll_seconds(p, ck, e, n, piece);
        o->first = o->C / o->steps;
        if (sh->kind == HN_PIPE_AG || sh->kind == HN_PIPE_RS) /* through a staging buffer */
            o->G += 2 * B / (p->hbm_bytes_per_s > 0 ? p->hbm_bytes_per_s : HBM_BYTES_PER_S);
        break;
    case HN_STRAT_BROADCAST:
        e = engine_of(pl->via, pl->protocol, HN_COLL_BROADCAST, piece, n);
        o->C = o->steps * hn_cost_coll_seconds(p, HN_COLL_BROADCAST, e, n, piece);
        o->first = o->C / o->steps;
        break;
    default: /* sequential */
        e = engine_of(pl->via, pl->protocol, ck, B, n);
        o->C = hn_cost_coll_seconds(p, ck, e, n, B);
        break;
    }
    o->ce = on_copy_engines(e);
}

/* A two-stage pipeline of `steps` equal steps: communication C in all,
 * GEMM G in all; `first` is the communication exposed before the first
 * GEMM (or after the last), `overlap` whether streams let them overlap;
 * sequential: one after the other. Every statement that communicates
 * pays the overhead a sequential one shows beyond its parts. */
static double parts_seconds(const hn_cost_coeffs *c, const parts *o, int n)
{
    double kappa = c->kappa[!o->gather][o->ce], tau = c->tau_s[!o->gather][o->ce];
    double base = n > 1 ? c->seq_overhead_s : 0;
    /* what chunks and streams cost the GEMM: in G where the profile has its splits */
    double cut = o->split > 0 ? 0 : (o->steps - 1) * c->chunk_s;
    double more = o->split > 0 ? 0 : (o->streams - 1) * c->stream_s;
    if (o->C < 0) /* no curve for it (the latency path where not measured) */
        return INFINITY;
    if (!o->pipelined)
        return o->G + o->C + base;
    if (!o->overlap)
        return o->G + o->C + o->steps * tau + cut + o->extra + base;
    return o->first + fmax(o->G + kappa * o->C, o->C - o->first + o->G / o->steps) + o->steps * tau + cut + more +
           o->extra + base;
}

double hn_pipe_seconds(const hn_pipe_shape *sh, const hn_pipe_plan *plan)
{
    const hn_cost_profile *p = prof_or_builtin(sh->prof);
    parts o;
    plan_parts(p, sh, plan, &o);
    return parts_seconds(&p->coef, &o, sh->world);
}

/* Rows (or elements) each chunk of the statement splits, and what they are. */
static int64_t split_extent(const hn_pipe_shape *sh, const char **what)
{
    switch (sh->kind) {
    case HN_PIPE_AG_MM: *what = "rows of each rank's shard of A"; return sh->M / sh->world;
    case HN_PIPE_MM_RS: *what = "rows of each rank's block of the output"; return sh->M / sh->world;
    case HN_PIPE_MM_AR: *what = "rows of the output"; return sh->M;
    default: *what = "elements of each rank's chunk"; return sh->M;
    }
}

/* Why a plan does not fit: what its strategy does, when the reason is
 * that (rule: "runs in one step"), and what it needs; `general` when the
 * reason is no strategy's (streams, protocol). */
typedef struct unfit {
    const char *rule;
    int general;
    char need[224];
} unfit;

/* Whether strategy/chunks/via fit the shape; why not into *u. */
static int feasible(const hn_pipe_shape *sh, const hn_pipe_plan *pl, unfit *u)
{
    const char *what;
    int64_t rows = split_extent(sh, &what);
    int n = sh->world, c = pl->chunks;
    u->rule = NULL;
    u->general = 1;
    if (c < 1) {
        snprintf(u->need, sizeof(u->need), "chunks=%d must be positive", c);
        return 0;
    }
    if (pl->streams < 1 || pl->streams > HN_MAX_STREAMS) {
        snprintf(u->need, sizeof(u->need), "streams=%d out of range [1, %d]", pl->streams, HN_MAX_STREAMS);
        return 0;
    }
    if (pl->protocol == HN_ALGO_PULL && pl->via != HN_VIA_P2P) {
        snprintf(u->need, sizeof(u->need), "protocol=get pulls through p2p, not via=%s", hn_via_name(pl->via));
        return 0;
    }
    u->general = 0;
    switch (pl->strategy) {
    case HN_STRAT_SEQUENTIAL:
        if (c != 1) {
            u->rule = "runs in one step";
            snprintf(u->need, sizeof(u->need), "chunks=%d must be 1", c);
            return 0;
        }
        break;
    case HN_STRAT_RING:
        if (c != n) {
            u->rule = "moves one shard per step";
            snprintf(u->need, sizeof(u->need), "chunks=%d must be world (%d)", c, n);
            return 0;
        }
        if (sh->kind == HN_PIPE_MM_AR && rows % n != 0) {
            u->rule = "reduces the output in world blocks";
            snprintf(u->need, sizeof(u->need), "the %lld %s do not divide in world=%d", (long long)rows, what, n);
            return 0;
        }
        break;
    case HN_STRAT_COLLECTIVE:
        if (rows % c != 0) {
            snprintf(u->need, sizeof(u->need), "chunks=%d does not divide the %lld %s", c, (long long)rows, what);
            return 0;
        }
        if (pl->via == HN_VIA_P2P && coll_of(sh->kind) == HN_COLL_ALLREDUCE &&
            (rows / c * (has_gemm(sh->kind) ? sh->N : 1)) % n != 0) {
            snprintf(u->need, sizeof(u->need), "via=p2p splits each chunk's allreduce in world=%d parts: the %lld "
                     "elements of a chunk do not divide", n, (long long)(rows / c * (has_gemm(sh->kind) ? sh->N : 1)));
            return 0;
        }
        break;
    case HN_STRAT_BROADCAST:
        if (c % n != 0) {
            u->rule = "takes chunks from each rank in turn";
            snprintf(u->need, sizeof(u->need), "chunks=%d is not a multiple of world (%d)", c, n);
            return 0;
        }
        if (rows % (c / n) != 0) {
            snprintf(u->need, sizeof(u->need), "chunks=%d makes %d pieces per rank, which do not divide the %lld %s",
                     c, c / n, (long long)rows, what);
            return 0;
        }
        break;
    default: break;
    }
    return 1;
}

/* Whether the latency path may serve the statement's collective in one
 * step: it runs it (kind, dtype, team size), the profile has its time for
 * this team size, and either that was measured on this machine or `via
 * auto` may pick it (HIRNODE_AUTO_LL=1: the built-in curve is of its first
 * design). */
static int ll_serves(const hn_cost_profile *p, const hn_pipe_shape *sh)
{
    const hn_cost_curve *cv = hn_cost_curve_of(p, coll_of(sh->kind), HN_ENGINE_LL, sh->world);
    return cv != NULL && cv->n == sh->world && hn_comm_ll_refuses(coll_of(sh->kind), sh->dtype, sh->world) == NULL &&
           (!p->builtin || hn_auto_picks_ll());
}

typedef struct comm_opt {
    hn_via via;
    hn_coll_algo protocol;
} comm_opt;

/* The communicators strategy s may go through, in the order ties keep:
 * NCCL, p2p put, p2p get, the latency path (one step only). */
static int comm_options(const hn_cost_profile *p, const hn_pipe_shape *sh, const hn_pipe_plan *plan, hn_strategy s,
                        comm_opt *o)
{
    int k = 0;
    if (plan->via != HN_VIA_AUTO) {
        o[k++] = (comm_opt){plan->via, plan->via == HN_VIA_P2P && plan->protocol == HN_ALGO_AUTO ? HN_ALGO_PUSH
                                                                                             : plan->protocol};
        return k;
    }
    /* a ring's sends and receives go through p2p unless told; get pulls through p2p */
    if (s != HN_STRAT_RING && plan->protocol != HN_ALGO_PULL)
        o[k++] = (comm_opt){HN_VIA_NCCL, plan->protocol};
    if (plan->protocol != HN_ALGO_PULL)
        o[k++] = (comm_opt){HN_VIA_P2P, HN_ALGO_PUSH};
    if (plan->protocol != HN_ALGO_PUSH)
        o[k++] = (comm_opt){HN_VIA_P2P, HN_ALGO_PULL};
    if (s == HN_STRAT_SEQUENTIAL && plan->protocol == HN_ALGO_AUTO && ll_serves(p, sh))
        o[k++] = (comm_opt){HN_VIA_LL, HN_ALGO_AUTO};
    return k;
}

/* GEMM + allreduce by ring: the allgather of the blocks through the
 * communicator of least time for it (the statement's, where it names one). */
static void choose_ag_half(const hn_cost_profile *p, const hn_pipe_shape *sh, const hn_pipe_plan *plan,
                           hn_pipe_plan *pl)
{
    comm_opt o[4];
    int k = comm_options(p, sh, plan, HN_STRAT_COLLECTIVE, o);
    double best = INFINITY, B = total_bytes(sh);
    pl->ag_via = pl->via;
    pl->ag_protocol = pl->protocol;
    for (int i = 0; i < k; i++) {
        hn_cost_engine e = engine_of(o[i].via, o[i].protocol, HN_COLL_ALLGATHER, B, sh->world);
        double t = hn_cost_coll_seconds(p, HN_COLL_ALLGATHER, e, sh->world, B);
        if (t >= 0 && t < best) {
            best = t;
            pl->ag_via = o[i].via;
            pl->ag_protocol = o[i].via == HN_VIA_P2P ? o[i].protocol : HN_ALGO_AUTO;
        }
    }
}

static const hn_strategy strategy_order[] = {HN_STRAT_SEQUENTIAL, HN_STRAT_RING, HN_STRAT_COLLECTIVE,
                                             HN_STRAT_BROADCAST};

/* Whether strategy s may be tried for the plan: the one fixed, else one
 * the statement offers. */
static int tried(const hn_pipe_plan *plan, int offered, hn_strategy s)
{
    return plan->strategy != HN_STRAT_AUTO ? plan->strategy == s : (offered & HN_OPF_STRATEGY(s)) != 0;
}

/* The chunk counts auto tries for strategy s (the plan's own when fixed). */
static int chunk_candidates(const hn_pipe_plan *plan, hn_strategy s, int n, int *cands)
{
    int k = 0;
    if (plan->chunks > 0)
        cands[k++] = plan->chunks;
    else if (s == HN_STRAT_SEQUENTIAL)
        cands[k++] = 1;
    else if (s == HN_STRAT_RING)
        cands[k++] = n;
    else
        for (; k < 3; k++) /* collective: 2, 4, 8; broadcast: 1, 2, 4 pieces per rank */
            cands[k] = s == HN_STRAT_BROADCAST ? n << k : 2 << k;
    return k;
}

/* The plan p of strategy s, chunks c, through communicator o, with its
 * other free fields settled. */
static void candidate(const hn_pipe_plan *plan, hn_strategy s, int c, comm_opt o, hn_pipe_plan *p)
{
    *p = *plan;
    p->strategy = s;
    p->chunks = c;
    p->via = o.via;
    p->protocol = o.protocol;
    if (p->streams <= 0)
        p->streams = HN_MIN(p->chunks, AUTO_STREAMS);
}

/* Whether some strategy tried fits with chunks=c. */
static int chunks_fit(const hn_cost_profile *prof, const hn_pipe_shape *sh, int offered, const hn_pipe_plan *plan,
                      int c)
{
    hn_pipe_plan p;
    unfit u;
    comm_opt opts[4];
    for (int si = 0; si < HN_ARRAY_LEN(strategy_order); si++) {
        int nopts = tried(plan, offered, strategy_order[si]) ? comm_options(prof, sh, plan, strategy_order[si], opts) : 0;
        for (int v = 0; v < nopts; v++) {
            candidate(plan, strategy_order[si], c, opts[v], &p);
            if (feasible(sh, &p, &u))
                return 1;
        }
    }
    return 0;
}

/* "; chunks=2 or chunks=4 would fit": the fitting chunk counts nearest the
 * plan's (the first few when it left them free). */
static void suggest_chunks(const hn_cost_profile *prof, const hn_pipe_shape *sh, int offered, const hn_pipe_plan *plan,
                           hn_strbuf *sb)
{
    int fit[3], k = 0;
    for (int c = 1; c <= 4096 && k < 3; c++)
        if (chunks_fit(prof, sh, offered, plan, c)) {
            if (plan->chunks > 0 && c < plan->chunks)
                fit[0] = c, k = 1; /* the nearest below */
            else
                fit[k++] = c;
            if (plan->chunks > 0 && c > plan->chunks)
                break; /* and the nearest above */
        }
    for (int i = 0; i < k; i++)
        hn_sb_printf(sb, "%schunks=%d", i == 0 ? "; " : i + 1 < k ? ", " : " or ", fit[i]);
    if (k > 0)
        hn_sb_append(sb, " would fit");
}

/* Why no plan fits, into err: a fixed strategy and chunks say what they
 * need; what auto chose from says what it tried and why each failed. */
static void unfit_text(const hn_cost_profile *prof, const hn_pipe_shape *sh, int offered, const hn_pipe_plan *plan,
                       const unfit *why, const int *seen, char *err, int errlen)
{
    hn_strbuf sb;
    int first = -1, same = 1;
    hn_sb_init(&sb);
    for (int si = 0; si < HN_ARRAY_LEN(strategy_order); si++)
        if (seen[si]) {
            if (first < 0)
                first = si;
            same &= strcmp(why[si].need, why[first].need) == 0;
        }
    if (first < 0) {
        hn_sb_append(&sb, "no strategy fits these options");
    } else if (why[first].general && same) {
        hn_sb_append(&sb, why[first].need); /* no strategy's business */
    } else if (plan->strategy != HN_STRAT_AUTO && plan->chunks > 0) {
        if (why[first].rule != NULL)
            hn_sb_printf(&sb, "strategy=%s %s: ", hn_strategy_name(plan->strategy), why[first].rule);
        hn_sb_append(&sb, why[first].need);
    } else if (plan->strategy != HN_STRAT_AUTO) {
        int cands[3], k = chunk_candidates(plan, plan->strategy, sh->world, cands);
        hn_sb_printf(&sb, "strategy=%s with the chunks auto tries (", hn_strategy_name(plan->strategy));
        for (int i = 0; i < k; i++)
            hn_sb_printf(&sb, "%s%d", i == 0 ? "" : i + 1 < k ? ", " : " and ", cands[i]);
        hn_sb_printf(&sb, "): %s", why[first].need);
        suggest_chunks(prof, sh, offered, plan, &sb);
    } else {
        /* auto chose among the strategies: each one's reason */
        if (plan->chunks > 0)
            hn_sb_printf(&sb, "strategy=auto finds no strategy for chunks=%d: ", plan->chunks);
        else
            hn_sb_append(&sb, "strategy=auto finds no strategy that fits: ");
        for (int si = 0, k = 0; si < HN_ARRAY_LEN(strategy_order); si++)
            if (seen[si]) {
                hn_sb_printf(&sb, "%s%s", k++ ? "; " : "", hn_strategy_name(strategy_order[si]));
                if (why[si].rule != NULL)
                    hn_sb_printf(&sb, " %s, %s", why[si].rule, why[si].need);
                else
                    hn_sb_printf(&sb, ": %s", why[si].need);
            }
        suggest_chunks(prof, sh, offered, plan, &sb);
    }
    snprintf(err, (size_t)errlen, "%s", sb.data != NULL ? sb.data : "no strategy fits these options");
    hn_sb_free(&sb);
}

hn_status_t hn_pipe_choose(const hn_pipe_shape *sh, int offered, hn_pipe_plan *plan, char *err, int errlen)
{
    const hn_cost_profile *prof = prof_or_builtin(sh->prof);
    hn_pipe_plan best;
    unfit why[HN_ARRAY_LEN(strategy_order)];
    int seen[HN_ARRAY_LEN(strategy_order)] = {0}, found = 0;
    memset(&best, 0, sizeof(best));
    for (int si = 0; si < HN_ARRAY_LEN(strategy_order); si++) {
        hn_strategy s = strategy_order[si];
        int cands[3], ncand, nopts;
        comm_opt opts[4];
        if (!tried(plan, offered, s))
            continue;
        ncand = chunk_candidates(plan, s, sh->world, cands);
        nopts = comm_options(prof, sh, plan, s, opts);
        for (int ci = 0; ci < ncand; ci++)
            for (int v = 0; v < nopts; v++) {
                hn_pipe_plan p;
                unfit u;
                candidate(plan, s, cands[ci], opts[v], &p);
                if (!feasible(sh, &p, &u)) {
                    if (!seen[si]) /* the first reason of each strategy */
                        why[si] = u;
                    seen[si] = 1;
                    continue;
                }
                if (sh->kind == HN_PIPE_MM_AR && s == HN_STRAT_RING)
                    choose_ag_half(prof, sh, plan, &p);
                p.seconds = hn_pipe_seconds(sh, &p);
                if (!found || p.seconds < best.seconds) {
                    best = p;
                    found = 1;
                }
            }
    }
    if (!found) {
        unfit_text(prof, sh, offered, plan, why, seen, err, errlen);
        return HN_ERR_VERIFY;
    }
    *plan = best;
    return HN_OK;
}

/* ---- fitting ---- */

/* y ~ a x1 + b x2 by weighted least squares, a, b >= 0 (one clamped to 0
 * and the other refitted when negative). */
static void fit2(const double *x1, const double *x2, const double *y, const double *w, int n, double *a,
                 double *b)
{
    double s11 = 0, s12 = 0, s22 = 0, s1y = 0, s2y = 0, det;
    for (int i = 0; i < n; i++) {
        s11 += w[i] * x1[i] * x1[i];
        s12 += w[i] * x1[i] * x2[i];
        s22 += w[i] * x2[i] * x2[i];
        s1y += w[i] * x1[i] * y[i];
        s2y += w[i] * x2[i] * y[i];
    }
    det = s11 * s22 - s12 * s12;
    *a = *b = 0;
    if (n == 0)
        return;
    if (fabs(det) > 1e-30) {
        *a = (s1y * s22 - s2y * s12) / det;
        *b = (s11 * s2y - s12 * s1y) / det;
    }
    if (*b < 0 || fabs(det) <= 1e-30) {
        *b = 0;
        *a = s11 > 0 ? s1y / s11 : 0;
    }
    if (*a < 0) {
        *a = 0;
        *b = s22 > 0 ? HN_MAX(s2y / s22, 0) : 0;
    }
}

/* A measured point as the model sees it: its shape and plan (2 streams). */
static void point_plan(const hn_cost_profile *curves, const hn_cost_point *q, hn_pipe_shape *sh, hn_pipe_plan *pl)
{
    *sh = (hn_pipe_shape){q->kind, q->M, q->K, q->N, HN_BF16, q->world, curves};
    memset(pl, 0, sizeof(*pl));
    pl->strategy = q->strategy;
    pl->chunks = q->strategy == HN_STRAT_RING ? q->world : q->chunks;
    pl->streams = q->strategy == HN_STRAT_SEQUENTIAL ? 1 : 2;
    pl->via = q->p2p ? HN_VIA_P2P : HN_VIA_NCCL;
    pl->protocol = q->p2p ? (q->get ? HN_ALGO_PULL : HN_ALGO_PUSH) : HN_ALGO_AUTO;
}

int hn_cost_fit_gemm(const hn_cost_gemm_point *pts, int n, hn_dtype dtype, double *tflops_at_1t, double *gamma)
{
    double sx = 0, sy = 0, sxx = 0, sxy = 0;
    int m = 0;
    for (int i = 0; i < n; i++) {
        double x, y;
        if (pts[i].dtype != dtype || !(pts[i].tflops > 0) || pts[i].M <= 0 || pts[i].K <= 0 || pts[i].N <= 0)
            continue;
        x = log(2.0 * pts[i].M * pts[i].N * pts[i].K / 1e12);
        y = log(pts[i].tflops);
        sx += x;
        sy += y;
        sxx += x * x;
        sxy += x * y;
        m++;
    }
    if (m == 0)
        return 0;
    if (m >= 2 && m * sxx - sx * sx > 1e-12) {
        double slope = (m * sxy - sx * sy) / (m * sxx - sx * sx);
        slope = fmin(fmax(slope, -HN_COST_MAX_GAMMA), HN_COST_MAX_GAMMA);
        *gamma = -slope;
        *tflops_at_1t = exp((sy - slope * sx) / m);
    } else {
        *gamma = 0;
        *tflops_at_1t = exp(sy / m);
    }
    return 1;
}

void hn_cost_fit(const hn_cost_profile *curves, const hn_cost_point *pts, int n, const hn_cost_coeffs *fallback,
                 hn_cost_coeffs *out)
{
    double seq = 0, wseq = 0, chunk_s, stream_s;
    hn_cost_gemm_point *gp = hn_calloc((size_t)n + 1, sizeof(*gp));
    int ng = 0;
    curves = prof_or_builtin(curves);
    fallback = fallback != NULL ? fallback : &hn_cost_model;
    chunk_s = curves->coef.chunk_s;
    stream_s = curves->coef.stream_s;
    memset(out, 0, sizeof(*out));
    out->chunk_s = chunk_s;
    out->stream_s = stream_s;
    /* GEMM rate: ln F = ln F1 - gamma ln(flop / 1e12), each shape (and
     * world) once */
    for (int i = 0; i < n && gp != NULL; i++) {
        int dup = 0;
        for (int j = 0; j < i; j++)
            dup |= pts[j].kind == pts[i].kind && pts[j].M == pts[i].M && pts[j].K == pts[i].K &&
                   pts[j].N == pts[i].N && pts[j].world == pts[i].world;
        if (!dup)
            gp[ng++] = (hn_cost_gemm_point){HN_BF16, pts[i].M, pts[i].K, pts[i].N, pts[i].gemm_tflops};
    }
    if (!hn_cost_fit_gemm(gp, ng, HN_BF16, &out->gemm_tflops_at_1t, &out->gemm_gamma)) {
        out->gemm_tflops_at_1t = fallback->gemm_tflops_at_1t;
        out->gemm_gamma = fallback->gemm_gamma;
    }
    hn_free(gp);
    /* a statement's overhead: what a sequential one took beyond its parts */
    for (int i = 0; i < n; i++) {
        const hn_cost_point *p = &pts[i];
        double G = 2.0 * p->M * p->N * p->K / (p->gemm_tflops * 1e12);
        hn_pipe_shape sh;
        hn_pipe_plan pl;
        parts o;
        if (p->world < 2 || p->reference || p->strategy != HN_STRAT_SEQUENTIAL || !(p->gemm_tflops > 0) ||
            !(p->ratio > 0))
            continue;
        point_plan(curves, p, &sh, &pl);
        plan_parts(curves, &sh, &pl, &o);
        if (o.C < 0)
            continue;
        seq += (G / p->ratio - G - o.C) / (G * G);
        wseq += 1 / (G * G);
    }
    out->seq_overhead_s = wseq > 0 ? fmin(HN_MAX(seq / wseq, 0), HN_COST_MAX_SECONDS) : fallback->seq_overhead_s;
    /* the rest from hirnode's own pipelines: what one took beyond the GEMM
     * alone (at the rate measured with it), its exposed first step and what
     * follows it exposed */
    for (int gather = 1; gather >= 0; gather--)
        for (int ce = 0; ce < 2; ce++) {
            double x1[HN_COST_MAX_PIPES], x2[HN_COST_MAX_PIPES], y[HN_COST_MAX_PIPES], w[HN_COST_MAX_PIPES];
            int m = 0;
            for (int i = 0; i < n && m < HN_COST_MAX_PIPES; i++) {
                const hn_cost_point *p = &pts[i];
                double G = 2.0 * p->M * p->N * p->K / (p->gemm_tflops * 1e12), T = G / p->ratio;
                hn_pipe_shape sh;
                hn_pipe_plan pl;
                parts o;
                if (p->world < 2 || p->reference || p->strategy == HN_STRAT_SEQUENTIAL ||
                    is_gather(p->kind) != gather || !(p->gemm_tflops > 0) || !(p->ratio > 0))
                    continue;
                point_plan(curves, p, &sh, &pl);
                plan_parts(curves, &sh, &pl, &o);
                if (o.ce != ce || o.C < 0)
                    continue;
                if (o.split > 0) /* the GEMM alone measured with it, in the plan's chunks and streams */
                    G *= o.split;
                /* compute-bound: T = first + G + kappa C + steps tau (+ the
                 * measured chunk and stream costs, what follows, and a
                 * statement's overhead);
                 * weighed by 1 / G^2, so that the ratios (what the choice
                 * rests on) fit, not the largest shape's milliseconds */
                x1[m] = o.C;
                x2[m] = o.steps;
                w[m] = 1 / (G * G);
                y[m++] = T - G - o.first - o.extra - out->seq_overhead_s -
                         (o.split > 0 ? 0 : (o.steps - 1) * chunk_s + (o.streams - 1) * stream_s);
            }
            if (m == 0) {
                out->kappa[!gather][ce] = fallback->kappa[!gather][ce];
                out->tau_s[!gather][ce] = fallback->tau_s[!gather][ce];
                continue;
            }
            fit2(x1, x2, y, w, m, &out->kappa[!gather][ce], &out->tau_s[!gather][ce]);
            out->kappa[!gather][ce] = fmin(out->kappa[!gather][ce], HN_COST_MAX_KAPPA);
            out->tau_s[!gather][ce] = fmin(out->tau_s[!gather][ce], HN_COST_MAX_SECONDS);
        }
}

int hn_cost_hier_allreduce(const hn_cost_profile *prof, double bytes, int nodes, int per_node)
{
    const double bw = HN_COST_NET_GBS * 1e9, W = (double)nodes * per_node, N = nodes;
    double rs = hn_cost_coll_seconds(prof, HN_COLL_REDUCE_SCATTER, HN_ENGINE_NCCL, per_node, bytes);
    double ag = hn_cost_coll_seconds(prof, HN_COLL_ALLGATHER, HN_ENGINE_NCCL, per_node, bytes);
    double flat = HN_COST_NET_LATENCY_S + 2 * (W - 1) / W * bytes / bw;
    double hier = rs + ag + HN_COST_NET_LATENCY_S + 2 * (N - 1) / N * bytes / per_node / bw;
    if (nodes < 2 || per_node < 2 || rs < 0 || ag < 0)
        return 0;
    return hier < flat;
}
