/* Lowering allgather + matmul/linear: sequential, the p2p ring (a shift
 * per step), per-chunk allgathers, per-rank broadcasts (docs/SCHEDULER.md). */
#include <stdio.h>

#include "lower_int.h"

/* allgather + matmul/linear */
void hn_lower_allgather_gemm(hn_lower *L, const hn_lower_pipe *c)
{
    const hn_pipe_plan *pl = &c->plan;
    int n = L->world, S = pl->streams, steps = pl->chunks;
    long long m = c->sh.M / n, K = c->sh.K, N = c->sh.N;
    char ag[64], cv[64], caller[64], i[64], src[64], av[64], d[64], q[64], v[64], dst[256], a[256], st[80];
    hn_lower_fresh(L, "gathered", ag, sizeof(ag));
    switch (pl->strategy) {
    case HN_STRAT_SEQUENTIAL:
        hn_sb_printf(&L->top, "%s = alloc %s[%lld, %lld]\n", ag, c->dt, n * m, K);
        hn_lower_emit(L, "allgather %s <- %s%s\n", ag, c->a, c->via);
        hn_lower_gemm(L, c, "", c->out, ag, 1);
        return;
    case HN_STRAT_RING:
        /* step i: receive the shard of rank + i, send ours to rank - i */
        hn_sb_printf(&L->top, "%s = alloc %s[%d, %lld, %lld]\n", ag, c->dt, n, m, K);
        hn_lower_emit(L, "%s = view %s as [%d, %lld, %lld]\n", hn_lower_fresh(L, "out", cv, sizeof(cv)), c->out, n, m, N);
        hn_lower_fan_out(L, hn_lower_fresh(L, "caller", caller, sizeof(caller)), steps, S);
        hn_lower_emit(L, "set_stream stream(0)\n");
        snprintf(dst, sizeof(dst), "%s[rank]", cv);
        hn_lower_gemm(L, c, "", dst, c->a, 1);
        hn_lower_fresh(L, "i", i, sizeof(i));
        hn_lower_fresh(L, "src", src, sizeof(src));
        hn_lower_stream_of(st, sizeof(st), i, S);
        hn_lower_emit(L, "for %s in 1 .. %d {\n  set_stream %s\n  %s = (rank + %s) %% world\n", i, n, st, src, i);
        hn_lower_emit(L, "  group {\n    send %s to (rank - %s) %% world%s\n    recv %s[%s] from %s%s\n  }\n", c->a, i, c->via,
             ag, src, src, c->via);
        snprintf(dst, sizeof(dst), "%s[%s]", cv, src);
        snprintf(a, sizeof(a), "%s[%s]", ag, src);
        hn_lower_gemm(L, c, "  ", dst, a, 1);
        hn_lower_emit(L, "}\n");
        hn_lower_join(L, caller, steps, S);
        return;
    case HN_STRAT_COLLECTIVE:
        /* chunk j: rows j of every rank's shard, gathered, then multiplied
         * into those rows of the output (a strided view) */
        hn_sb_printf(&L->top, "%s = alloc %s[%d, %d, %lld, %lld]\n", ag, c->dt, steps, n, m / steps, K);
        hn_lower_emit(L, "%s = view %s as [%d, %lld, %lld]\n", hn_lower_fresh(L, "pieces", av, sizeof(av)), c->a, steps, m / steps, K);
        hn_lower_emit(L, "%s = view %s as [%d, %d, %lld, %lld]\n", hn_lower_fresh(L, "out", cv, sizeof(cv)), c->out, n, steps,
             m / steps, N);
        hn_lower_fan_out(L, hn_lower_fresh(L, "caller", caller, sizeof(caller)), steps, S);
        hn_lower_fresh(L, "j", i, sizeof(i));
        hn_lower_stream_of(st, sizeof(st), i, S);
        hn_lower_emit(L, "for %s in 0 .. %d {\n  set_stream %s\n", i, steps, st);
        hn_lower_emit(L, "  allgather %s[%s] <- %s[%s]%s\n", ag, i, av, i, c->via);
        hn_lower_emit(L, "  %s = select %s, 1, %s\n", hn_lower_fresh(L, "rows", d, sizeof(d)), cv, i);
        snprintf(a, sizeof(a), "%s[%s]", ag, i);
        hn_lower_gemm(L, c, "  ", d, a, 1);
        hn_lower_emit(L, "}\n");
        hn_lower_join(L, caller, steps, S);
        return;
    default: { /* broadcast: step t sends piece t % u of rank t / u to all */
        int u = steps / n;
        hn_sb_printf(&L->top, "%s = alloc %s[%d, %d, %lld, %lld]\n", ag, c->dt, n, u, m / u, K);
        hn_lower_emit(L, "%s = view %s as [%d, %lld, %lld]\n", hn_lower_fresh(L, "pieces", av, sizeof(av)), c->a, u, m / u, K);
        hn_lower_emit(L, "%s = view %s as [%d, %d, %lld, %lld]\n", hn_lower_fresh(L, "out", cv, sizeof(cv)), c->out, n, u, m / u, N);
        hn_lower_fan_out(L, hn_lower_fresh(L, "caller", caller, sizeof(caller)), steps, S);
        hn_lower_fresh(L, "t", i, sizeof(i));
        hn_lower_stream_of(st, sizeof(st), i, S);
        hn_lower_emit(L, "for %s in 0 .. %d {\n  set_stream %s\n", i, steps, st);
        hn_lower_emit(L, "  %s = %s / %d\n  %s = %s %% %d\n", hn_lower_fresh(L, "owner", q, sizeof(q)), i, u, hn_lower_fresh(L, "piece", v, sizeof(v)),
             i, u);
        hn_lower_emit(L, "  broadcast %s[%s][%s] <- %s[%s] root %s%s\n", ag, q, v, av, v, q, c->via);
        snprintf(dst, sizeof(dst), "%s[%s][%s]", cv, q, v);
        snprintf(a, sizeof(a), "%s[%s][%s]", ag, q, v);
        hn_lower_gemm(L, c, "  ", dst, a, 1);
        hn_lower_emit(L, "}\n");
        hn_lower_join(L, caller, steps, S);
        return;
    }
    }
}
