/* The scheduler's lowering pass: pipelined statements and stream-parallel
 * loops -> the plain instructions they stand for, for one configuration
 * (world, nstreams, parameter values). Pure IR -> IR: a dry run of the
 * source reads the statements' operand shapes, the cost model (cost.c)
 * settles every `auto`, and the code is built as IR through ir.h's
 * constructors (lower_build.c) in the seed-001 form (worker streams wait
 * for the caller in a loop of their own, step i on stream(i % S), the
 * caller waits for every stream used), in the lowered program's names, the
 * source's operands copied, and stamped with the statement's line, column
 * and text so that every message about it names the statement. Not written
 * as text and parsed back: the text the lowered program is seen as
 * (`hirnode dump --lowered`, the golden files) is the printer's, and no
 * position of the code's own survives the stamp. docs/SCHEDULER.md shows
 * each strategy's code. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "../ir/parse.h"
#include "lower_int.h"

static void stmt_error(hn_lower *L, const hn_instr *in, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

static void stmt_error(hn_lower *L, const hn_instr *in, const char *fmt, ...)
{
    va_list ap;
    hn_sb_printf(L->diag, "%s:%d:%d: error: ", L->src->filename, in->line, in->col);
    hn_print_instr_short(L->diag, L->src, in);
    hn_sb_append(L->diag, ": ");
    va_start(ap, fmt);
    hn_sb_vprintf(L->diag, fmt, ap);
    va_end(ap);
    hn_sb_append(L->diag, "\n");
    L->errors++;
}
/* ---- generated code: positions and origin ---- */

static void unplace_expr(hn_expr *e)
{
    if (e == NULL)
        return;
    e->line = e->col = 0; /* messages then take the instruction's position */
    unplace_expr(e->a);
    unplace_expr(e->b);
}

static void place_tref(hn_tref *t, const hn_instr *stmt)
{
    t->line = stmt->line;
    t->col = stmt->col;
    for (int i = 0; i < t->nidx; i++)
        unplace_expr(t->idx[i]);
}

static void place_block(hn_block *b, const hn_instr *stmt, int origin);

/* Gives a generated instruction its statement's line, column and text. */
static void place(hn_instr *in, const hn_instr *stmt, int origin)
{
    in->line = stmt->line;
    in->col = stmt->col;
    in->origin = origin;
    place_tref(&in->a, stmt);
    place_tref(&in->b, stmt);
    for (int i = 0; i < in->type.ndim; i++)
        unplace_expr(in->type.shape[i]);
    for (int i = 0; i < 3; i++)
        unplace_expr(in->e[i]);
    unplace_expr(in->sref_index);
    for (int i = 0; i < in->nteam; i++)
        unplace_expr(in->team[i]);
    for (int i = 0; i < in->nargs; i++) {
        place_tref(&in->args[i].t, stmt);
        unplace_expr(in->args[i].e);
    }
    place_block(&in->body, stmt, origin);
    place_block(&in->orelse, stmt, origin);
}

static void place_block(hn_block *b, const hn_instr *stmt, int origin)
{
    for (int i = 0; i < b->n; i++)
        place(b->items[i], stmt, origin);
}

/* The code in b, placed at the statement, moved to the end of out (freed
 * after an error). */
static void move_placed(hn_lower *L, hn_block *b, hn_block *out)
{
    place_block(b, L->stmt, L->origin);
    for (int i = 0; i < b->n; i++)
        if (L->st != HN_OK || hn_block_push(out, b->items[i]) != 0) {
            hn_lower_nomem(L);
            hn_instr_free(b->items[i]);
        }
    hn_free(b->items);
    memset(b, 0, sizeof(*b));
}

static void begin_stmt(hn_lower *L, const hn_instr *in)
{
    hn_strbuf sb;
    L->stmt = in;
    hn_sb_init(&sb);
    hn_print_instr_short(&sb, L->src, in);
    if (sb.failed || (L->origin = hn_prog_add_origin(L->out, sb.data ? sb.data : "")) < 0)
        L->st = HN_ERR_NOMEM;
    hn_sb_free(&sb);
    memset(&L->code, 0, sizeof(L->code));
    memset(&L->top, 0, sizeof(L->top));
    L->at = &L->code;
}

static void end_stmt(hn_lower *L, hn_block *out)
{
    move_placed(L, &L->top, &L->hoist);
    move_placed(L, &L->code, out);
    L->at = NULL;
}

void begin_stmt_of(hn_lower *L, const hn_instr *in) { begin_stmt(L, in); }
void end_stmt_of(hn_lower *L, hn_block *out) { end_stmt(L, out); }
/* ---- stream-parallel loops ---- */

static void lower_block(hn_lower *L, const hn_block *in, hn_block *out);

/* min(hi, lo + nstreams * s), max for a negative step */
static hn_expr *first_streams(int lo, int hi, int64_t s)
{
    return hn_ex_call(s > 0 ? HN_EX_MIN : HN_EX_MAX, hn_ex_var(hi),
                      hn_ex_bin(HN_B_ADD, hn_ex_var(lo),
                                hn_ex_bin(HN_B_MUL, hn_ex_leaf(HN_EX_NSTREAMS), hn_lower_num(s))));
}

/* stream(j % nstreams)'s index */
static hn_expr *stream_of_trip(int j)
{
    return hn_ex_bin(HN_B_MOD, hn_ex_var(j), hn_ex_leaf(HN_EX_NSTREAMS));
}

/* for j in a .. b [step s] on streams { body }
 *   ->
 * lo = a; hi = b; caller = current_stream
 * for j in lo .. min(hi, lo + nstreams * s) [step s] { set_stream stream(j % nstreams); wait_stream caller }
 * for j in lo .. hi [step s] { set_stream stream(j % nstreams); body }
 * set_stream caller
 * for j in lo .. min(hi, lo + nstreams * s) [step s] { wait_stream stream(j % nstreams) }
 * (max instead of min for a negative step): the first nstreams iterations
 * name every stream the loop uses. */
static void lower_stream_loop(hn_lower *L, const hn_instr *in, hn_block *out)
{
    int j = in->dst, lo, hi, caller;
    int64_t s = 1;
    hn_instr *loop, *main_loop;
    hn_block *outer, scaffold;
    begin_stmt(L, in);
    if (in->e[2] != NULL) /* a constant (the static verifier says so) */
        s = in->e[2]->kind == HN_EX_INT ? in->e[2]->ival : -in->e[2]->a->ival;
    lo = hn_lower_fresh(L, "lo");
    hi = hn_lower_fresh(L, "hi");
    caller = hn_lower_fresh(L, "caller");
    hn_lower_let(L, lo, hn_expr_clone(in->e[0]));
    hn_lower_let(L, hi, hn_expr_clone(in->e[1]));
    hn_lower_current_stream(L, caller);
    loop = hn_lower_for(L, j, hn_ex_var(lo), first_streams(lo, hi, s), s);
    outer = hn_lower_open(L, loop, 0);
    hn_lower_stream_at(L, HN_OP_SET_STREAM, stream_of_trip(j));
    hn_lower_stream_var(L, HN_OP_WAIT_STREAM, caller);
    hn_lower_close(L, outer);
    main_loop = hn_lower_for(L, j, hn_ex_var(lo), hn_ex_var(hi), s);
    outer = hn_lower_open(L, main_loop, 0);
    hn_lower_stream_at(L, HN_OP_SET_STREAM, stream_of_trip(j));
    hn_lower_close(L, outer);
    hn_lower_stream_var(L, HN_OP_SET_STREAM, caller);
    loop = hn_lower_for(L, j, hn_ex_var(lo), first_streams(lo, hi, s), s);
    outer = hn_lower_open(L, loop, 0);
    hn_lower_stream_at(L, HN_OP_WAIT_STREAM, stream_of_trip(j));
    hn_lower_close(L, outer);
    /* the scaffold placed at the statement; then the user's body, with its
     * own positions, follows the main loop's set_stream, as written */
    memset(&scaffold, 0, sizeof(scaffold));
    move_placed(L, &L->code, &scaffold);
    L->at = NULL;
    if (L->st == HN_OK)
        lower_block(L, &in->body, &main_loop->body);
    for (int i = 0; i < scaffold.n; i++)
        if (L->st != HN_OK || hn_block_push(out, scaffold.items[i]) != 0) {
            hn_lower_nomem(L);
            hn_instr_free(scaffold.items[i]);
        }
    hn_free(scaffold.items);
}
/* ---- pipelined statements ---- */

/* One statement's operands as the dry run saw them, the same on every rank
 * and at every execution; 0 (after an error) if not, -1 if never run. */
static int operands_of(hn_lower *L, const hn_instr *in, hn_pipe_rec *out)
{
    int found = 0;
    for (int k = L->seen_from[in->id]; k < L->seen_from[in->id + 1]; k++) {
        const hn_pipe_rec *p = L->seen[k].rec;
        int same = 1;
        if (!found) {
            *out = *p;
            found = 1;
            continue;
        }
        for (int t = 0; t < p->ntensors; t++) {
            const hn_tensor *a = &p->t[t], *b = &out->t[t];
            same &= a->ndim == b->ndim && a->dtype == b->dtype &&
                    memcmp(a->shape, b->shape, sizeof(a->shape[0]) * (size_t)a->ndim) == 0 &&
                    memcmp(a->stride, b->stride, sizeof(a->stride[0]) * (size_t)a->ndim) == 0;
        }
        if (!same) {
            stmt_error(L, in, "its tensors differ between ranks or between runs of it (rank %d); a "
                       "pipelined statement is lowered once, for one shape", L->seen[k].rank);
            return 0;
        }
    }
    return found ? 1 : -1;
}

/* The dry run's records of the pipelined statements sorted by statement
 * once (L->seen), not searched through for each; -1 when out of memory. */
static int index_seen(hn_lower *L)
{
    int n = L->src->ninstrs, total = 0, *at;
    for (int r = 0; r < L->world; r++)
        total += L->logs[r].npipes;
    L->seen_from = hn_calloc((size_t)n + 2, sizeof(int));
    L->seen = hn_calloc((size_t)total + 1, sizeof(*L->seen));
    at = hn_calloc((size_t)n + 1, sizeof(int));
    if (L->seen_from == NULL || L->seen == NULL || at == NULL) {
        hn_free(at);
        return -1;
    }
    for (int r = 0; r < L->world; r++)
        for (int i = 0; i < L->logs[r].npipes; i++)
            if (L->logs[r].pipes[i].instr >= 0 && L->logs[r].pipes[i].instr < n)
                L->seen_from[L->logs[r].pipes[i].instr + 1]++;
    for (int id = 0; id < n; id++) {
        L->seen_from[id + 1] += L->seen_from[id];
        at[id] = L->seen_from[id];
    }
    for (int r = 0; r < L->world; r++)
        for (int i = 0; i < L->logs[r].npipes; i++) {
            int id = L->logs[r].pipes[i].instr;
            if (id >= 0 && id < n) {
                L->seen[at[id]].rec = &L->logs[r].pipes[i];
                L->seen[at[id]++].rank = r;
            }
        }
    hn_free(at);
    return 0;
}

static int contiguous(const hn_tensor *t)
{
    int64_t s = 1;
    for (int i = t->ndim - 1; i >= 0; i--) {
        if (t->shape[i] != 1 && t->stride[i] != s)
            return 0;
        s *= t->shape[i];
    }
    return 1;
}

static const char *kind_names[] = {"allgather + matmul", "matmul + reduce_scatter", "matmul + allreduce",
                                   "allgather", "reduce_scatter", "allreduce"};

/* What the statement computes, checked against its tensors:
 * out, then operands (A, B|W [, bias]) or the one input. */
static int shape_of(hn_lower *L, hn_lower_pipe *c)
{
    const hn_instr *in = c->in;
    const hn_tensor *t = c->rec.t, *o = &t[0], *A = &t[1], *B = &t[2];
    char so[96], sa[96], sb[96];
    int n = L->world;
    hn_op op = in->op;
    hn_tensor_shape_text(o, so, sizeof(so));
    hn_tensor_shape_text(A, sa, sizeof(sa));
    hn_tensor_shape_text(B, sb, sizeof(sb));
    memset(&c->sh, 0, sizeof(c->sh));
    c->sh.world = n;
    c->sh.prof = L->prof;
    c->sh.dtype = o->dtype;
    c->sh.kind = op == HN_OP_AG_MATMUL || op == HN_OP_AG_LINEAR   ? HN_PIPE_AG_MM
                 : op == HN_OP_MATMUL_RS || op == HN_OP_LINEAR_RS ? HN_PIPE_MM_RS
                 : op == HN_OP_MATMUL_AR || op == HN_OP_LINEAR_AR ? HN_PIPE_MM_AR
                 : op == HN_OP_PIPE_ALLGATHER                     ? HN_PIPE_AG
                 : op == HN_OP_PIPE_REDUCE_SCATTER                ? HN_PIPE_RS
                                                                  : HN_PIPE_AR;
    for (int i = 0; i < c->rec.ntensors; i++)
        if (!contiguous(&t[i]) && !(i == 2 && c->sh.kind <= HN_PIPE_MM_AR)) {
            hn_tensor_shape_text(&t[i], sa, sizeof(sa));
            stmt_error(L, in, "%s %s is a strided view: a pipelined statement needs it contiguous",
                       i == 0 ? "the output" : "the operand", sa);
            return 0;
        }
    if (c->sh.kind >= HN_PIPE_AG) { /* plain collectives: flat buffers */
        int64_t no = hn_tensor_numel(o), ni = hn_tensor_numel(A);
        int64_t want_o = c->sh.kind == HN_PIPE_AG ? ni * n : c->sh.kind == HN_PIPE_RS ? ni / n : ni;
        if (no != want_o || (c->sh.kind == HN_PIPE_RS && ni != no * n)) {
            stmt_error(L, in, "%s of %s into %s over %d ranks: the sizes do not fit", kind_names[c->sh.kind], sa,
                       so, n);
            return 0;
        }
        c->sh.M = c->sh.kind == HN_PIPE_AG ? ni : no;
        c->sh.K = c->sh.N = 1;
        return 1;
    }
    if (A->ndim != 2 || o->ndim != 2 || B->ndim != 2) {
        stmt_error(L, in, "%s takes 2-d tensors (view them): %s = %s x %s", kind_names[c->sh.kind], so, sa, sb);
        return 0;
    }
    c->sh.K = A->shape[1];
    c->sh.N = c->linear ? B->shape[0] : B->shape[1];
    if ((c->linear ? B->shape[1] : B->shape[0]) != c->sh.K) {
        stmt_error(L, in, "%s of %s and %s: the inner dimensions differ", hn_op_table[c->mm].keyword, sa, sb);
        return 0;
    }
    if (c->bias && (t[3].ndim != 1 || t[3].shape[0] != c->sh.N)) {
        stmt_error(L, in, "linear: bias must be [%lld]", (long long)c->sh.N);
        return 0;
    }
    switch (c->sh.kind) {
    case HN_PIPE_AG_MM:
        c->sh.M = A->shape[0] * n;
        if (o->shape[0] != c->sh.M || o->shape[1] != c->sh.N) {
            stmt_error(L, in, "allgather(%s) over %d ranks times %s is [%lld, %lld], not %s", sa, n, sb,
                       (long long)c->sh.M, (long long)c->sh.N, so);
            return 0;
        }
        break;
    case HN_PIPE_MM_RS:
        c->sh.M = A->shape[0];
        if (c->sh.M % n != 0) {
            stmt_error(L, in, "the %lld rows of %s do not split into world=%d blocks", (long long)c->sh.M, sa, n);
            return 0;
        }
        if (o->shape[0] != c->sh.M / n || o->shape[1] != c->sh.N) {
            stmt_error(L, in, "reduce_scatter over %d ranks of %s x %s is [%lld, %lld] per rank, not %s", n, sa,
                       sb, (long long)(c->sh.M / n), (long long)c->sh.N, so);
            return 0;
        }
        break;
    default:
        c->sh.M = A->shape[0];
        if (o->shape[0] != c->sh.M || o->shape[1] != c->sh.N) {
            stmt_error(L, in, "%s x %s is [%lld, %lld], not %s", sa, sb, (long long)c->sh.M, (long long)c->sh.N,
                       so);
            return 0;
        }
        break;
    }
    return 1;
}

/* chunks= and streams=: fixed before the run (params, world, nstreams). */
static int option_value(hn_lower *L, const hn_instr *in, const hn_expr *e, const char *what, int *out)
{
    hn_scalar_env env;
    int64_t *ivals = hn_calloc((size_t)L->src->nvars + 1, sizeof(int64_t)), v;
    char err[160];
    hn_status_t st;
    *out = 0;
    if (e == NULL) {
        hn_free(ivals);
        return 1;
    }
    if (ivals == NULL) {
        L->st = HN_ERR_NOMEM;
        return 0;
    }
    for (int i = 0; i < L->src->nparams; i++)
        ivals[L->src->params[i].var] = L->params[i];
    env = (hn_scalar_env){ivals, 0, L->world, L->nstreams};
    st = hn_expr_eval(e, &env, &v, err, sizeof(err));
    hn_free(ivals);
    if (st != HN_OK) {
        stmt_error(L, in, "%s: %s", what, err);
        return 0;
    }
    if (v < 1 || v > 1 << 20) {
        stmt_error(L, in, "%s=%lld out of range [1, %d]", what, (long long)v, 1 << 20);
        return 0;
    }
    *out = (int)v;
    return 1;
}

void hn_lower_gemm(hn_lower *L, const hn_lower_pipe *c, hn_tref dst, hn_tref a, int bias)
{
    hn_instr *branch;
    hn_block *outer;
    if (!c->bias || bias == 0) { /* mm dst <- a, b */
        hn_lower_compute(L, c->mm, dst, 2, a, hn_lower_ref_of(L, c->b));
        return;
    }
    if (bias > 0) { /* mm dst <- a, b, bias */
        hn_lower_compute(L, c->mm, dst, 3, a, hn_lower_ref_of(L, c->b), hn_lower_ref_of(L, c->biast));
        return;
    }
    /* if rank == 0 { mm dst <- a, b, bias } else { mm dst <- a, b } */
    branch = hn_lower_if(L, hn_ex_bin(HN_B_EQ, hn_ex_leaf(HN_EX_RANK), hn_ex_int(0)));
    outer = hn_lower_open(L, branch, 0);
    hn_lower_compute(L, c->mm, hn_lower_ref_of(L, &dst), 3, hn_lower_ref_of(L, &a), hn_lower_ref_of(L, c->b),
                     hn_lower_ref_of(L, c->biast));
    hn_lower_close(L, outer);
    outer = hn_lower_open(L, branch, 1);
    hn_lower_compute(L, c->mm, dst, 2, a, hn_lower_ref_of(L, c->b));
    hn_lower_close(L, outer);
}

static void lower_pipelined(hn_lower *L, const hn_instr *in, hn_block *out)
{
    hn_lower_pipe c;
    char err[1024]; /* what auto tried and why each failed */
    int found;
    memset(&c, 0, sizeof(c));
    c.in = in;
    if ((found = operands_of(L, in, &c.rec)) <= 0)
        return; /* an error, or never reached in this configuration: nothing to run */
    c.linear = in->op == HN_OP_AG_LINEAR || in->op == HN_OP_LINEAR_RS || in->op == HN_OP_LINEAR_AR;
    c.bias = c.linear && in->nargs == 3;
    c.mm = c.linear ? HN_OP_LINEAR : HN_OP_MATMUL;
    if (!shape_of(L, &c))
        return;
    c.plan.strategy = in->strategy;
    c.plan.via = in->via;
    if (L->nodes > 1 && (c.plan.via == HN_VIA_AUTO || c.plan.via == HN_VIA_DEFAULT))
        c.plan.via = HN_VIA_NCCL; /* between nodes only NCCL moves data */
    c.plan.protocol = (hn_coll_algo)in->algo;
    if (!option_value(L, in, in->e[0], "chunks", &c.plan.chunks) ||
        !option_value(L, in, in->e[1], "streams", &c.plan.streams))
        return;
    if (hn_pipe_choose(&c.sh, hn_op_table[in->op].flags, &c.plan, err, sizeof(err)) != HN_OK) {
        stmt_error(L, in, "%s", err);
        return;
    }
    c.out = &in->a;
    c.a = &in->args[0].t;
    c.b = in->nargs > 1 ? &in->args[1].t : NULL;
    c.biast = c.bias ? &in->args[2].t : NULL;
    begin_stmt(L, in);
    if (L->notes != NULL) {
        char what[64];
        snprintf(what, sizeof(what), "%s", kind_names[c.sh.kind]);
        if (c.linear) { /* say linear where it is */
            char *m = strstr(what, "matmul");
            if (m != NULL)
                memcpy(m, "linear", 6);
        }
        hn_sb_printf(L->notes, "line %d: %s: strategy=%s, chunks=%d, streams=%d", in->line, what,
                     hn_strategy_name(c.plan.strategy), c.plan.chunks, c.plan.streams);
        if (c.plan.via != HN_VIA_AUTO)
            hn_sb_printf(L->notes, ", via=%s", hn_via_name(c.plan.via));
        if (c.plan.via == HN_VIA_P2P)
            hn_sb_printf(L->notes, ", protocol=%s", c.plan.protocol == HN_ALGO_PULL ? "get" : "put");
        if (c.sh.kind == HN_PIPE_MM_AR && c.plan.strategy == HN_STRAT_RING && L->world > 1)
            hn_sb_printf(L->notes, ", allgather via=%s%s", hn_via_name(c.plan.ag_via),
                         c.plan.ag_via != HN_VIA_P2P ? "" : c.plan.ag_protocol == HN_ALGO_PULL ? " get" : " put");
        hn_sb_printf(L->notes, " (the model: %.4g ms)\n", c.plan.seconds * 1e3);
    }
    switch (c.sh.kind) {
    case HN_PIPE_AG_MM: hn_lower_allgather_gemm(L, &c); break;
    case HN_PIPE_MM_RS:
    case HN_PIPE_MM_AR: hn_lower_gemm_reduce(L, &c); break;
    default: hn_lower_collective(L, &c); break;
    }
    end_stmt(L, out);
}

static void lower_block(hn_lower *L, const hn_block *in, hn_block *out)
{
    for (int i = 0; i < in->n && L->st == HN_OK; i++) {
        const hn_instr *ins = in->items[i];
        hn_instr *c;
        if (ins->on_streams) {
            lower_stream_loop(L, ins, out);
            continue;
        }
        if (hn_op_table[ins->op].flags & HN_OPF_PIPE) {
            lower_pipelined(L, ins, out);
            continue;
        }
        if (ins->op == HN_OP_ALLREDUCE && hn_lower_hier_allreduce(L, ins, out))
            continue;
        if ((c = hn_instr_clone(ins)) == NULL) {
            L->st = HN_ERR_NOMEM;
            return;
        }
        hn_block_free(&c->body);
        hn_block_free(&c->orelse);
        lower_block(L, &ins->body, &c->body);
        lower_block(L, &ins->orelse, &c->orelse);
        if (hn_block_push(out, c) != 0) {
            hn_instr_free(c);
            L->st = HN_ERR_NOMEM;
        }
    }
}

/* The lowered program's declarations: the source's, with the same slots. */
static hn_status_t copy_decls(const hn_program *src, hn_program *out)
{
    for (int i = 0; i < src->nvars; i++)
        if (hn_prog_var(out, src->names[i], (int)strlen(src->names[i])) != i)
            return HN_ERR_NOMEM;
    for (int i = 0; i < src->nparams; i++)
        if (hn_prog_add_param(out, src->params[i].var, hn_expr_clone(src->params[i].value), src->params[i].line,
                              src->params[i].col) != 0)
            return HN_ERR_NOMEM;
    for (int k = 0; k < src->ninputs + src->noutputs; k++) {
        const hn_io *io = k < src->ninputs ? &src->inputs[k] : &src->outputs[k - src->ninputs];
        hn_type ty;
        if (hn_type_clone(&ty, &io->type) != 0 ||
            hn_prog_add_io(out, k >= src->ninputs, io->var, &ty, io->shard_axis, io->line, io->col) != 0)
            return HN_ERR_NOMEM;
    }
    out->has_reference = src->has_reference;
    return HN_OK;
}

hn_status_t hn_sched_lower(const hn_program *src, int world, int nodes, int nstreams, const int64_t *params,
                           const hn_cost_profile *prof, hn_program **out, hn_strbuf *diag, hn_strbuf *notes)
{
    hn_lower L;
    hn_comm_log *logs = hn_calloc((size_t)world, sizeof(*logs));
    hn_block body;
    hn_status_t st;
    memset(&L, 0, sizeof(L));
    memset(&body, 0, sizeof(body));
    if (logs == NULL)
        return HN_ERR_NOMEM;
    /* the source's dry run: its own errors, and the pipelined operands */
    st = hn_verify_run(src, world, nstreams, params, diag, logs);
    if (st != HN_OK) {
        hn_comm_logs_free(logs, world);
        return st;
    }
    L.src = src;
    L.world = world;
    L.nodes = nodes;
    L.nstreams = nstreams;
    L.params = params;
    L.prof = prof;
    L.logs = logs;
    L.diag = diag;
    L.notes = notes;
    L.out = hn_prog_new(src->filename);
    if (L.out == NULL || index_seen(&L) != 0 || copy_decls(src, L.out) != HN_OK) {
        st = HN_ERR_NOMEM;
        goto done;
    }
    lower_block(&L, &src->body, &body);
    lower_block(&L, &src->reference, &L.out->reference);
    /* allocations first, so that a statement in a loop reuses its buffers */
    for (int i = 0; i < L.hoist.n && L.st == HN_OK; i++)
        if (hn_block_push(&L.out->body, L.hoist.items[i]) == 0)
            L.hoist.items[i] = NULL;
        else
            L.st = HN_ERR_NOMEM;
    for (int i = 0; i < body.n && L.st == HN_OK; i++)
        if (hn_block_push(&L.out->body, body.items[i]) == 0)
            body.items[i] = NULL;
        else
            L.st = HN_ERR_NOMEM;
    st = L.st != HN_OK ? L.st : L.errors ? HN_ERR_VERIFY : HN_OK;
    if (st == HN_OK)
        st = hn_prog_finish(L.out);
    if (st == HN_OK && (st = hn_verify_static(L.out, diag)) != HN_OK && st != HN_ERR_NOMEM) {
        hn_sb_printf(diag, "%s: error: internal: the lowered program fails the static verifier\n", src->filename);
        st = HN_ERR_RUNTIME;
    }
done:
    for (int i = 0; i < L.hoist.n; i++)
        hn_instr_free(L.hoist.items[i]);
    hn_free(L.hoist.items);
    hn_block_free(&L.code); /* (moved out when each statement ends) */
    hn_block_free(&L.top);
    hn_free(L.seen);
    hn_free(L.seen_from);
    for (int i = 0; i < body.n; i++)
        hn_instr_free(body.items[i]);
    hn_free(body.items);
    hn_comm_logs_free(logs, world);
    if (st != HN_OK) {
        hn_prog_free(L.out);
        return st;
    }
    *out = L.out;
    return HN_OK;
}
