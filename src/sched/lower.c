/* The scheduler's lowering pass: pipelined statements and stream-parallel
 * loops -> the plain instructions they stand for, for one configuration
 * (world, nstreams, parameter values). Pure IR -> IR: a dry run of the
 * source reads the statements' operand shapes, the cost model (cost.c)
 * settles every `auto`, and the code is written as text in the seed-001
 * form (worker streams wait for the caller in a loop of their own, step i
 * on stream(i % S), the caller waits for every stream used), parsed into
 * the lowered program's names, and stamped with the statement's line,
 * column and text so that every message about it names the statement.
 * docs/SCHEDULER.md shows each strategy's code. */
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
void hn_lower_emit(hn_lower *L, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    hn_sb_vprintf(&L->code, fmt, ap);
    va_end(ap);
}

/* A name no variable of the program has, reserved for this statement:
 * `base`, else base_1, base_2, ... */
const char *hn_lower_fresh(hn_lower *L, const char *base, char *buf, size_t n)
{
    snprintf(buf, n, "%s", base);
    for (int k = 1; hn_prog_find_var(L->out, buf) >= 0 || hn_name_reserved(buf); k++)
        snprintf(buf, n, "%s_%d", base, k);
    if (hn_prog_var(L->out, buf, (int)strlen(buf)) < 0)
        L->st = HN_ERR_NOMEM;
    return buf;
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

/* Parses generated text into `out`, placed at the statement. */
static void parse_generated(hn_lower *L, const hn_strbuf *text, hn_block *out)
{
    hn_strbuf err;
    hn_block b;
    hn_status_t st;
    if (L->st != HN_OK || text->len == 0)
        return;
    if (text->failed) {
        L->st = HN_ERR_NOMEM;
        return;
    }
    memset(&b, 0, sizeof(b));
    hn_sb_init(&err);
    st = hn_parse_stmts(L->out, text->data, text->len, &b, &err);
    if (st != HN_OK) {
        /* a bug of this file: say what it wrote */
        hn_sb_printf(L->diag, "%s:%d:%d: error: internal: the scheduler wrote code it cannot read: %s%s",
                     L->src->filename, L->stmt->line, L->stmt->col, err.data ? err.data : "", text->data);
        L->st = st == HN_ERR_NOMEM ? st : HN_ERR_RUNTIME;
    }
    hn_sb_free(&err);
    place_block(&b, L->stmt, L->origin);
    for (int i = 0; i < b.n && L->st == HN_OK; i++) {
        if (hn_block_push(out, b.items[i]) != 0) {
            L->st = HN_ERR_NOMEM;
            for (int k = i; k < b.n; k++)
                hn_instr_free(b.items[k]);
            break;
        }
    }
    hn_free(b.items);
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
    hn_sb_init(&L->code);
    hn_sb_init(&L->top);
}

static void end_stmt(hn_lower *L, hn_block *out)
{
    parse_generated(L, &L->top, &L->hoist);
    parse_generated(L, &L->code, out);
    hn_sb_free(&L->code);
    hn_sb_free(&L->top);
}
/* ---- the stream scaffold ---- */

/* `stream(i % S)`, or stream(0) when there is one */
void hn_lower_stream_of(char *buf, size_t n, const char *i, int S)
{
    if (S == 1)
        snprintf(buf, n, "stream(0)");
    else
        snprintf(buf, n, "stream(%s %% %d)", i, S);
}

/* The caller's stream, and the worker streams waiting for it in a loop of
 * their own: `steps` steps on S streams use streams 0 .. min(steps, S) - 1. */
void hn_lower_fan_out(hn_lower *L, const char *caller, int steps, int S)
{
    char i[64];
    int used = HN_MIN(steps, S);
    hn_lower_emit(L, "%s = current_stream\n", caller);
    if (used == 1) {
        hn_lower_emit(L, "set_stream stream(0)\nwait_stream %s\n", caller);
        return;
    }
    hn_lower_fresh(L, "w", i, sizeof(i));
    hn_lower_emit(L, "for %s in 0 .. %d {\n  set_stream stream(%s)\n  wait_stream %s\n}\n", i, used, i, caller);
}

/* ... and the caller waiting for every stream used. */
void hn_lower_join(hn_lower *L, const char *caller, int steps, int S)
{
    char i[64];
    int used = HN_MIN(steps, S);
    hn_lower_emit(L, "set_stream %s\n", caller);
    if (used == 1) {
        hn_lower_emit(L, "wait_stream stream(0)\n");
        return;
    }
    hn_lower_fresh(L, "w", i, sizeof(i));
    hn_lower_emit(L, "for %s in 0 .. %d {\n  wait_stream stream(%s)\n}\n", i, used, i);
}
/* ---- stream-parallel loops ---- */

static void lower_block(hn_lower *L, const hn_block *in, hn_block *out);

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
    const hn_program *p = L->src;
    const char *j = p->names[in->dst];
    char lo[64], hi[64], caller[64], step[64] = "", bound[256];
    int64_t s = 1;
    hn_strbuf e;
    hn_block scaffold;
    begin_stmt(L, in);
    if (in->e[2] != NULL) /* a constant (the static verifier says so) */
        s = in->e[2]->kind == HN_EX_INT ? in->e[2]->ival : -in->e[2]->a->ival;
    if (s != 1)
        snprintf(step, sizeof(step), " step %lld", (long long)s);
    hn_lower_fresh(L, "lo", lo, sizeof(lo));
    hn_lower_fresh(L, "hi", hi, sizeof(hi));
    hn_lower_fresh(L, "caller", caller, sizeof(caller));
    hn_sb_init(&e);
    hn_print_expr(&e, p, in->e[0]);
    hn_lower_emit(L, "%s = %s\n", lo, e.data ? e.data : "0");
    hn_sb_free(&e);
    hn_sb_init(&e);
    hn_print_expr(&e, p, in->e[1]);
    hn_lower_emit(L, "%s = %s\n", hi, e.data ? e.data : "0");
    hn_sb_free(&e);
    snprintf(bound, sizeof(bound), "%s(%s, %s + nstreams * %lld)", s > 0 ? "min" : "max", hi, lo, (long long)s);
    hn_lower_emit(L, "%s = current_stream\n", caller);
    hn_lower_emit(L, "for %s in %s .. %s%s {\n  set_stream stream(%s %% nstreams)\n  wait_stream %s\n}\n", j, lo, bound,
         step, j, caller);
    hn_lower_emit(L, "for %s in %s .. %s%s {\n  set_stream stream(%s %% nstreams)\n}\n", j, lo, hi, step, j);
    hn_lower_emit(L, "set_stream %s\n", caller);
    hn_lower_emit(L, "for %s in %s .. %s%s {\n  wait_stream stream(%s %% nstreams)\n}\n", j, lo, bound, step, j);
    memset(&scaffold, 0, sizeof(scaffold));
    parse_generated(L, &L->code, &scaffold);
    hn_sb_free(&L->code);
    hn_sb_free(&L->top);
    if (L->st == HN_OK && scaffold.n == 7) {
        /* the user's body follows the main loop's set_stream, as written */
        hn_instr *main_loop = scaffold.items[4];
        lower_block(L, &in->body, &main_loop->body);
    }
    for (int i = 0; i < scaffold.n; i++)
        if (L->st != HN_OK || hn_block_push(out, scaffold.items[i]) != 0) {
            L->st = L->st != HN_OK ? L->st : HN_ERR_NOMEM;
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
    for (int r = 0; r < L->world; r++)
        for (int i = 0; i < L->logs[r].npipes; i++) {
            const hn_pipe_rec *p = &L->logs[r].pipes[i];
            int same = 1;
            if (p->instr != in->id)
                continue;
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
                           "pipelined statement is lowered once, for one shape", r);
                return 0;
            }
        }
    return found ? 1 : -1;
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
        stmt_error(L, in, "%s of %s and %s: the inner dimensions differ", c->mm, sa, sb);
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

void hn_lower_via_text(char *buf, size_t n, hn_via via, hn_coll_algo protocol)
{
    buf[0] = '\0';
    if (via == HN_VIA_NCCL || via == HN_VIA_P2P || via == HN_VIA_LL)
        snprintf(buf, n, " via %s%s", hn_via_name(via), via == HN_VIA_P2P && protocol == HN_ALGO_PULL ? " get" : "");
}

/* The matmul or linear of the statement into `dst` from `a`; `bias`:
 * 1 with the bias, 0 without, -1 with it on rank 0 only (so that a sum
 * over the ranks adds it once). */
void hn_lower_gemm(hn_lower *L, const hn_lower_pipe *c, const char *indent, const char *dst, const char *a, int bias)
{
    if (!c->bias || bias == 0) {
        hn_lower_emit(L, "%s%s %s <- %s, %s\n", indent, c->mm, dst, a, c->b);
    } else if (bias > 0) {
        hn_lower_emit(L, "%s%s %s <- %s, %s, %s\n", indent, c->mm, dst, a, c->b, c->biast);
    } else {
        hn_lower_emit(L, "%sif rank == 0 {\n%s  %s %s <- %s, %s, %s\n%s} else {\n%s  %s %s <- %s, %s\n%s}\n", indent,
             indent, c->mm, dst, a, c->b, c->biast, indent, indent, c->mm, dst, a, c->b, indent);
    }
}

static void tref_text(const hn_lower *L, const hn_tref *t, char *buf, size_t n)
{
    hn_strbuf sb;
    hn_sb_init(&sb);
    hn_print_tref(&sb, L->src, t);
    snprintf(buf, n, "%s", sb.data ? sb.data : "?");
    hn_sb_free(&sb);
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
    c.mm = c.linear ? "linear" : "matmul";
    if (!shape_of(L, &c))
        return;
    c.dt = hn_dtype_name(c.sh.dtype);
    c.plan.strategy = in->strategy;
    c.plan.via = in->via;
    c.plan.protocol = (hn_coll_algo)in->algo;
    if (!option_value(L, in, in->e[0], "chunks", &c.plan.chunks) ||
        !option_value(L, in, in->e[1], "streams", &c.plan.streams))
        return;
    if (hn_pipe_choose(&c.sh, hn_op_table[in->op].flags, &c.plan, err, sizeof(err)) != HN_OK) {
        stmt_error(L, in, "%s", err);
        return;
    }
    hn_lower_via_text(c.via, sizeof(c.via), c.plan.via, c.plan.protocol);
    tref_text(L, &in->a, c.out, sizeof(c.out));
    tref_text(L, &in->args[0].t, c.a, sizeof(c.a));
    if (in->nargs > 1)
        tref_text(L, &in->args[1].t, c.b, sizeof(c.b));
    if (c.bias)
        tref_text(L, &in->args[2].t, c.biast, sizeof(c.biast));
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

hn_status_t hn_sched_lower(const hn_program *src, int world, int nstreams, const int64_t *params,
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
    L.nstreams = nstreams;
    L.params = params;
    L.prof = prof;
    L.logs = logs;
    L.diag = diag;
    L.notes = notes;
    L.out = hn_prog_new(src->filename);
    if (L.out == NULL || copy_decls(src, L.out) != HN_OK) {
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
