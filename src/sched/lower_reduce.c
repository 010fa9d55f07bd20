/* Lowering matmul/linear + reduce_scatter and + allreduce: sequential, the
 * ring of partial sums (then an allgather, for allreduce), per-chunk
 * reduce_scatters or allreduces (docs/SCHEDULER.md). The pipelines run
 * their GEMMs in order on one stream and their communication on another,
 * each step's after its GEMM: two GEMMs never race for the SMs, so the
 * one whose result goes out first also finishes first. */
#include <stdio.h>

#include "lower_int.h"

/* The streams of a reduction pipeline: stream(0) computes, stream(1)
 * reduces and communicates (one stream: both on stream(0)). `comm_after`
 * makes the communication stream wait for the GEMMs issued so far — the
 * one just issued, not the next. */
static int reduce_streams(const hn_lower_pipe *c) { return c->plan.streams > 1 ? 2 : 1; }

static void comm_after(hn_lower *L, const hn_lower_pipe *c, const char *indent)
{
    if (reduce_streams(c) > 1)
        hn_lower_emit(L, "%sset_stream stream(1)\n%swait_stream stream(0)\n", indent, indent);
}

/* The ring of partial sums: at step k rank r computes the rows of block
 * (r - 1 - k) % world, adds what rank r - 1 passed on for them and passes
 * the sum to r + 1; at the last step the block is its own (it adds the
 * bias), and the sum lands in dst. The GEMM of step k + 1 runs while the
 * sum of step k is added and travels. */
static void rs_ring(hn_lower *L, const hn_lower_pipe *c, const char *dst_text, const char *caller)
{
    int n = L->world, S = reduce_streams(c);
    long long m = c->sh.M / n, K = c->sh.K, N = c->sh.N;
    char part[64], recvd[64], av[64], k[64], dst[256], a[256];
    hn_lower_fresh(L, "partial", part, sizeof(part));
    hn_lower_fresh(L, "received", recvd, sizeof(recvd));
    hn_sb_printf(&L->top, "%s = alloc %s[%d, %lld, %lld]\n", part, c->dt, n, m, N);
    hn_sb_printf(&L->top, "%s = alloc %s[%d, %lld, %lld]\n", recvd, c->dt, n, m, N);
    hn_lower_emit(L, "%s = view %s as [%d, %lld, %lld]\n", hn_lower_fresh(L, "blocks", av, sizeof(av)), c->a, n, m, K);
    hn_lower_fan_out(L, caller, S, S);
    hn_lower_fresh(L, "k", k, sizeof(k));
    hn_lower_emit(L, "for %s in 0 .. %d {\n  set_stream stream(0)\n", k, n - 1);
    snprintf(dst, sizeof(dst), "%s[%s]", part, k);
    snprintf(a, sizeof(a), "%s[(rank - %s - 1) %% world]", av, k);
    hn_lower_gemm(L, c, "  ", dst, a, 0); /* never the own block: no bias */
    comm_after(L, c, "  ");
    hn_lower_emit(L, "  if %s > 0 {\n    add %s[%s] <- %s[%s], %s[%s]\n  }\n", k, part, k, part, k, recvd, k);
    hn_lower_emit(L, "  group {\n    send %s[%s] to (rank + 1) %% world%s\n    recv %s[%s + 1] from (rank - 1) %% world%s\n"
            "  }\n}\n", part, k, c->via, recvd, k, c->via);
    /* the last step: the own block, then the sum that arrived for it */
    hn_lower_emit(L, "set_stream stream(0)\n");
    snprintf(dst, sizeof(dst), "%s[%d]", part, n - 1);
    snprintf(a, sizeof(a), "%s[rank]", av);
    hn_lower_gemm(L, c, "", dst, a, 1);
    comm_after(L, c, "");
    hn_lower_emit(L, "add %s <- %s[%d], %s[%d]\n", dst_text, part, n - 1, recvd, n - 1);
}

/* matmul/linear + reduce_scatter, + allreduce */
void hn_lower_gemm_reduce(hn_lower *L, const hn_lower_pipe *c)
{
    const hn_pipe_plan *pl = &c->plan;
    int n = L->world, S = reduce_streams(c), steps = pl->chunks, ar = c->sh.kind == HN_PIPE_MM_AR;
    long long M = c->sh.M, K = c->sh.K, N = c->sh.N, rows = ar ? M : M / n;
    char p[64], caller[64], av[64], cv[64], j[64], a[64], rc[64], dst[256], src[256], agvia[32];
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
            hn_lower_via_text(agvia, sizeof(agvia), pl->ag_via == HN_VIA_AUTO || pl->ag_via == HN_VIA_DEFAULT ? pl->via
                                                                                                           : pl->ag_via,
                              pl->ag_via == HN_VIA_AUTO || pl->ag_via == HN_VIA_DEFAULT ? pl->protocol : pl->ag_protocol);
            hn_lower_emit(L, "allgather %s <- %s%s\n", c->out, rc, agvia);
        }
        hn_lower_join(L, caller, S, S);
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
        hn_lower_fan_out(L, hn_lower_fresh(L, "caller", caller, sizeof(caller)), S, S);
        hn_lower_fresh(L, "j", j, sizeof(j));
        hn_lower_emit(L, "for %s in 0 .. %d {\n  set_stream stream(0)\n", j, steps);
        if (ar) {
            snprintf(dst, sizeof(dst), "%s[%s]", cv, j);
            snprintf(src, sizeof(src), "%s[%s]", av, j);
            hn_lower_gemm(L, c, "  ", dst, src, -1);
            comm_after(L, c, "  ");
            hn_lower_emit(L, "  allreduce %s <- %s op sum%s\n", dst, dst, c->via);
        } else {
            hn_lower_emit(L, "  %s = select %s, 1, %s\n", hn_lower_fresh(L, "chunk", a, sizeof(a)), av, j);
            snprintf(dst, sizeof(dst), "%s[%s]", p, j);
            hn_lower_gemm(L, c, "  ", dst, a, -1);
            comm_after(L, c, "  ");
            hn_lower_emit(L, "  %s %s[%s] <- %s op sum%s\n", coll, cv, j, dst, c->via);
        }
        hn_lower_emit(L, "}\n");
        hn_lower_join(L, caller, S, S);
        return;
    }
}
