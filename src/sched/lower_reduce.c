/* Lowering matmul/linear + reduce_scatter and + allreduce: sequential, the
 * ring of partial sums (then an allgather, for allreduce), per-chunk
 * reduce_scatters or allreduces (docs/SCHEDULER.md). The pipelines run
 * their GEMMs in order on one stream and their communication on another,
 * each step's after its GEMM: two GEMMs never race for the SMs, so the
 * one whose result goes out first also finishes first. The code each
 * builds is written above it as the program's text. */

#include "lower_int.h"

/* The streams of a reduction pipeline: stream(0) computes, stream(1)
 * reduces and communicates (one stream: both on stream(0)). `comm_after`
 * makes the communication stream wait for the GEMMs issued so far — the
 * one just issued, not the next. */
static int reduce_streams(const hn_lower_pipe *c) { return c->plan.streams > 1 ? 2 : 1; }

static void comm_after(hn_lower *L, const hn_lower_pipe *c)
{
    if (reduce_streams(c) > 1) { /* set_stream stream(1); wait_stream stream(0) */
        hn_lower_stream_at(L, HN_OP_SET_STREAM, hn_ex_int(1));
        hn_lower_stream_at(L, HN_OP_WAIT_STREAM, hn_ex_int(0));
    }
}

/* The ring of partial sums: at step k rank r computes the rows of block
 * (r - 1 - k) % world, adds what rank r - 1 passed on for them and passes
 * the sum to r + 1; at the last step the block is its own (it adds the
 * bias), and the sum lands in dst. The GEMM of step k + 1 runs while the
 * sum of step k is added and travels.
 *
 * partial = alloc dt[n, m, N]
 * received = alloc dt[n, m, N]
 * blocks = view A as [n, m, K]
 * (fan-out)
 * for k in 0 .. n - 1 {
 *   set_stream stream(0)
 *   mm partial[k] <- blocks[(rank - k - 1) % world], B
 *   (comm_after)
 *   if k > 0 {
 *     add partial[k] <- partial[k], received[k]
 *   }
 *   group {
 *     send partial[k] to (rank + 1) % world
 *     recv received[k + 1] from (rank - 1) % world
 *   }
 * }
 * set_stream stream(0)
 * mm partial[n - 1] <- blocks[rank], B[, bias]
 * (comm_after)
 * add dst <- partial[n - 1], received[n - 1] */
/* (rank - k - 1) % world */
static hn_expr *behind(int k)
{
    return hn_ex_bin(HN_B_MOD,
                     hn_ex_bin(HN_B_SUB, hn_ex_bin(HN_B_SUB, hn_ex_leaf(HN_EX_RANK), hn_ex_var(k)), hn_ex_int(1)),
                     hn_ex_leaf(HN_EX_WORLD));
}

static void rs_ring(hn_lower *L, const hn_lower_pipe *c, hn_tref dst, int caller)
{
    hn_via via = c->plan.via;
    hn_coll_algo pr = c->plan.protocol;
    int n = L->world, S = reduce_streams(c);
    long long m = c->sh.M / n, K = c->sh.K, N = c->sh.N;
    int part = hn_lower_fresh(L, "partial"), recvd = hn_lower_fresh(L, "received"), av, k;
    hn_instr *loop, *branch, *group;
    hn_block *outer, *inner;
    hn_lower_alloc(L, part, c->sh.dtype, HN_LOWER_DIMS(n, m, N));
    hn_lower_alloc(L, recvd, c->sh.dtype, HN_LOWER_DIMS(n, m, N));
    av = hn_lower_fresh(L, "blocks");
    hn_lower_view(L, av, hn_lower_ref_of(L, c->a), HN_LOWER_DIMS(n, m, K));
    hn_lower_fan_out(L, caller, S, S);
    k = hn_lower_fresh(L, "k");
    loop = hn_lower_for(L, k, hn_ex_int(0), hn_ex_int(n - 1), 1);
    outer = hn_lower_open(L, loop, 0);
    hn_lower_stream_at(L, HN_OP_SET_STREAM, hn_ex_int(0));
    hn_lower_gemm(L, c, hn_lower_ref(L, part, 1, hn_ex_var(k)), hn_lower_ref(L, av, 1, behind(k)),
                  0); /* never the own block: no bias */
    comm_after(L, c);
    branch = hn_lower_if(L, hn_ex_bin(HN_B_GT, hn_ex_var(k), hn_ex_int(0)));
    inner = hn_lower_open(L, branch, 0);
    hn_lower_compute(L, HN_OP_ADD, hn_lower_ref(L, part, 1, hn_ex_var(k)), 2, hn_lower_ref(L, part, 1, hn_ex_var(k)),
                     hn_lower_ref(L, recvd, 1, hn_ex_var(k)));
    hn_lower_close(L, inner);
    group = hn_lower_group(L);
    inner = hn_lower_open(L, group, 0);
    hn_lower_p2p(L, HN_OP_SEND, hn_lower_ref(L, part, 1, hn_ex_var(k)), hn_lower_peer(HN_B_ADD, hn_ex_int(1)), via,
                 pr);
    hn_lower_p2p(L, HN_OP_RECV, hn_lower_ref(L, recvd, 1, hn_ex_bin(HN_B_ADD, hn_ex_var(k), hn_ex_int(1))),
                 hn_lower_peer(HN_B_SUB, hn_ex_int(1)), via, pr);
    hn_lower_close(L, inner);
    hn_lower_close(L, outer);
    /* the last step: the own block, then the sum that arrived for it */
    hn_lower_stream_at(L, HN_OP_SET_STREAM, hn_ex_int(0));
    hn_lower_gemm(L, c, hn_lower_ref(L, part, 1, hn_ex_int(n - 1)), hn_lower_ref(L, av, 1, hn_ex_leaf(HN_EX_RANK)), 1);
    comm_after(L, c);
    hn_lower_compute(L, HN_OP_ADD, dst, 2, hn_lower_ref(L, part, 1, hn_ex_int(n - 1)),
                     hn_lower_ref(L, recvd, 1, hn_ex_int(n - 1)));
}

/* matmul/linear + reduce_scatter, + allreduce */
void hn_lower_gemm_reduce(hn_lower *L, const hn_lower_pipe *c)
{
    const hn_pipe_plan *pl = &c->plan;
    hn_via via = pl->via, ag_via = pl->via;
    hn_coll_algo pr = pl->protocol, ag_pr = pl->protocol;
    hn_dtype dt = c->sh.dtype;
    int n = L->world, S = reduce_streams(c), steps = pl->chunks, ar = c->sh.kind == HN_PIPE_MM_AR;
    long long M = c->sh.M, K = c->sh.K, N = c->sh.N, rows = ar ? M : M / n;
    int p, caller, av, cv, j, a, rc;
    hn_op coll = ar ? HN_OP_ALLREDUCE : HN_OP_REDUCE_SCATTER;
    hn_instr *loop;
    hn_block *outer;
    switch (pl->strategy) {
    case HN_STRAT_SEQUENTIAL:
        if (ar) { /* mm C <- A, B (bias on rank 0); allreduce C <- C op sum */
            hn_lower_gemm(L, c, hn_lower_ref_of(L, c->out), hn_lower_ref_of(L, c->a), -1);
            hn_lower_coll(L, HN_OP_ALLREDUCE, hn_lower_ref_of(L, c->out), hn_lower_ref_of(L, c->out), HN_RED_SUM,
                          NULL, via, pr);
            return;
        }
        /* partial = alloc dt[M, N]; mm partial <- A, B (bias on rank 0);
         * reduce_scatter C <- partial op sum */
        p = hn_lower_fresh(L, "partial");
        hn_lower_alloc(L, p, dt, HN_LOWER_DIMS(M, N));
        hn_lower_gemm(L, c, hn_lower_ref(L, p, 0), hn_lower_ref_of(L, c->a), -1);
        hn_lower_coll(L, HN_OP_REDUCE_SCATTER, hn_lower_ref_of(L, c->out), hn_lower_ref(L, p, 0), HN_RED_SUM, NULL,
                      via, pr);
        return;
    case HN_STRAT_RING:
        if (n == 1) { /* one rank: its block is the whole product */
            hn_lower_gemm(L, c, hn_lower_ref_of(L, c->out), hn_lower_ref_of(L, c->a), 1);
            return;
        }
        caller = hn_lower_fresh(L, "caller");
        if (!ar) {
            rs_ring(L, c, hn_lower_ref_of(L, c->out), caller);
        } else {
            /* reduce-scatter into this rank's block, then gather the blocks:
             * block = alloc dt[M / n, N]; (the ring into block);
             * allgather C <- block */
            rc = hn_lower_fresh(L, "block");
            hn_lower_alloc(L, rc, dt, HN_LOWER_DIMS(M / n, N));
            rs_ring(L, c, hn_lower_ref(L, rc, 0), caller);
            if (pl->ag_via != HN_VIA_AUTO && pl->ag_via != HN_VIA_DEFAULT) {
                ag_via = pl->ag_via;
                ag_pr = pl->ag_protocol;
            }
            hn_lower_coll(L, HN_OP_ALLGATHER, hn_lower_ref_of(L, c->out), hn_lower_ref(L, rc, 0), -1, NULL, ag_via,
                          ag_pr);
        }
        hn_lower_join(L, caller, S, S);
        return;
    default:
        /* collective: chunk j is rows j of every block (reduce_scatter) or
         * of the output
         *
         * allreduce:                           reduce_scatter:
         *                                      partial = alloc dt[steps, n, rows / steps, N]
         * rows = view A as [steps, M / steps, K]     rows = view A as [n, steps, rows / steps, K]
         * out = view C as [steps, M / steps, N]      out = view C as [steps, rows / steps, N]
         * (fan-out)
         * for j in 0 .. steps {
         *   set_stream stream(0)
         *   mm out[j] <- rows[j], B (bias on rank 0)  chunk = select rows, 1, j
         *                                             mm partial[j] <- chunk, B (bias on rank 0)
         *   (comm_after)
         *   allreduce out[j] <- out[j] op sum         reduce_scatter out[j] <- partial[j] op sum
         * }
         * (join) */
        p = hn_lower_fresh(L, "partial");
        if (ar) {
            av = hn_lower_fresh(L, "rows");
            hn_lower_view(L, av, hn_lower_ref_of(L, c->a), HN_LOWER_DIMS(steps, M / steps, K));
            cv = hn_lower_fresh(L, "out");
            hn_lower_view(L, cv, hn_lower_ref_of(L, c->out), HN_LOWER_DIMS(steps, M / steps, N));
        } else {
            hn_lower_alloc(L, p, dt, HN_LOWER_DIMS(steps, n, rows / steps, N));
            av = hn_lower_fresh(L, "rows");
            hn_lower_view(L, av, hn_lower_ref_of(L, c->a), HN_LOWER_DIMS(n, steps, rows / steps, K));
            cv = hn_lower_fresh(L, "out");
            hn_lower_view(L, cv, hn_lower_ref_of(L, c->out), HN_LOWER_DIMS(steps, rows / steps, N));
        }
        caller = hn_lower_fresh(L, "caller");
        hn_lower_fan_out(L, caller, S, S);
        j = hn_lower_fresh(L, "j");
        loop = hn_lower_for(L, j, hn_ex_int(0), hn_ex_int(steps), 1);
        outer = hn_lower_open(L, loop, 0);
        hn_lower_stream_at(L, HN_OP_SET_STREAM, hn_ex_int(0));
        if (ar) {
            hn_lower_gemm(L, c, hn_lower_ref(L, cv, 1, hn_ex_var(j)), hn_lower_ref(L, av, 1, hn_ex_var(j)), -1);
            comm_after(L, c);
            hn_lower_coll(L, coll, hn_lower_ref(L, cv, 1, hn_ex_var(j)), hn_lower_ref(L, cv, 1, hn_ex_var(j)),
                          HN_RED_SUM, NULL, via, pr);
        } else {
            a = hn_lower_fresh(L, "chunk");
            hn_lower_select(L, a, hn_lower_ref(L, av, 0), 1, hn_ex_var(j));
            hn_lower_gemm(L, c, hn_lower_ref(L, p, 1, hn_ex_var(j)), hn_lower_ref(L, a, 0), -1);
            comm_after(L, c);
            hn_lower_coll(L, coll, hn_lower_ref(L, cv, 1, hn_ex_var(j)), hn_lower_ref(L, p, 1, hn_ex_var(j)),
                          HN_RED_SUM, NULL, via, pr);
        }
        hn_lower_close(L, outer);
        hn_lower_join(L, caller, S, S);
        return;
    }
}
