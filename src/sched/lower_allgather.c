/* Lowering allgather + matmul/linear: sequential, the p2p ring (a shift
 * per step), per-chunk allgathers, per-rank broadcasts (docs/SCHEDULER.md).
 * The code each builds is written above it as the program's text. */

#include "lower_int.h"

/* allgather + matmul/linear */
void hn_lower_allgather_gemm(hn_lower *L, const hn_lower_pipe *c)
{
    const hn_pipe_plan *pl = &c->plan;
    hn_via via = pl->via;
    hn_coll_algo pr = pl->protocol;
    hn_dtype dt = c->sh.dtype;
    int n = L->world, S = pl->streams, steps = pl->chunks;
    long long m = c->sh.M / n, K = c->sh.K, N = c->sh.N;
    int ag = hn_lower_fresh(L, "gathered"), cv, av, caller, i, src, rows, owner, piece, u;
    hn_instr *loop, *group;
    hn_block *outer, *inner;
    switch (pl->strategy) {
    case HN_STRAT_SEQUENTIAL:
        /* gathered = alloc dt[n * m, K]
         * allgather gathered <- A
         * mm C <- gathered, B[, bias] */
        hn_lower_alloc(L, ag, dt, HN_LOWER_DIMS(n * m, K));
        hn_lower_coll(L, HN_OP_ALLGATHER, hn_lower_ref(L, ag, 0), hn_lower_ref_of(L, c->a), -1, NULL, via, pr);
        hn_lower_gemm(L, c, hn_lower_ref_of(L, c->out), hn_lower_ref(L, ag, 0), 1);
        return;
    case HN_STRAT_RING:
        /* step i: receive the shard of rank + i, send ours to rank - i
         *
         * gathered = alloc dt[n, m, K]
         * out = view C as [n, m, N]
         * (fan-out)
         * set_stream stream(0)
         * mm out[rank] <- A, B
         * for i in 1 .. n {
         *   set_stream stream(i % S)
         *   src = (rank + i) % world
         *   group {
         *     send A to (rank - i) % world
         *     recv gathered[src] from src
         *   }
         *   mm out[src] <- gathered[src], B
         * }
         * (join) */
        hn_lower_alloc(L, ag, dt, HN_LOWER_DIMS(n, m, K));
        cv = hn_lower_fresh(L, "out");
        hn_lower_view(L, cv, hn_lower_ref_of(L, c->out), HN_LOWER_DIMS(n, m, N));
        caller = hn_lower_fresh(L, "caller");
        hn_lower_fan_out(L, caller, steps, S);
        hn_lower_stream_at(L, HN_OP_SET_STREAM, hn_ex_int(0));
        hn_lower_gemm(L, c, hn_lower_ref(L, cv, 1, hn_ex_leaf(HN_EX_RANK)), hn_lower_ref_of(L, c->a), 1);
        i = hn_lower_fresh(L, "i");
        src = hn_lower_fresh(L, "src");
        loop = hn_lower_for(L, i, hn_ex_int(1), hn_ex_int(n), 1);
        outer = hn_lower_open(L, loop, 0);
        hn_lower_stream_at(L, HN_OP_SET_STREAM, hn_lower_stream_index(i, S));
        hn_lower_let(L, src, hn_lower_peer(HN_B_ADD, hn_ex_var(i)));
        group = hn_lower_group(L);
        inner = hn_lower_open(L, group, 0);
        hn_lower_p2p(L, HN_OP_SEND, hn_lower_ref_of(L, c->a), hn_lower_peer(HN_B_SUB, hn_ex_var(i)), via, pr);
        hn_lower_p2p(L, HN_OP_RECV, hn_lower_ref(L, ag, 1, hn_ex_var(src)), hn_ex_var(src), via, pr);
        hn_lower_close(L, inner);
        hn_lower_gemm(L, c, hn_lower_ref(L, cv, 1, hn_ex_var(src)), hn_lower_ref(L, ag, 1, hn_ex_var(src)), 1);
        hn_lower_close(L, outer);
        hn_lower_join(L, caller, steps, S);
        return;
    case HN_STRAT_COLLECTIVE:
        /* chunk j: rows j of every rank's shard, gathered, then multiplied
         * into those rows of the output (a strided view)
         *
         * gathered = alloc dt[steps, n, m / steps, K]
         * pieces = view A as [steps, m / steps, K]
         * out = view C as [n, steps, m / steps, N]
         * (fan-out)
         * for j in 0 .. steps {
         *   set_stream stream(j % S)
         *   allgather gathered[j] <- pieces[j]
         *   rows = select out, 1, j
         *   mm rows <- gathered[j], B
         * }
         * (join) */
        hn_lower_alloc(L, ag, dt, HN_LOWER_DIMS(steps, n, m / steps, K));
        av = hn_lower_fresh(L, "pieces");
        hn_lower_view(L, av, hn_lower_ref_of(L, c->a), HN_LOWER_DIMS(steps, m / steps, K));
        cv = hn_lower_fresh(L, "out");
        hn_lower_view(L, cv, hn_lower_ref_of(L, c->out), HN_LOWER_DIMS(n, steps, m / steps, N));
        caller = hn_lower_fresh(L, "caller");
        hn_lower_fan_out(L, caller, steps, S);
        outer = hn_lower_steps(L, "j", steps, S, &i);
        hn_lower_coll(L, HN_OP_ALLGATHER, hn_lower_ref(L, ag, 1, hn_ex_var(i)), hn_lower_ref(L, av, 1, hn_ex_var(i)),
                      -1, NULL, via, pr);
        rows = hn_lower_fresh(L, "rows");
        hn_lower_select(L, rows, hn_lower_ref(L, cv, 0), 1, hn_ex_var(i));
        hn_lower_gemm(L, c, hn_lower_ref(L, rows, 0), hn_lower_ref(L, ag, 1, hn_ex_var(i)), 1);
        hn_lower_close(L, outer);
        hn_lower_join(L, caller, steps, S);
        return;
    default:
        /* broadcast: step t sends piece t % u of rank t / u to all
         *
         * gathered = alloc dt[n, u, m / u, K]
         * pieces = view A as [u, m / u, K]
         * out = view C as [n, u, m / u, N]
         * (fan-out)
         * for t in 0 .. steps {
         *   set_stream stream(t % S)
         *   owner = t / u
         *   piece = t % u
         *   broadcast gathered[owner][piece] <- pieces[piece] root owner
         *   mm out[owner][piece] <- gathered[owner][piece], B
         * }
         * (join) */
        u = steps / n;
        hn_lower_alloc(L, ag, dt, HN_LOWER_DIMS(n, u, m / u, K));
        av = hn_lower_fresh(L, "pieces");
        hn_lower_view(L, av, hn_lower_ref_of(L, c->a), HN_LOWER_DIMS(u, m / u, K));
        cv = hn_lower_fresh(L, "out");
        hn_lower_view(L, cv, hn_lower_ref_of(L, c->out), HN_LOWER_DIMS(n, u, m / u, N));
        caller = hn_lower_fresh(L, "caller");
        hn_lower_fan_out(L, caller, steps, S);
        outer = hn_lower_steps(L, "t", steps, S, &i);
        hn_lower_owner_piece(L, i, u, &owner, &piece);
        hn_lower_coll(L, HN_OP_BROADCAST, hn_lower_ref(L, ag, 2, hn_ex_var(owner), hn_ex_var(piece)),
                      hn_lower_ref(L, av, 1, hn_ex_var(piece)), -1, hn_ex_var(owner), via, pr);
        hn_lower_gemm(L, c, hn_lower_ref(L, cv, 2, hn_ex_var(owner), hn_ex_var(piece)),
                      hn_lower_ref(L, ag, 2, hn_ex_var(owner), hn_ex_var(piece)), 1);
        hn_lower_close(L, outer);
        hn_lower_join(L, caller, steps, S);
        return;
    }
}
