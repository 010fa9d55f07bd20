/* What every communicator shares that is not scaffolding (comm_base.c
 * has that): the collectives' names, and their reference on the CPU. */
#include <math.h>
#include <string.h>

#include "comm.h"

const char *hn_coll_name(hn_coll_kind k)
{
    static const char *names[HN_COLL_COUNT] = {"allgather", "allreduce", "reduce_scatter",
                                               "broadcast", "reduce",    "gather",
                                               "scatter",   "all_to_all"};
    return (unsigned)k < HN_COLL_COUNT ? names[k] : "?";
}

void hn_reduce_into(double *acc, const void *src, hn_dtype dt, size_t n, hn_redop redop, int first)
{
    int is_float = hn_dtype_is_float(dt);
    for (size_t i = 0; i < n; i++) {
        double v = hn_load(dt, src, (int64_t)i);
        double a = acc[i];
        if (first) {
            acc[i] = v;
            continue;
        }
        switch (redop) {
        case HN_RED_SUM:
        case HN_RED_AVG: a = a + v; break;
        case HN_RED_PROD: a = a * v; break;
        case HN_RED_MAX: a = v > a ? v : a; break;
        case HN_RED_MIN: a = v < a ? v : a; break;
        case HN_RED_COUNT: break; /* not a reduction */
        }
        /* fp32 accumulation for floating types, like the GPU communicators */
        acc[i] = is_float ? (double)(float)a : a;
    }
}

void *hn_coll_result(const hn_coll_args *args, int n, int me, size_t *bytes_out)
{
    const hn_coll_args *a = &args[me];
    size_t es = (size_t)hn_dtype_size(a->dtype), c = a->count;
    size_t out_elems = 0;
    char *out;
    double *acc = NULL;
    switch (a->kind) {
    case HN_COLL_ALLGATHER:
    case HN_COLL_GATHER:
    case HN_COLL_ALL_TO_ALL: out_elems = c * (size_t)n; break;
    default: out_elems = c; break;
    }
    *bytes_out = out_elems * es;
    if ((a->kind == HN_COLL_GATHER || a->kind == HN_COLL_REDUCE) && me != a->root) {
        *bytes_out = 0; /* non-roots receive nothing */
        return hn_malloc(1);
    }
    out = hn_malloc(out_elems * es);
    if (out == NULL)
        return NULL;
    switch (a->kind) {
    case HN_COLL_ALLGATHER:
    case HN_COLL_GATHER:
        for (int j = 0; j < n; j++)
            memcpy(out + (size_t)j * c * es, args[j].send, c * es);
        break;
    case HN_COLL_BROADCAST: memcpy(out, args[a->root].send, c * es); break;
    case HN_COLL_SCATTER: memcpy(out, (const char *)args[a->root].send + (size_t)me * c * es, c * es); break;
    case HN_COLL_ALL_TO_ALL:
        for (int j = 0; j < n; j++)
            memcpy(out + (size_t)j * c * es, (const char *)args[j].send + (size_t)me * c * es, c * es);
        break;
    case HN_COLL_ALLREDUCE:
    case HN_COLL_REDUCE:
    case HN_COLL_REDUCE_SCATTER: {
        size_t off = a->kind == HN_COLL_REDUCE_SCATTER ? (size_t)me * c : 0;
        acc = hn_malloc(c * sizeof(double) + 1);
        if (acc == NULL) {
            hn_free(out);
            return NULL;
        }
        for (int j = 0; j < n; j++) /* team order: deterministic */
            hn_reduce_into(acc, (const char *)args[j].send + off * es, a->dtype, c, a->redop, j == 0);
        for (size_t i = 0; i < c; i++) {
            double v = acc[i];
            if (a->redop == HN_RED_AVG)
                v = hn_dtype_is_float(a->dtype) ? (double)((float)v / (float)n) : floor(v / n);
            hn_store(a->dtype, out, (int64_t)i, v);
        }
        hn_free(acc);
        break;
    }
    default: break;
    }
    return out;
}
