/* Lowering matmul/linear + reduce_scatter and + allreduce: sequential, the
 * ring of partial sums (then an allgather, for allreduce), per-chunk
 * reduce_scatters or allreduces (docs/SCHEDULER.md). */
#include <stdio.h>

#include "lower_int.h"

/* The ring of partial sums: at step k rank r computes the rows of block
 * (r - 1 - k) % world, adds what rank r - 1 passed on for them and passes
 * the sum to r + 1; at the last step the block is its own. The next
 * step's GEMM runs on the next stream while this step's sum travels. */
static void rs_ring(hn_lower *L, const hn_lower_pipe *c, const char *dst_text, const char *caller)
{
    int n = L->world, S = c->plan.streams;
    long long m = c->sh.M / n, K = c->sh.K, N = c->sh.N;
    char part[64], recvd[64], av[64], k[64], g[64], st[80], dst[256], a[256];
    hn_lower_fresh(L, "partial", part, sizeof(part));
    hn_lower_fresh(L, "received", recvd, sizeof(recvd));
    hn_sb_printf(&L->top, "%s = alloc %s[%d, %lld, %lld]\n", part, c->dt, n, m, N);
    hn_sb_printf(&L->top, "%s = alloc %s[%d, %lld, %lld]\n", recvd, c->dt, n, m, N);
    hn_lower_emit(L, "%s = view %s as [%d, %lld, %lld]\n", hn_lower_fresh(L, "blocks", av, sizeof(av)), c->a, n, m, K);
    hn_lower_fan_out(L, caller, n, S);
    /* step 0: the block of rank - 1 (never the own one: no bias) */
    hn_lower_emit(L, "set_stream stream(0)\n");
    snprintf(dst, sizeof(dst), "%s[0]", part);
    snprintf(a, sizeof(a), "%s[(rank - 1) %% world]", av);
    hn_lower_gemm(L, c, "", dst, a, 0);
    hn_lower_fresh(L, "k", k, sizeof(k));
    hn_lower_fresh(L, "sent", g, sizeof(g));
    hn_lower_stream_of(st, sizeof(st), k, S);
    hn_lower_emit(L, "for %s in 0 .. %d {\n  set_stream %s\n", k, n - 1, st);
    hn_lower_emit(L, "  if %s > 0 {\n    add %s[%s] <- %s[%s], %s[%s]\n  }\n", k, part, k, part, k, recvd, k);
    hn_lower_emit(L, "  %s = group {\n    send %s[%s] to (rank + 1) %% world%s\n    recv %s[%s + 1] from (rank - 1) %% world%s\n"
            "  }\n", g, part, k, c->via, recvd, k, c->via);
    /* step k + 1's GEMM on the next stream while this sum travels */
    if (S > 1)
        hn_lower_emit(L, "  set_stream stream((%s + 1) %% %d)\n", k, S);
    snprintf(dst, sizeof(dst), "%s[%s + 1]", part, k);
    snprintf(a, sizeof(a), "%s[(rank - %s - 2) %% world]", av, k);
    if (c->bias && n > 2) { /* the last step is the own block: it adds the bias */
        hn_lower_emit(L, "  if %s == %d {\n", k, n - 2);
        hn_lower_gemm(L, c, "    ", dst, a, 1);
        hn_lower_emit(L, "  } else {\n");
        hn_lower_gemm(L, c, "    ", dst, a, 0);
        hn_lower_emit(L, "  }\n");
    } else {
        hn_lower_gemm(L, c, "  ", dst, a, c->bias ? 1 : 0);
    }
    if (S > 1) /* which the next step adds on this stream */
        hn_lower_emit(L, "  wait %s\n", g);
    hn_lower_emit(L, "}\n");
    hn_lower_emit(L, "set_stream stream(%d)\nadd %s <- %s[%d], %s[%d]\n", (n - 1) % S, dst_text, part, n - 1, recvd, n - 1);
}

/* matmul/linear + reduce_scatter, + allreduce */
void hn_lower_gemm_reduce(hn_lower *L, const hn_lower_pipe *c)
{
    const hn_pipe_plan *pl = &c->plan;
    int n = L->world, S = pl->streams, steps = pl->chunks, ar = c->sh.kind == HN_PIPE_MM_AR;
    long long M = c->sh.M, K = c->sh.K, N = c->sh.N, rows = ar ? M : M / n;
    char p[64], caller[64], av[64], cv[64], j[64], a[64], rc[64], dst[256], st[80], src[256];
    const char *coll = ar ? "allreduce" : "reduce_scatter";
    switch (pl->strategy) {
    case HN_STRAT_SEQUENTIAL:
        if (ar) {
            hn_lower_gemm(L, c, "", c->out, c->a, -1);
            hn_lower_emit(L, "allreduce %s <- %s op sum%s\n", c->out, c->out, c->via);
            return;
        }
        hn_lower_fresh(L, "partial", p, sizeof(p));
        hn_sb_printf(&L->top, "%s = alloc %s[%lld, %lld]\n", p, c->dt, M, N);
        hn_lower_gemm(L, c, "", p, c->a, -1);
        hn_lower_emit(L, "reduce_scatter %s <- %s op sum%s\n", c->out, p, c->via);
        return;
    case HN_STRAT_RING:
        if (n == 1) { /* one rank: its block is the whole product */
            hn_lower_gemm(L, c, "", c->out, c->a, 1);
            return;
        }
        hn_lower_fresh(L, "caller", caller, sizeof(caller));
        if (!ar) {
            rs_ring(L, c, c->out, caller);
        } else { /* reduce-scatter into this rank's block, then gather the blocks */
            hn_lower_fresh(L, "block", rc, sizeof(rc));
            hn_sb_printf(&L->top, "%s = alloc %s[%lld, %lld]\n", rc, c->dt, M / n, N);
            rs_ring(L, c, rc, caller);
            hn_lower_emit(L, "allgather %s <- %s%s\n", c->out, rc, c->via);
        }
        hn_lower_join(L, caller, n, S);
        return;
    default: /* collective: chunk j is rows j of every block (reduce_scatter) or of the output */
        hn_lower_fresh(L, "partial", p, sizeof(p));
        if (ar) {
            hn_lower_emit(L, "%s = view %s as [%d, %lld, %lld]\n", hn_lower_fresh(L, "rows", av, sizeof(av)), c->a, steps, M / steps, K);
            hn_lower_emit(L, "%s = view %s as [%d, %lld, %lld]\n", hn_lower_fresh(L, "out", cv, sizeof(cv)), c->out, steps, M / steps, N);
        } else {
            hn_sb_printf(&L->top, "%s = alloc %s[%d, %d, %lld, %lld]\n", p, c->dt, steps, n, rows / steps, N);
            hn_lower_emit(L, "%s = view %s as [%d, %d, %lld, %lld]\n", hn_lower_fresh(L, "rows", av, sizeof(av)), c->a, n, steps,
                 rows / steps, K);
            hn_lower_emit(L, "%s = view %s as [%d, %lld, %lld]\n", hn_lower_fresh(L, "out", cv, sizeof(cv)), c->out, steps, rows / steps,
                 N);
        }
        hn_lower_fan_out(L, hn_lower_fresh(L, "caller", caller, sizeof(caller)), steps, S);
        hn_lower_fresh(L, "j", j, sizeof(j));
        hn_lower_stream_of(st, sizeof(st), j, S);
        hn_lower_emit(L, "for %s in 0 .. %d {\n  set_stream %s\n", j, steps, st);
        if (ar) {
            snprintf(dst, sizeof(dst), "%s[%s]", cv, j);
            snprintf(src, sizeof(src), "%s[%s]", av, j);
            hn_lower_gemm(L, c, "  ", dst, src, -1);
            hn_lower_emit(L, "  allreduce %s <- %s op sum%s\n", dst, dst, c->via);
        } else {
            hn_lower_emit(L, "  %s = select %s, 1, %s\n", hn_lower_fresh(L, "chunk", a, sizeof(a)), av, j);
            snprintf(dst, sizeof(dst), "%s[%s]", p, j);
            hn_lower_gemm(L, c, "  ", dst, a, -1);
            hn_lower_emit(L, "  %s %s[%s] <- %s op sum%s\n", coll, cv, j, dst, c->via);
        }
        hn_lower_emit(L, "}\n");
        hn_lower_join(L, caller, steps, S);
        return;
    }
}
