/* Static verifier: every name is defined before use and used as what it is
 * (scalar, tensor, stream, communication), dtypes agree, nothing assigns to
 * parameters, inputs, outputs or loop variables, the reference block does
 * not communicate. All errors are reported, not just the first. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "parse.h"
#include "verify.h"

typedef enum { K_NONE, K_INT, K_TENSOR, K_STREAM, K_COMM } kind;

static const char *kind_name[] = {"undefined", "a scalar", "a tensor", "a stream", "a communication"};

typedef struct sym {
    kind k;
    hn_dtype dtype;
    int owned; /* an allocation (may be freed) */
    int fixed; /* parameter, input, output or loop variable */
} sym;

typedef struct vstate {
    const hn_program *p;
    hn_strbuf *diag;
    int errors;
    sym *syms;
    int in_reference;
    const hn_instr *stream_loop; /* the stream-parallel loop around, if any */
    int nomem;
    /* what a nested block changed, to undo when it ends: names defined
     * inside a block are not visible after it (a copy of every name per
     * block made a program of many blocks and names quadratic) */
    struct undo {
        int var;
        sym old;
    } *undo;
    int nundo, undo_cap;
    int depth; /* of blocks: 1 is the body's (or the reference's) own */
} vstate;

/* v->syms[var] is about to change: kept to be undone at the end of the
 * block, unless it is the outermost (nothing reads its names after it). */
static sym *touch(vstate *v, int var)
{
    if (v->depth > 1) {
        if (hn_grow((void **)&v->undo, &v->undo_cap, v->nundo, sizeof(*v->undo)) != 0) {
            v->nomem = 1;
        } else {
            v->undo[v->nundo].var = var;
            v->undo[v->nundo++].old = v->syms[var];
        }
    }
    return &v->syms[var];
}

static void err(vstate *v, int line, int col, const char *fmt, ...) __attribute__((format(printf, 4, 5)));

static void err(vstate *v, int line, int col, const char *fmt, ...)
{
    va_list ap;
    hn_sb_printf(v->diag, "%s:%d:%d: error: ", v->p->filename, line, col);
    va_start(ap, fmt);
    hn_sb_vprintf(v->diag, fmt, ap);
    va_end(ap);
    hn_sb_append(v->diag, "\n");
    v->errors++;
}

static const char *nm(const vstate *v, int var) { return v->p->names[var]; }

static void check_expr(vstate *v, const hn_expr *e, int line, int col, int allow_rank)
{
    if (e == NULL)
        return;
    if (e->line > 0) {
        line = e->line;
        col = e->col;
    }
    if (e->kind == HN_EX_VAR && v->syms[e->var].k != K_INT) {
        if (v->syms[e->var].k == K_NONE)
            err(v, line, col, "'%s' is not defined here", nm(v, e->var));
        else
            err(v, line, col, "'%s' is %s, not a scalar", nm(v, e->var), kind_name[v->syms[e->var].k]);
    }
    if (e->kind == HN_EX_RANK && !allow_rank)
        err(v, line, col, "'rank' is not allowed here");
    check_expr(v, e->a, line, col, allow_rank);
    check_expr(v, e->b, line, col, allow_rank);
}

/* Checks a tensor operand; returns its dtype, or -1. */
static int check_tref(vstate *v, const hn_tref *t)
{
    const sym *s = &v->syms[t->var];
    for (int i = 0; i < t->nidx; i++)
        check_expr(v, t->idx[i], t->line, t->col, 1);
    if (s->k != K_TENSOR) {
        if (s->k == K_NONE)
            err(v, t->line, t->col, "'%s' is not defined here", nm(v, t->var));
        else
            err(v, t->line, t->col, "'%s' is %s, not a tensor", nm(v, t->var), kind_name[s->k]);
        return -1;
    }
    return (int)s->dtype;
}

static void define(vstate *v, const hn_instr *in, int var, kind k, int dtype, int owned)
{
    sym *s = &v->syms[var];
    if (s->fixed) {
        err(v, in->line, in->col, "cannot assign to '%s'", nm(v, var));
        return;
    }
    if (s->k != K_NONE && s->k != k) {
        err(v, in->line, in->col, "'%s' is %s; it cannot become %s", nm(v, var), kind_name[s->k],
            kind_name[k]);
        return;
    }
    s = touch(v, var);
    s->k = k;
    s->dtype = dtype >= 0 ? (hn_dtype)dtype : HN_F32;
    s->owned = owned;
}

static void same_dtype(vstate *v, const hn_instr *in, int a, int b, const char *what)
{
    if (a >= 0 && b >= 0 && a != b)
        err(v, in->line, in->col, "%s: %s and %s differ", what, hn_dtype_name((hn_dtype)a),
            hn_dtype_name((hn_dtype)b));
}

static void block(vstate *v, const hn_block *b);

static void check_streamref(vstate *v, const hn_instr *in)
{
    if (in->sref_index != NULL) {
        check_expr(v, in->sref_index, in->line, in->col, 1);
    } else if (v->syms[in->sref_var].k != K_STREAM) {
        err(v, in->line, in->col, "'%s' is %s, not a stream", nm(v, in->sref_var),
            kind_name[v->syms[in->sref_var].k]);
    }
}

static void no_comm_in_reference(vstate *v, const hn_instr *in)
{
    if (v->in_reference)
        err(v, in->line, in->col, "the reference block runs on one device: no %s",
            hn_op_table[in->op].keyword);
}

/* Option expressions of pipelined statements are fixed before a run: they
 * may use parameters, world and nstreams only. */
static void params_only(vstate *v, const hn_expr *e, int line, int col, const char *what)
{
    int is_param = 0;
    if (e == NULL)
        return;
    if (e->kind == HN_EX_VAR) {
        for (int i = 0; i < v->p->nparams; i++)
            is_param |= v->p->params[i].var == e->var;
        if (!is_param)
            err(v, line, col, "%s may use parameters, world and nstreams only, not '%s'", what, nm(v, e->var));
    }
    params_only(v, e->a, line, col, what);
    params_only(v, e->b, line, col, what);
}

/* An integer literal, possibly negated: its value into *v. */
static int is_constant(const hn_expr *e, int64_t *v)
{
    if (e->kind == HN_EX_INT)
        *v = e->ival;
    else if (e->kind == HN_EX_NEG && e->a->kind == HN_EX_INT)
        *v = -e->a->ival;
    else
        return 0;
    return 1;
}

/* A pipelined statement: tensor operands of one dtype, a strategy it
 * offers, options fixed before the run, outside stream-parallel loops. */
static void check_pipelined(vstate *v, const hn_instr *in)
{
    const hn_op_info *info = &hn_op_table[in->op];
    int da = check_tref(v, &in->a);
    no_comm_in_reference(v, in);
    if (v->stream_loop != NULL)
        err(v, in->line, in->col, "a pipelined statement assigns streams itself: it cannot be inside the "
            "stream-parallel loop of line %d", v->stream_loop->line);
    for (int i = 0; i < in->nargs; i++)
        same_dtype(v, in, da, check_tref(v, &in->args[i].t), info->keyword);
    if (in->strategy != HN_STRAT_AUTO && !(info->flags & HN_OPF_STRATEGY(in->strategy))) {
        char list[128] = "";
        for (int s = 1; s < HN_STRAT_COUNT; s++)
            if (info->flags & HN_OPF_STRATEGY(s))
                snprintf(list + strlen(list), sizeof(list) - strlen(list), "%s%s", list[0] ? ", " : "",
                         hn_strategy_name((hn_strategy)s));
        err(v, in->line, in->col, "strategy %s does not apply to this %s: it offers %s",
            hn_strategy_name(in->strategy), info->keyword, list);
    }
    for (int k = 0; k < 2; k++) {
        check_expr(v, in->e[k], in->line, in->col, 0);
        params_only(v, in->e[k], in->line, in->col, k == 0 ? "chunks" : "streams");
    }
    if (in->algo != HN_ALGO_AUTO && in->via != HN_VIA_P2P && in->via != HN_VIA_AUTO)
        err(v, in->line, in->col, "protocol=%s applies to via=p2p, not via=%s",
            in->algo == HN_ALGO_PULL ? "get" : "put", hn_via_name(in->via));
}

static int same_tref(const hn_tref *a, const hn_tref *b)
{
    if (a->var != b->var || a->nidx != b->nidx)
        return 0;
    for (int i = 0; i < a->nidx; i++)
        if (!hn_expr_equal(a->idx[i], b->idx[i]))
            return 0;
    return 1;
}

/* rmsnorm and allreduce_rmsnorm: floats; the fused step's two outputs
 * (out, and the residual's `res_out`) are two buffers. Overlaps through
 * views are found when the instruction runs. */
static void check_norm(vstate *v, const hn_instr *in, int dtype, const hn_tref *res_out)
{
    if (dtype >= 0 && dtype != HN_F32 && dtype != HN_BF16 && dtype != HN_F16)
        err(v, in->line, in->col, "%s normalizes f32, bf16 and f16, not %s", hn_op_table[in->op].keyword,
            hn_dtype_name((hn_dtype)dtype));
    if (res_out != NULL && same_tref(&in->a, res_out))
        err(v, in->line, in->col, "%s: the output and the residual's output are one tensor ('%s')",
            hn_op_table[in->op].keyword, nm(v, in->a.var));
}

static void instr(vstate *v, const hn_instr *in)
{
    const hn_op_info *info = &hn_op_table[in->op];
    int da, db;
    switch (info->form) {
    case HN_FORM_ALLOC:
        for (int i = 0; i < in->type.ndim; i++)
            check_expr(v, in->type.shape[i], in->line, in->col, 1);
        define(v, in, in->dst, K_TENSOR, (int)in->type.dtype, 1);
        break;
    case HN_FORM_FREE:
        if (v->syms[in->a.var].k != K_TENSOR || !v->syms[in->a.var].owned) {
            err(v, in->line, in->col, "'%s' is not an allocation of this program", nm(v, in->a.var));
        } else {
            touch(v, in->a.var)->k = K_NONE;
        }
        break;
    case HN_FORM_VIEW:
    case HN_FORM_SELECT:
    case HN_FORM_CHUNK:
    case HN_FORM_TRANSPOSE:
        da = check_tref(v, &in->a);
        for (int i = 0; hn_instr_has_all(in) && i < in->type.ndim; i++) /* a view's shape */
            check_expr(v, in->type.shape[i], in->line, in->col, 1);
        for (int i = 0; i < 3; i++)
            check_expr(v, in->e[i], in->line, in->col, 1);
        define(v, in, in->dst, K_TENSOR, da, 0);
        break;
    case HN_FORM_LET:
        check_expr(v, in->e[0], in->line, in->col, 1);
        define(v, in, in->dst, K_INT, -1, 0);
        break;
    case HN_FORM_CURRENT_STREAM:
    case HN_FORM_STREAM:
        check_expr(v, in->e[0], in->line, in->col, 1);
        define(v, in, in->dst, K_STREAM, -1, 0);
        break;
    case HN_FORM_STREAMREF:
        check_streamref(v, in);
        if (in->op == HN_OP_SET_STREAM && v->stream_loop != NULL)
            err(v, in->line, in->col, "the stream-parallel loop of line %d puts each iteration on its "
                "own stream: no set_stream inside it", v->stream_loop->line);
        break;
    case HN_FORM_BARE: break;
    case HN_FORM_FOR: {
        sym saved = v->syms[in->dst];
        for (int i = 0; i < 3; i++)
            check_expr(v, in->e[i], in->line, in->col, 1);
        if (saved.fixed) {
            err(v, in->line, in->col, "cannot use '%s' as a loop variable", nm(v, in->dst));
            break;
        }
        touch(v, in->dst)->k = K_INT;
        v->syms[in->dst].fixed = 1;
        if (in->on_streams) {
            const hn_instr *outer = v->stream_loop;
            if (outer != NULL)
                err(v, in->line, in->col, "stream-parallel loops do not nest (this one is inside line %d's)",
                    outer->line);
            int64_t step = 1;
            if (in->e[2] != NULL && (!is_constant(in->e[2], &step) || step == 0))
                err(v, in->line, in->col, "the step of a stream-parallel loop is a non-zero integer");
            v->stream_loop = in;
            block(v, &in->body);
            v->stream_loop = outer;
        } else {
            block(v, &in->body);
        }
        v->syms[in->dst] = saved;
        break;
    }
    case HN_FORM_IF:
        check_expr(v, in->e[0], in->line, in->col, 1);
        block(v, &in->body);
        block(v, &in->orelse);
        break;
    case HN_FORM_COLL:
        no_comm_in_reference(v, in);
        if (in->nargs != (int)strlen(info->sig) - (strchr(info->sig, '<') != NULL)) { /* the builder's */
            err(v, in->line, in->col, "%s takes %d operands beyond out <- in, not %d", info->keyword,
                (int)strlen(info->sig) - (strchr(info->sig, '<') != NULL), in->nargs);
            break;
        }
        da = check_tref(v, &in->a);
        db = check_tref(v, &in->b);
        same_dtype(v, in, da, db, info->keyword);
        for (int i = 0; i < in->nargs; i++)
            same_dtype(v, in, da, check_tref(v, &in->args[i].t), info->keyword);
        if (in->via == HN_VIA_LL && in->op != HN_OP_ALLREDUCE && in->op != HN_OP_ALLGATHER &&
            in->op != HN_OP_REDUCE_SCATTER && in->op != HN_OP_ALLREDUCE_RMSNORM)
            err(v, in->line, in->col, "%s via ll: the latency path does allreduce, allgather and reduce_scatter "
                "(and allreduce_rmsnorm)", info->keyword);
        if (in->op == HN_OP_ALLREDUCE_RMSNORM)
            check_norm(v, in, da, &in->args[0].t);
        check_expr(v, in->e[0], in->line, in->col, 1);
        check_expr(v, in->e[1], in->line, in->col, 1);
        for (int i = 0; i < in->nteam; i++)
            check_expr(v, in->team[i], in->line, in->col, 1);
        if (in->dst >= 0)
            define(v, in, in->dst, K_COMM, -1, 0);
        break;
    case HN_FORM_P2P:
        no_comm_in_reference(v, in);
        if (in->via == HN_VIA_AUTO)
            err(v, in->line, in->col, "via auto chooses the communicator of collectives; a %s names "
                "nccl, p2p or default", info->keyword);
        if (in->via == HN_VIA_LL)
            err(v, in->line, in->col, "via ll is the latency path of collectives; a %s names nccl, p2p or "
                "default", info->keyword);
        check_tref(v, &in->a);
        check_expr(v, in->e[0], in->line, in->col, 1);
        if (in->dst >= 0)
            define(v, in, in->dst, K_COMM, -1, 0);
        break;
    case HN_FORM_GROUP:
        no_comm_in_reference(v, in);
        for (int i = 0; i < in->body.n; i++)
            instr(v, in->body.items[i]);
        if (in->dst >= 0)
            define(v, in, in->dst, K_COMM, -1, 0);
        break;
    case HN_FORM_WAIT:
        if (in->wait_var >= 0 && v->syms[in->wait_var].k != K_COMM)
            err(v, in->line, in->col, "'%s' is %s, not a communication", nm(v, in->wait_var),
                kind_name[v->syms[in->wait_var].k]);
        break;
    case HN_FORM_COMPUTE: {
        int dt[4] = {-1, -1, -1, -1};
        da = check_tref(v, &in->a);
        for (int i = 0; i < in->nargs; i++) {
            if (in->args[i].is_tensor)
                dt[i] = check_tref(v, &in->args[i].t);
            else
                check_expr(v, in->args[i].e, in->line, in->col, 1);
        }
        if (in->op != HN_OP_CAST)
            for (int i = 0; i < in->nargs; i++)
                same_dtype(v, in, da, dt[i], info->keyword);
        if (in->op == HN_OP_RMSNORM)
            check_norm(v, in, da, NULL);
        break;
    }
    case HN_FORM_PIPELINED: check_pipelined(v, in); break;
    }
}

static void block(vstate *v, const hn_block *b)
{
    /* names defined inside a block are not visible after it */
    int mark = v->nundo;
    v->depth++;
    for (int i = 0; i < b->n; i++)
        instr(v, b->items[i]);
    while (v->nundo > mark) {
        v->nundo--;
        v->syms[v->undo[v->nundo].var] = v->undo[v->nundo].old;
    }
    v->depth--;
}

static void init_scope(vstate *v)
{
    const hn_program *p = v->p;
    memset(v->syms, 0, (size_t)p->nvars * sizeof(sym));
    for (int i = 0; i < p->nparams; i++) {
        v->syms[p->params[i].var].k = K_INT;
        v->syms[p->params[i].var].fixed = 1;
    }
    for (int k = 0; k < p->ninputs + p->noutputs; k++) {
        const hn_io *io = k < p->ninputs ? &p->inputs[k] : &p->outputs[k - p->ninputs];
        v->syms[io->var].k = K_TENSOR;
        v->syms[io->var].dtype = io->type.dtype;
        v->syms[io->var].fixed = 1;
    }
}

hn_status_t hn_verify_static(const hn_program *p, hn_strbuf *diag)
{
    vstate v;
    memset(&v, 0, sizeof(v));
    v.p = p;
    v.diag = diag;
    v.syms = hn_calloc((size_t)p->nvars + 1, sizeof(sym));
    if (v.syms == NULL)
        return HN_ERR_NOMEM;
    /* parameters see only earlier parameters */
    for (int i = 0; i < p->nparams; i++) {
        const hn_param *pa = &p->params[i];
        int dup = 0;
        for (int j = 0; j < i; j++)
            dup |= p->params[j].var == pa->var;
        if (dup)
            err(&v, pa->line, pa->col, "parameter '%s' is declared twice", nm(&v, pa->var));
        check_expr(&v, pa->value, pa->line, pa->col, 0);
        v.syms[pa->var].k = K_INT;
    }
    init_scope(&v);
    for (int k = 0; k < p->ninputs + p->noutputs; k++) {
        const hn_io *io = k < p->ninputs ? &p->inputs[k] : &p->outputs[k - p->ninputs];
        for (int i = 0; i < p->nparams; i++)
            if (p->params[i].var == io->var)
                err(&v, io->line, io->col, "'%s' is a parameter", nm(&v, io->var));
        for (int i = 0; i < io->type.ndim; i++)
            check_expr(&v, io->type.shape[i], io->line, io->col, 0);
    }
    block(&v, &p->body);
    if (p->has_reference) {
        init_scope(&v);
        v.in_reference = 1;
        block(&v, &p->reference);
    }
    hn_free(v.syms);
    hn_free(v.undo);
    return v.nomem ? HN_ERR_NOMEM : v.errors ? HN_ERR_VERIFY : HN_OK;
}
