/* `via auto` for plain collectives (docs/SCHEDULER.md): which of the
 * latency path, NCCL and the p2p rings a collective goes through, from
 * tables measured on GPUs (teams of 2 to 4, eager calls and graphs apart)
 * and estimates beyond them; the latency path's algorithm where `via ll`
 * names none. Pure arithmetic on tables: the same answer on every rank and
 * every backend. */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "../comm/ll/ll.h"
#include "../base/settings.h"
#include "cost.h"

#define MIB ((double)(1 << 20))

/* ---- measurements: docs/BENCHMARKS.md, `hirnode bench collectives` ---- */

/* Where p2p overtakes NCCL (same runs): the smallest size from which p2p
 * is ahead at every larger size measured. */
typedef struct crossover {
    int n;
    hn_coll_kind kind;
    double bytes;
} crossover;

static const crossover crossovers[] = {
    {2, HN_COLL_ALLGATHER, 8 * MIB},       {2, HN_COLL_REDUCE_SCATTER, 16 * MIB},
    {2, HN_COLL_ALLREDUCE, 64 * MIB},      {4, HN_COLL_ALLGATHER, 64 * MIB},
    {4, HN_COLL_REDUCE_SCATTER, 128 * MIB}, {4, HN_COLL_ALLREDUCE, 256 * MIB},
};

/* `via auto` for teams of 2 and 4 (3 takes 4's), measured: 2 and 4
 * H200s (NV18 through NVSwitch), 2026-11-27, `hirnode bench collectives
 * --op allreduce|allgather|reduce_scatter [--graph] --via "ll oneshot,ll
 * twoshot,nccl,p2p"`, bf16, 8 KiB to 256 MiB (docs/BENCHMARKS.md "Which
 * way auto goes"). Each table is the fastest way at each size measured, in
 * at most four ranges (the one that loses least where two are within
 * noise), a range ending halfway (geometrically) between the last size it
 * won and the first the next one won; eager calls and calls captured in a
 * graph apart, since their best differ (NCCL in graphs, the p2p rings
 * eagerly from 128 MiB on 2 GPUs). Sizes: the allreduce's buffer, the
 * allgather's output, the reduce_scatter's input. */
typedef struct auto_range {
    double upto; /* bytes below which this range's way is picked */
    hn_via via;
    hn_coll_algo algo; /* the latency path's: one-shot or two-shot */
} auto_range;

typedef struct auto_table {
    int n;
    hn_coll_kind kind;
    int graph;
    int nranges;
    auto_range r[4];
} auto_table;

#define KIB 1024.0
#define LL1 HN_VIA_LL, HN_ALGO_ONESHOT
#define LL2 HN_VIA_LL, HN_ALGO_TWOSHOT
#define NCCL HN_VIA_NCCL, HN_ALGO_AUTO
#define P2P HN_VIA_P2P, HN_ALGO_PUSH
static const auto_table auto_tables[] = {
    {2, HN_COLL_ALLREDUCE, 0, 4, {{724 * KIB, LL1}, {23170 * KIB, LL2}, {92682 * KIB, NCCL}, {INFINITY, P2P}}},
    {2, HN_COLL_ALLREDUCE, 1, 4, {{724 * KIB, LL1}, {23170 * KIB, LL2}, {185364 * KIB, NCCL}, {INFINITY, P2P}}},
    {2, HN_COLL_ALLGATHER, 0, 2, {{5793 * KIB, LL1}, {INFINITY, P2P}}},
    {2, HN_COLL_ALLGATHER, 1, 4, {{11 * KIB, LL1}, {181 * KIB, NCCL}, {5793 * KIB, LL1}, {INFINITY, P2P}}},
    {2, HN_COLL_REDUCE_SCATTER, 0, 3, {{1448 * KIB, LL1}, {11585 * KIB, NCCL}, {INFINITY, P2P}}},
    {2, HN_COLL_REDUCE_SCATTER, 1, 2, {{92682 * KIB, NCCL}, {INFINITY, P2P}}},
    {4, HN_COLL_ALLREDUCE, 0, 4, {{362 * KIB, LL1}, {5793 * KIB, LL2}, {185364 * KIB, NCCL}, {INFINITY, P2P}}},
    {4, HN_COLL_ALLREDUCE, 1, 3, {{181 * KIB, LL1}, {5793 * KIB, LL2}, {INFINITY, NCCL}}},
    {4, HN_COLL_ALLGATHER, 0, 3, {{724 * KIB, LL1}, {46341 * KIB, NCCL}, {INFINITY, P2P}}},
    {4, HN_COLL_ALLGATHER, 1, 4, {{2896 * KIB, NCCL}, {5793 * KIB, LL1}, {92682 * KIB, NCCL}, {INFINITY, P2P}}},
    {4, HN_COLL_REDUCE_SCATTER, 0, 4, {{2896 * KIB, NCCL}, {5793 * KIB, LL1}, {92682 * KIB, NCCL}, {INFINITY, P2P}}},
    {4, HN_COLL_REDUCE_SCATTER, 1, 3, {{2896 * KIB, NCCL}, {5793 * KIB, LL1}, {INFINITY, NCCL}}},
};
#undef LL1
#undef LL2
#undef NCCL
#undef P2P

/* The measured range of a collective (n 2 to 4), or NULL. */
static const auto_range *auto_range_of(int graph, hn_coll_kind kind, double bytes, int n)
{
    int row = n == 2 ? 2 : 4;
    if (n < 2 || n > 4)
        return NULL;
    for (int i = 0; i < HN_ARRAY_LEN(auto_tables); i++) {
        const auto_table *t = &auto_tables[i];
        if (t->n != row || t->kind != kind || t->graph != (graph != 0))
            continue;
        for (int k = 0; k < t->nranges; k++)
            if (bytes < t->r[k].upto || k == t->nranges - 1)
                return &t->r[k];
    }
    return NULL;
}

/* Teams of 5 to 8, not measured yet: the latency path below these sizes,
 * two-shot from twoshot_from (0: never); priors from published
 * push-based kernels. */
typedef struct ll_crossover {
    int n;
    hn_coll_kind kind;
    double twoshot_from; /* bytes from which two-shot is picked */
    double nccl_from;    /* bytes from which the latency path is not picked */
} ll_crossover;

static const ll_crossover ll_crossovers[] = {
    {8, HN_COLL_ALLREDUCE, 256 * KIB, 1 * MIB},
    {8, HN_COLL_ALLGATHER, 0, 128 * KIB},
    {8, HN_COLL_REDUCE_SCATTER, 0, 128 * KIB},
};
#undef KIB

size_t hn_cost_crossover(hn_coll_kind kind, int n)
{
    double at2 = 0, at4 = 0, b;
    if (n <= 1)
        return SIZE_MAX;
    for (int i = 0; i < HN_ARRAY_LEN(crossovers); i++)
        if (crossovers[i].kind == kind) {
            if (crossovers[i].n == 2)
                at2 = crossovers[i].bytes;
            else
                at4 = crossovers[i].bytes;
        }
    if (at2 <= 0 || at4 <= 0)
        return SIZE_MAX; /* p2p is never picked for it */
    if (n == 2)
        return (size_t)at2;
    /* 3 ranks take the 4-rank crossover; beyond 4 (unmeasured) it grows by
     * the 2 -> 4 factor per doubling */
    b = n <= 4 ? at4 : at4 * pow(at4 / at2, log2(n / 4.0));
    return b >= (double)SIZE_MAX ? SIZE_MAX : (size_t)b;
}

size_t hn_cost_ll_crossover(hn_coll_kind kind, int n, int twoshot)
{
    if (n <= 4 || n > HN_LL_MAX_RANKS)
        return 0;
    for (int i = 0; i < HN_ARRAY_LEN(ll_crossovers); i++)
        if (ll_crossovers[i].kind == kind) {
            double b = twoshot ? ll_crossovers[i].twoshot_from : ll_crossovers[i].nccl_from;
            return twoshot && b <= 0 ? SIZE_MAX : (size_t)b;
        }
    return 0;
}

/* Bytes of a collective in the crossovers' convention. */
static size_t coll_bytes(hn_coll_kind kind, size_t count, hn_dtype dtype, int n)
{
    size_t es = (size_t)hn_dtype_size(dtype);
    return kind == HN_COLL_ALLREDUCE ? count * es : count * (size_t)n * es;
}

hn_coll_algo hn_via_ll_algo(int graph, hn_coll_kind kind, size_t count, hn_dtype dtype, int n)
{
    double bytes = (double)coll_bytes(kind, count, dtype, n);
    const auto_range *r;
    if (kind != HN_COLL_ALLREDUCE) /* one push either way */
        return HN_ALGO_ONESHOT;
    r = auto_range_of(graph, kind, bytes, n);
    if (r != NULL) /* the table's, where auto takes the latency path; two-shot beyond it */
        return r->via == HN_VIA_LL ? r->algo : HN_ALGO_TWOSHOT;
    return bytes >= hn_cost_ll_crossover(kind, n, 1) ? HN_ALGO_TWOSHOT : HN_ALGO_ONESHOT;
}

hn_coll_algo hn_via_ll_norm_algo(size_t bytes, int n)
{
    (void)n; /* 2 and 4 ranks measured alike */
    return (double)bytes < 768 * 1024.0 ? HN_ALGO_ONESHOT : HN_ALGO_TWOSHOT;
}

/* The one switch behind `via auto`'s latency path: 1 since the tables
 * above were measured in graphs and eagerly on GPUs — HIRNODE_AUTO_LL's
 * default, auto, lets `via auto` take the latency path where they say,
 * and the setting is needed only to turn it off (0). */
const int hn_cost_ll_measured = 1;

int hn_auto_ll_on(const char *setting, int measured)
{
    if (setting != NULL && strcmp(setting, "1") == 0)
        return 1;
    if (setting != NULL && strcmp(setting, "0") == 0)
        return 0;
    return measured; /* auto */
}

int hn_auto_picks_ll(void) { return hn_auto_ll_on(hn_setting_get("auto_ll"), hn_cost_ll_measured); }

int hn_default_via_auto(const hn_device_ops *dev)
{
    const char *via;
    (void)hn_setting_word("default_via", &via, NULL);
    return dev->default_via_auto && strcmp(via, "auto") == 0;
}

/* The way a tuned profile's curves of this team size and mode make
 * fastest at `bytes` among those the call may take (the latency path only
 * within its measured sizes); HN_VIA_AUTO where they do not settle it
 * (no NCCL curve, or no other to weigh it against). */
static hn_via profile_pick(const hn_cost_profile *prof, int graph, hn_coll_kind kind, size_t count, hn_dtype dtype,
                           int n, double bytes)
{
    static const hn_cost_engine engines[] = {HN_ENGINE_LL, HN_ENGINE_NCCL, HN_ENGINE_CE_PUT};
    static const hn_via vias[] = {HN_VIA_LL, HN_VIA_NCCL, HN_VIA_P2P};
    hn_via best = HN_VIA_AUTO;
    double best_s = INFINITY;
    int weighed = 0;
    if (hn_cost_curve_exact(prof, kind, HN_ENGINE_NCCL, n, graph) == NULL)
        return HN_VIA_AUTO;
    for (int i = 0; i < HN_ARRAY_LEN(engines); i++) {
        const hn_cost_curve *c = hn_cost_curve_exact(prof, kind, engines[i], n, graph);
        double sec;
        if (c == NULL)
            continue;
        if (vias[i] == HN_VIA_LL && (!hn_auto_picks_ll() || hn_comm_ll_refuses(kind, dtype, n) != NULL ||
                                     bytes > c->bytes[c->npoints - 1]))
            continue;
        if (vias[i] == HN_VIA_P2P && kind == HN_COLL_ALLREDUCE && count % (size_t)n != 0)
            continue;
        weighed++;
        if ((sec = hn_cost_curve_at(c, bytes)) < best_s) {
            best_s = sec;
            best = vias[i];
        }
    }
    return weighed >= 2 ? best : HN_VIA_AUTO;
}

hn_via hn_via_resolve_prof(const hn_cost_profile *prof, hn_via via, int default_auto, int graph, hn_coll_kind kind,
                           size_t count, hn_dtype dtype, int n)
{
    int reduces = kind == HN_COLL_ALLREDUCE || kind == HN_COLL_ALLGATHER || kind == HN_COLL_REDUCE_SCATTER;
    if ((via == HN_VIA_AUTO || (via == HN_VIA_DEFAULT && default_auto)) && reduces && prof != NULL &&
        !prof->builtin) {
        hn_via v = profile_pick(prof, graph, kind, count, dtype, n, (double)coll_bytes(kind, count, dtype, n));
        if (v != HN_VIA_AUTO)
            return v;
    }
    return hn_via_resolve(via, default_auto, graph, kind, count, dtype, n);
}

hn_via hn_via_resolve(hn_via via, int default_auto, int graph, hn_coll_kind kind, size_t count, hn_dtype dtype,
                      int n)
{
    size_t bytes;
    int reduces = kind == HN_COLL_ALLREDUCE || kind == HN_COLL_ALLGATHER || kind == HN_COLL_REDUCE_SCATTER;
    const auto_range *r;
    if (via != HN_VIA_AUTO && !(via == HN_VIA_DEFAULT && default_auto))
        return via;
    if (!reduces)
        return HN_VIA_NCCL; /* no crossover measured */
    bytes = coll_bytes(kind, count, dtype, n);
    /* teams of 2 to 4: the measured tables; the latency path only where
     * it serves the call (and HIRNODE_AUTO_LL allows it), the p2p
     * allreduce only where the buffer splits in n, else NCCL */
    if ((r = auto_range_of(graph, kind, (double)bytes, n)) != NULL) {
        if (r->via == HN_VIA_LL && (!hn_auto_picks_ll() || hn_comm_ll_refuses(kind, dtype, n) != NULL))
            return HN_VIA_NCCL;
        if (r->via == HN_VIA_P2P && kind == HN_COLL_ALLREDUCE && count % (size_t)n != 0)
            return HN_VIA_NCCL;
        return r->via;
    }
    /* larger teams: the latency path below its estimates, the rings from
     * their crossover up, NCCL between */
    if (hn_auto_picks_ll() && hn_comm_ll_refuses(kind, dtype, n) == NULL && bytes < hn_cost_ll_crossover(kind, n, 0))
        return HN_VIA_LL;
    if (kind == HN_COLL_ALLREDUCE && count % (size_t)n != 0) /* the p2p allreduce splits the buffer in n */
        return HN_VIA_NCCL;
    return bytes >= hn_cost_crossover(kind, n) ? HN_VIA_P2P : HN_VIA_NCCL;
}

