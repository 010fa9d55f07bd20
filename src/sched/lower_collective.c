/* Lowering plain allgather, reduce_scatter and allreduce in chunks on
 * streams (docs/SCHEDULER.md). The code each builds is written above it
 * as the program's text. */

#include "lower_int.h"

/* plain allgather / reduce_scatter / allreduce in chunks */
void hn_lower_collective(hn_lower *L, const hn_lower_pipe *c)
{
    const hn_pipe_plan *pl = &c->plan;
    hn_via via = pl->via;
    hn_coll_algo pr = pl->protocol;
    hn_dtype dt = c->sh.dtype;
    int n = L->world, S = pl->streams, steps = pl->chunks;
    long long E = c->sh.M; /* elements per rank's chunk (allreduce: all) */
    hn_op op = c->in->op == HN_OP_PIPE_ALLGATHER   ? HN_OP_ALLGATHER
               : c->in->op == HN_OP_PIPE_ALLREDUCE ? HN_OP_ALLREDUCE
                                                   : HN_OP_REDUCE_SCATTER;
    int redop = c->sh.kind != HN_PIPE_AG ? (int)c->in->redop : -1; /* `op R` but for allgather */
    int buf, iv, ov, caller, j, d, q, v, u;
    hn_block *outer;
    if (pl->strategy == HN_STRAT_SEQUENTIAL) { /* KW Y <- X [op R] */
        hn_lower_coll(L, op, hn_lower_ref_of(L, c->out), hn_lower_ref_of(L, c->a), redop, NULL, via, pr);
        return;
    }
    caller = hn_lower_fresh(L, "caller");
    hn_lower_fan_out(L, caller, steps, S);
    if (pl->strategy == HN_STRAT_BROADCAST) {
        /* straight into the output
         *
         * pieces = view X as [u, E / u]
         * out = view Y as [n, u, E / u]
         * for t in 0 .. steps {
         *   set_stream stream(t % S)
         *   owner = t / u
         *   piece = t % u
         *   broadcast out[owner][piece] <- pieces[piece] root owner
         * } */
        u = steps / n;
        iv = hn_lower_fresh(L, "pieces");
        hn_lower_view(L, iv, hn_lower_ref_of(L, c->a), HN_LOWER_DIMS(u, E / u));
        ov = hn_lower_fresh(L, "out");
        hn_lower_view(L, ov, hn_lower_ref_of(L, c->out), HN_LOWER_DIMS(n, u, E / u));
        outer = hn_lower_steps(L, "t", steps, S, &j);
        hn_lower_owner_piece(L, j, u, &q, &v);
        hn_lower_coll(L, HN_OP_BROADCAST, hn_lower_ref(L, ov, 2, hn_ex_var(q), hn_ex_var(v)),
                      hn_lower_ref(L, iv, 1, hn_ex_var(v)), -1, hn_ex_var(q), via, pr);
        hn_lower_close(L, outer);
    } else if (c->sh.kind == HN_PIPE_AR) {
        /* contiguous chunks in place
         *
         * pieces = view X as [steps, E / steps]
         * out = view Y as [steps, E / steps]
         * for j in 0 .. steps {
         *   set_stream stream(j % S)
         *   allreduce out[j] <- pieces[j] op R
         * } */
        iv = hn_lower_fresh(L, "pieces");
        hn_lower_view(L, iv, hn_lower_ref_of(L, c->a), HN_LOWER_DIMS(steps, E / steps));
        ov = hn_lower_fresh(L, "out");
        hn_lower_view(L, ov, hn_lower_ref_of(L, c->out), HN_LOWER_DIMS(steps, E / steps));
        outer = hn_lower_steps(L, "j", steps, S, &j);
        hn_lower_coll(L, HN_OP_ALLREDUCE, hn_lower_ref(L, ov, 1, hn_ex_var(j)), hn_lower_ref(L, iv, 1, hn_ex_var(j)),
                      redop, NULL, via, pr);
        hn_lower_close(L, outer);
    } else if (c->sh.kind == HN_PIPE_AG) {
        /* chunk j of every rank, then into place
         *
         * staged = alloc dt[steps, n, E / steps]
         * pieces = view X as [steps, E / steps]
         * out = view Y as [n, steps, E / steps]
         * for j in 0 .. steps {
         *   set_stream stream(j % S)
         *   allgather staged[j] <- pieces[j]
         *   place = select out, 1, j
         *   copy place <- staged[j]
         * } */
        buf = hn_lower_fresh(L, "staged");
        hn_lower_alloc(L, buf, dt, HN_LOWER_DIMS(steps, n, E / steps));
        iv = hn_lower_fresh(L, "pieces");
        hn_lower_view(L, iv, hn_lower_ref_of(L, c->a), HN_LOWER_DIMS(steps, E / steps));
        ov = hn_lower_fresh(L, "out");
        hn_lower_view(L, ov, hn_lower_ref_of(L, c->out), HN_LOWER_DIMS(n, steps, E / steps));
        outer = hn_lower_steps(L, "j", steps, S, &j);
        hn_lower_coll(L, HN_OP_ALLGATHER, hn_lower_ref(L, buf, 1, hn_ex_var(j)), hn_lower_ref(L, iv, 1, hn_ex_var(j)),
                      -1, NULL, via, pr);
        d = hn_lower_fresh(L, "place");
        hn_lower_select(L, d, hn_lower_ref(L, ov, 0), 1, hn_ex_var(j));
        hn_lower_compute(L, HN_OP_COPY, hn_lower_ref(L, d, 0), 1, hn_lower_ref(L, buf, 1, hn_ex_var(j)));
        hn_lower_close(L, outer);
    } else {
        /* reduce_scatter: chunk j of every block staged, then reduced
         *
         * staged = alloc dt[steps, n, E / steps]
         * pieces = view X as [n, steps, E / steps]
         * out = view Y as [steps, E / steps]
         * for j in 0 .. steps {
         *   set_stream stream(j % S)
         *   chunk = select pieces, 1, j
         *   copy staged[j] <- chunk
         *   reduce_scatter out[j] <- staged[j] op R
         * } */
        buf = hn_lower_fresh(L, "staged");
        hn_lower_alloc(L, buf, dt, HN_LOWER_DIMS(steps, n, E / steps));
        iv = hn_lower_fresh(L, "pieces");
        hn_lower_view(L, iv, hn_lower_ref_of(L, c->a), HN_LOWER_DIMS(n, steps, E / steps));
        ov = hn_lower_fresh(L, "out");
        hn_lower_view(L, ov, hn_lower_ref_of(L, c->out), HN_LOWER_DIMS(steps, E / steps));
        outer = hn_lower_steps(L, "j", steps, S, &j);
        d = hn_lower_fresh(L, "chunk");
        hn_lower_select(L, d, hn_lower_ref(L, iv, 0), 1, hn_ex_var(j));
        hn_lower_compute(L, HN_OP_COPY, hn_lower_ref(L, buf, 1, hn_ex_var(j)), 1, hn_lower_ref(L, d, 0));
        hn_lower_coll(L, HN_OP_REDUCE_SCATTER, hn_lower_ref(L, ov, 1, hn_ex_var(j)),
                      hn_lower_ref(L, buf, 1, hn_ex_var(j)), redop, NULL, via, pr);
        hn_lower_close(L, outer);
    }
    hn_lower_join(L, caller, steps, S);
}
