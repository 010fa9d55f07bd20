/* Host IR construction, destruction, equality and scalar evaluation. */
#include "ir.h"
#include "ir_pool.h"

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const hn_op_info hn_op_table[HN_OP_COUNT] = {
#define HN_OP(e, kw, form, sig, flags) {kw, form, sig, flags},
#include "ops.def"
};

int hn_op_lookup(const char *word, int len)
{
    for (int i = 0; i < HN_OP_COUNT; i++) {
        const char *kw = hn_op_table[i].keyword;
        if ((int)strlen(kw) == len && strncmp(kw, word, (size_t)len) == 0)
            return i;
    }
    return -1;
}

static const char *redop_names[HN_RED_COUNT] = {"sum", "prod", "max", "min", "avg"};
static const char *via_names[HN_VIA_COUNT] = {"default", "nccl", "p2p", "auto", "ll"};
static const char *strategy_names[HN_STRAT_COUNT] = {"auto", "sequential", "ring", "collective", "broadcast"};

const char *hn_strategy_name(hn_strategy s)
{
    return (unsigned)s < HN_STRAT_COUNT ? strategy_names[s] : "?";
}

const char *hn_redop_name(hn_redop r) { return (unsigned)r < HN_RED_COUNT ? redop_names[r] : "?"; }
const char *hn_via_name(hn_via v)
{
    return (unsigned)v < HN_VIA_COUNT ? via_names[v] : "?";
}

const char *hn_via_variant(hn_via v, hn_coll_algo algo)
{
    if (v == HN_VIA_P2P)
        return algo == HN_ALGO_PULL ? " get" : "";
    if (v == HN_VIA_LL)
        return algo == HN_ALGO_ONESHOT ? " oneshot" : algo == HN_ALGO_TWOSHOT ? " twoshot" : "";
    return "";
}

/* ---- expressions ---- */

hn_expr *hn_ex_int(int64_t v) { return hn_npool_node(HN_EX_INT, 0, (uint64_t)v, NULL, NULL); }

hn_expr *hn_ex_float(double v)
{
    uint64_t bits;
    memcpy(&bits, &v, sizeof(bits));
    return hn_npool_node(HN_EX_FLOAT, 0, bits, NULL, NULL);
}

hn_expr *hn_ex_var(int var)
{
    hn_expr *e = var >= 0 ? hn_npool_expr(HN_EX_VAR) : NULL;
    if (e != NULL)
        e->var = var;
    return e;
}

hn_expr *hn_ex_leaf(hn_expr_kind kind)
{
    /* world and nstreams: one node each while parsing; rank a node of its
     * own (hn_ex_leaf_shared: where no message may name its position) */
    return kind == HN_EX_RANK ? hn_npool_expr(kind) : hn_ex_leaf_shared(kind);
}

hn_expr *hn_ex_unary(hn_expr_kind kind, hn_expr *a)
{
    hn_expr *e = a != NULL ? hn_npool_node(kind, 0, 0, a, NULL) : NULL;
    if (e == NULL)
        hn_expr_free(a);
    return e;
}

/* A node of two operands (taking them; both freed when out of memory). */
static hn_expr *ex_two(hn_expr_kind kind, hn_binop op, hn_expr *a, hn_expr *b)
{
    hn_expr *e = (a != NULL && b != NULL) ? hn_npool_node(kind, op, 0, a, b) : NULL;
    if (e == NULL) {
        hn_expr_free(a);
        hn_expr_free(b);
    }
    return e;
}

hn_expr *hn_ex_bin(hn_binop op, hn_expr *a, hn_expr *b) { return ex_two(HN_EX_BIN, op, a, b); }

hn_expr *hn_ex_call(hn_expr_kind kind, hn_expr *a, hn_expr *b) { return ex_two(kind, HN_B_ADD, a, b); }

hn_expr *hn_expr_clone(const hn_expr *e)
{
    hn_expr *c;
    if (e == NULL)
        return NULL;
    c = hn_calloc(1, sizeof(*c)); /* a copy is the caller's, never in a pool */
    if (c == NULL)
        return NULL;
    *c = *e;
    c->pooled = 0;
    c->a = NULL;
    c->b = NULL;
    if ((e->a && (c->a = hn_expr_clone(e->a)) == NULL) ||
        (e->b && (c->b = hn_expr_clone(e->b)) == NULL)) {
        hn_expr_free(c);
        return NULL;
    }
    return c;
}

void hn_expr_free(hn_expr *e)
{
    if (e == NULL)
        return;
    hn_expr_free(e->a);
    hn_expr_free(e->b);
    if (!e->pooled)
        hn_free(e);
}

int hn_expr_equal(const hn_expr *a, const hn_expr *b)
{
    if (a == NULL || b == NULL)
        return a == b;
    if (a->kind != b->kind)
        return 0;
    switch (a->kind) {
    case HN_EX_INT: return a->ival == b->ival;
    case HN_EX_FLOAT: return a->fval == b->fval;
    case HN_EX_VAR: return a->var == b->var;
    case HN_EX_BIN:
        if (a->op != b->op)
            return 0;
        break;
    default: break;
    }
    return hn_expr_equal(a->a, b->a) && hn_expr_equal(a->b, b->b);
}

int hn_binop_prec(hn_binop op)
{
    static const int prec[] = {1, 2, 3, 3, 4, 4, 4, 4, 5, 5, 6, 6, 6};
    return prec[op];
}

const char *hn_binop_text(hn_binop op)
{
    static const char *text[] = {"||", "&&", "==", "!=", "<", "<=", ">", ">=",
                                 "+",  "-",  "*",  "/",  "%"};
    return text[op];
}

static int64_t floordiv(int64_t a, int64_t b)
{
    int64_t q = a / b;
    if ((a % b != 0) && ((a < 0) != (b < 0)))
        q--;
    return q;
}

/* The evaluator; when inexact is not NULL it also notes there the first
 * division outside floor() that leaves a remainder. */
static hn_status_t eval(const hn_expr *e, const hn_scalar_env *env, hn_inexact *inexact, int64_t *out, char *err,
                        int errlen)
{
    int64_t x = 0, y = 0;
    hn_status_t st;
    switch (e->kind) {
    case HN_EX_INT: *out = e->ival; return HN_OK;
    case HN_EX_FLOAT:
        snprintf(err, (size_t)errlen, "a float literal is not an integer");
        return HN_ERR_RUNTIME;
    case HN_EX_VAR: *out = env->vals[e->var]; return HN_OK;
    case HN_EX_RANK: *out = env->rank; return HN_OK;
    case HN_EX_WORLD: *out = env->world; return HN_OK;
    case HN_EX_NSTREAMS: *out = env->nstreams; return HN_OK;
    default: break;
    }
    /* inside floor() a division may leave a remainder */
    if ((st = eval(e->a, env, e->kind == HN_EX_FLOOR ? NULL : inexact, &x, err, errlen)) != HN_OK)
        return st;
    if (e->kind == HN_EX_NEG) {
        if (hn_sub_overflows(0, x, out)) {
            snprintf(err, (size_t)errlen, "integer overflow: -(%lld)", (long long)x);
            return HN_ERR_RUNTIME;
        }
        return HN_OK;
    }
    if (e->kind == HN_EX_NOT) {
        *out = !x;
        return HN_OK;
    }
    if (e->kind == HN_EX_FLOOR) {
        *out = x;
        return HN_OK;
    }
    /* short-circuit like C */
    if (e->kind == HN_EX_BIN && e->op == HN_B_AND && !x) {
        *out = 0;
        return HN_OK;
    }
    if (e->kind == HN_EX_BIN && e->op == HN_B_OR && x) {
        *out = 1;
        return HN_OK;
    }
    if ((st = eval(e->b, env, inexact, &y, err, errlen)) != HN_OK)
        return st;
    if (e->kind == HN_EX_MIN) {
        *out = x < y ? x : y;
        return HN_OK;
    }
    if (e->kind == HN_EX_MAX) {
        *out = x > y ? x : y;
        return HN_OK;
    }
    switch (e->op) {
    case HN_B_OR: *out = x || y; break;
    case HN_B_AND: *out = x && y; break;
    case HN_B_EQ: *out = x == y; break;
    case HN_B_NE: *out = x != y; break;
    case HN_B_LT: *out = x < y; break;
    case HN_B_LE: *out = x <= y; break;
    case HN_B_GT: *out = x > y; break;
    case HN_B_GE: *out = x >= y; break;
    /* an error, never a wrap: these values become sizes and offsets */
    case HN_B_ADD:
    case HN_B_SUB:
    case HN_B_MUL:
        if (e->op == HN_B_ADD ? hn_add_overflows(x, y, out)
            : e->op == HN_B_SUB ? hn_sub_overflows(x, y, out)
                                : hn_mul_overflows(x, y, out)) {
            snprintf(err, (size_t)errlen, "integer overflow: %lld %s %lld", (long long)x,
                     hn_binop_text(e->op), (long long)y);
            return HN_ERR_RUNTIME;
        }
        break;
    case HN_B_DIV:
    case HN_B_MOD:
        if (y == 0) {
            snprintf(err, (size_t)errlen, "%s by zero",
                     e->op == HN_B_DIV ? "division" : "modulo");
            return HN_ERR_RUNTIME;
        }
        if (y == -1 && e->op == HN_B_DIV && x == INT64_MIN) {
            snprintf(err, (size_t)errlen, "integer overflow: %lld / -1", (long long)x);
            return HN_ERR_RUNTIME;
        }
        if (y == -1) { /* INT64_MIN % -1 traps in C */
            *out = e->op == HN_B_DIV ? -x : 0;
            break;
        }
        if (e->op == HN_B_DIV) {
            *out = floordiv(x, y);
            if (inexact != NULL && inexact->div == NULL && x % y != 0)
                *inexact = (hn_inexact){e, x, y, *out};
        } else { /* floor modulo from C's remainder: no intermediate product */
            int64_t r = x % y;
            *out = r != 0 && ((r < 0) != (y < 0)) ? r + y : r;
        }
        break;
    }
    return HN_OK;
}

hn_status_t hn_expr_eval(const hn_expr *e, const hn_scalar_env *env, int64_t *out, char *err, int errlen)
{
    return eval(e, env, NULL, out, err, errlen);
}

hn_status_t hn_expr_eval_exact(const hn_expr *e, const hn_scalar_env *env, int64_t *out, hn_inexact *inexact,
                               char *err, int errlen)
{
    inexact->div = NULL;
    return eval(e, env, inexact, out, err, errlen);
}

hn_status_t hn_expr_eval_num(const hn_expr *e, const hn_scalar_env *env,
                             double *out, char *err, int errlen)
{
    int64_t v;
    hn_status_t st;
    if (e->kind == HN_EX_FLOAT) {
        *out = e->fval;
        return HN_OK;
    }
    if (e->kind == HN_EX_NEG && e->a->kind == HN_EX_FLOAT) {
        *out = -e->a->fval;
        return HN_OK;
    }
    st = hn_expr_eval(e, env, &v, err, errlen);
    if (st == HN_OK)
        *out = (double)v;
    return st;
}

/* ---- instructions ---- */

/* The tier of the parts a form has (hn_instr.pooled); a compute op that
 * may become pipelined (matmul C <- allgather(A), B pipelined()) has all. */
static int tier_of(hn_op op)
{
    switch (hn_op_table[op].form) {
    case HN_FORM_LET:
    case HN_FORM_IF:
    case HN_FORM_FOR:
    case HN_FORM_STREAM:
    case HN_FORM_BARE:
    case HN_FORM_CURRENT_STREAM:
    case HN_FORM_GROUP: return HN_POOL_SHORT;
    case HN_FORM_FREE:
    case HN_FORM_SELECT:
    case HN_FORM_CHUNK:
    case HN_FORM_TRANSPOSE:
    case HN_FORM_P2P: return HN_POOL_OPERANDS;
    case HN_FORM_STREAMREF:
    case HN_FORM_WAIT: return HN_POOL_STREAMREF;
    case HN_FORM_COMPUTE:
        for (int k = 0; k < HN_OP_COUNT; k++)
            if (hn_op_table[k].form == HN_FORM_PIPELINED && strcmp(hn_op_table[k].keyword, hn_op_table[op].keyword) == 0)
                return HN_POOL_ALL;
        return HN_POOL_OPERANDS;
    default: return HN_POOL_ALL;
    }
}

static size_t tier_bytes(int tier)
{
    return tier == HN_POOL_SHORT       ? offsetof(hn_instr, a)
           : tier == HN_POOL_OPERANDS  ? offsetof(hn_instr, sref_index)
           : tier == HN_POOL_STREAMREF ? offsetof(hn_instr, type)
                                       : sizeof(hn_instr);
}

hn_instr *hn_instr_new(hn_op op, int line, int col)
{
    int tier = hn_npool_active() ? tier_of(op) : 0;
    hn_instr *in = tier ? hn_npool_take(tier_bytes(tier)) : hn_calloc(1, sizeof(*in));
    if (in == NULL)
        return NULL;
    in->pooled = (unsigned char)tier;
    in->op = op;
    in->line = line;
    in->col = col;
    in->dst = -1;
    if (hn_instr_has_operands(in))
        in->a.var = -1;
    if (hn_instr_has_streamref(in)) {
        in->sref_var = -1;
        in->wait_var = -1;
    }
    if (hn_instr_has_all(in))
        in->b.var = -1;
    in->id = -1;
    in->origin = -1;
    /* a pipelined statement picks its communicator itself unless told */
    if (hn_op_table[op].form == HN_FORM_PIPELINED)
        in->via = HN_VIA_AUTO;
    return in;
}

/* e appended to the list (*list)[0 .. *n - 1] of at most HN_MAX_DIMS;
 * on failure e is freed and the list stays as it was */
static int push_dim_expr(hn_expr ***list, int *n, hn_expr *e)
{
    hn_expr **grown;
    if (e == NULL || *n >= HN_MAX_DIMS || (grown = hn_realloc(*list, (size_t)(*n + 1) * sizeof(*grown))) == NULL) {
        hn_expr_free(e);
        return -1;
    }
    *list = grown;
    grown[(*n)++] = e;
    return 0;
}

int hn_tref_push_idx(hn_tref *t, hn_expr *e) { return push_dim_expr(&t->idx, &t->nidx, e); }

int hn_tref_clone(hn_tref *dst, const hn_tref *src)
{
    *dst = *src;
    dst->nidx = 0;
    dst->idx = NULL;
    for (int i = 0; i < src->nidx; i++)
        if (hn_tref_push_idx(dst, hn_expr_clone(src->idx[i])) != 0) {
            hn_tref_clear(dst);
            return -1;
        }
    return 0;
}

int hn_type_push_dim(hn_type *t, hn_expr *e) { return push_dim_expr(&t->shape, &t->ndim, e); }

int hn_type_clone(hn_type *dst, const hn_type *src)
{
    *dst = *src;
    dst->ndim = 0;
    dst->shape = NULL;
    for (int i = 0; i < src->ndim; i++)
        if (hn_type_push_dim(dst, hn_expr_clone(src->shape[i])) != 0) {
            hn_type_clear(dst);
            return -1;
        }
    return 0;
}

static int block_clone(hn_block *dst, const hn_block *src)
{
    memset(dst, 0, sizeof(*dst));
    for (int i = 0; i < src->n; i++) {
        hn_instr *c = hn_instr_clone(src->items[i]);
        if (c == NULL || hn_block_push(dst, c) != 0) {
            hn_instr_free(c);
            hn_block_free(dst);
            return -1;
        }
    }
    return 0;
}

static int expr_slot_clone(hn_expr **dst, const hn_expr *src)
{
    *dst = NULL;
    return src != NULL && (*dst = hn_expr_clone(src)) == NULL ? -1 : 0;
}

hn_instr *hn_instr_clone(const hn_instr *in)
{
    hn_instr *c = hn_calloc(1, sizeof(*c));
    int ok = 1;
    if (c == NULL)
        return NULL;
    /* a copy is the caller's, never in a pool, with every part; those that
     * in has not are as hn_instr_new makes them */
    memcpy(c, in, tier_bytes(in->pooled));
    c->pooled = 0;
    if (!hn_instr_has_operands(in))
        c->a.var = -1;
    if (!hn_instr_has_streamref(in))
        c->sref_var = c->wait_var = -1;
    if (!hn_instr_has_all(in))
        c->b.var = -1;
    /* own nothing yet, so that a failure half-way frees only copies */
    c->a.nidx = c->b.nidx = c->type.ndim = c->nteam = c->nargs = 0;
    c->a.idx = c->b.idx = NULL;
    c->type.shape = NULL;
    c->args = NULL;
    c->team = NULL;
    c->sref_index = NULL;
    memset(c->e, 0, sizeof(c->e));
    memset(&c->body, 0, sizeof(c->body));
    memset(&c->orelse, 0, sizeof(c->orelse));
    if (hn_instr_has_operands(in))
        ok = hn_tref_clone(&c->a, &in->a) == 0;
    if (hn_instr_has_streamref(in))
        ok = ok && expr_slot_clone(&c->sref_index, in->sref_index) == 0;
    if (hn_instr_has_all(in)) {
        ok = ok && hn_tref_clone(&c->b, &in->b) == 0;
        ok = ok && hn_type_clone(&c->type, &in->type) == 0;
    }
    for (int i = 0; i < 3 && ok; i++)
        ok = expr_slot_clone(&c->e[i], in->e[i]) == 0;
    if (ok && hn_instr_has_all(in) && in->nteam > 0) {
        ok = (c->team = hn_calloc((size_t)in->nteam, sizeof(*c->team))) != NULL;
        for (int i = 0; i < in->nteam && ok; i++, c->nteam++)
            ok = (c->team[i] = hn_expr_clone(in->team[i])) != NULL;
    }
    for (int i = 0; i < in->nargs && ok && hn_instr_has_operands(in); i++) {
        hn_arg *arg = hn_instr_push_arg(c);
        ok = arg != NULL;
        if (ok) {
            arg->is_tensor = in->args[i].is_tensor;
            ok = hn_tref_clone(&arg->t, &in->args[i].t) == 0 && expr_slot_clone(&arg->e, in->args[i].e) == 0;
        }
    }
    ok = ok && block_clone(&c->body, &in->body) == 0;
    ok = ok && block_clone(&c->orelse, &in->orelse) == 0;
    if (!ok) {
        hn_instr_free(c);
        return NULL;
    }
    return c;
}

void hn_tref_clear(hn_tref *t)
{
    for (int i = 0; i < t->nidx; i++)
        hn_expr_free(t->idx[i]);
    hn_free(t->idx);
    t->idx = NULL;
    t->nidx = 0;
    t->var = -1;
}

void hn_type_clear(hn_type *t)
{
    for (int i = 0; i < t->ndim; i++)
        hn_expr_free(t->shape[i]);
    hn_free(t->shape);
    t->shape = NULL;
    t->ndim = 0;
}

void hn_block_free(hn_block *b)
{
    for (int i = 0; i < b->n; i++)
        hn_instr_free(b->items[i]);
    if (b->cap >= 0) /* else the items lie in a pool */
        hn_free(b->items);
    memset(b, 0, sizeof(*b));
}

void hn_instr_free(hn_instr *in)
{
    if (in == NULL)
        return;
    for (int i = 0; i < 3; i++)
        hn_expr_free(in->e[i]);
    if (hn_instr_has_streamref(in))
        hn_expr_free(in->sref_index);
    if (hn_instr_has_operands(in)) {
        hn_tref_clear(&in->a);
        for (int i = 0; i < in->nargs; i++) {
            hn_tref_clear(&in->args[i].t);
            hn_expr_free(in->args[i].e);
        }
        if (!in->pooled) /* else they lie in the pool */
            hn_free(in->args);
    }
    if (hn_instr_has_all(in)) {
        hn_tref_clear(&in->b);
        hn_type_clear(&in->type);
        for (int i = 0; i < in->nteam; i++)
            hn_expr_free(in->team[i]);
        hn_free(in->team);
    }
    hn_block_free(&in->body);
    hn_block_free(&in->orelse);
    if (!in->pooled)
        hn_free(in);
}

hn_arg *hn_instr_push_arg(hn_instr *in)
{
    hn_arg *grown, *arg;
    if (in->nargs >= HN_MAX_ARGS || !hn_instr_has_operands(in))
        return NULL;
    if (in->pooled) { /* its operands in the pool too, while it is being parsed */
        if (!hn_npool_active() ||
            (grown = hn_npool_grow(in->args, (size_t)in->nargs * sizeof(*grown),
                               (size_t)(in->nargs + 1) * sizeof(*grown))) == NULL)
            return NULL;
    } else if ((grown = hn_realloc(in->args, (size_t)(in->nargs + 1) * sizeof(*grown))) == NULL) {
        return NULL;
    }
    in->args = grown;
    arg = &in->args[in->nargs++];
    memset(arg, 0, sizeof(*arg));
    arg->t.var = -1;
    return arg;
}

int hn_block_push(hn_block *b, hn_instr *in)
{
    if (in == NULL)
        return -1;
    if (b->cap < 0) { /* the items lie in a pool: copy them out first */
        hn_instr **items = NULL;
        int cap = 0;
        if (hn_grow((void **)&items, &cap, b->n, sizeof(*items)) != 0)
            return -1;
        memcpy(items, b->items, (size_t)b->n * sizeof(*items));
        b->items = items;
        b->cap = cap;
    }
    if (hn_grow((void **)&b->items, &b->cap, b->n, sizeof(*b->items)) != 0)
        return -1;
    b->items[b->n++] = in;
    return 0;
}

/* ---- program ---- */

hn_program *hn_prog_new(const char *filename)
{
    static uint64_t next_uid;
    hn_program *p = hn_calloc(1, sizeof(*p));
    if (p == NULL)
        return NULL;
    p->uid = __atomic_add_fetch(&next_uid, 1, __ATOMIC_RELAXED);
    p->filename = hn_strdup(filename ? filename : "<program>");
    if (p->filename == NULL) {
        hn_free(p);
        return NULL;
    }
    return p;
}

static void io_free(hn_io *io, int n)
{
    for (int i = 0; i < n; i++)
        hn_type_clear(&io[i].type);
    hn_free(io);
}

void hn_prog_free(hn_program *p)
{
    if (p == NULL)
        return;
    hn_npool_stop(p);
    for (int i = p->npooled_names; i < p->nvars; i++) /* the others lie in the pool */
        hn_free(p->names[i]);
    hn_free(p->names);
    hn_free(p->name_slots);
    for (int i = 0; i < p->nparams; i++)
        hn_expr_free(p->params[i].value);
    hn_free(p->params);
    io_free(p->inputs, p->ninputs);
    io_free(p->outputs, p->noutputs);
    hn_block_free(&p->body);
    hn_block_free(&p->reference);
    hn_free(p->instrs);
    for (int i = 0; i < p->norigins; i++)
        hn_free(p->origins[i]);
    hn_free(p->origins);
    hn_free(p->filename);
    hn_npool_free(p->pool); /* last: the nodes freed above may lie in it */
    hn_free(p);
}

int hn_prog_add_origin(hn_program *p, const char *text)
{
    char *copy;
    if (hn_grow((void **)&p->origins, &p->origins_cap, p->norigins, sizeof(*p->origins)) != 0 ||
        (copy = hn_strdup(text)) == NULL)
        return -1;
    p->origins[p->norigins] = copy;
    return p->norigins++;
}

/* Names are found through a hash table (name_slots), so that a program of
 * a million names parses in linear time, not quadratic. */
static uint32_t name_hash(const char *s, int len)
{
    uint32_t h = 2166136261u; /* FNV-1a */
    for (int i = 0; i < len; i++)
        h = (h ^ (unsigned char)s[i]) * 16777619u;
    return h;
}

static int name_is(const char *name, const char *s, int len)
{
    return strncmp(name, s, (size_t)len) == 0 && name[len] == '\0';
}

int hn_prog_lookup_var(const hn_program *p, const char *name, int len)
{
    uint32_t mask;
    if (p->name_slots_cap == 0)
        return -1;
    mask = (uint32_t)p->name_slots_cap - 1;
    for (uint32_t h = name_hash(name, len) & mask;; h = (h + 1) & mask) {
        int v = p->name_slots[h] - 1;
        if (v < 0)
            return -1;
        if (name_is(p->names[v], name, len))
            return v;
    }
}

int hn_prog_find_var(const hn_program *p, const char *name)
{
    return hn_prog_lookup_var(p, name, (int)strlen(name));
}

static void slot_insert(int *slots, int cap, const char *name, int var)
{
    uint32_t mask = (uint32_t)cap - 1, h = name_hash(name, (int)strlen(name)) & mask;
    while (slots[h] != 0)
        h = (h + 1) & mask;
    slots[h] = var + 1;
}

/* Room for one more name in the table: at most half full. */
static int slots_reserve(hn_program *p)
{
    int cap = p->name_slots_cap ? p->name_slots_cap : 64;
    int *slots;
    while (cap < 2 * (p->nvars + 1))
        cap *= 2;
    if (cap == p->name_slots_cap)
        return 0;
    if ((slots = hn_calloc((size_t)cap, sizeof(int))) == NULL)
        return -1;
    for (int v = 0; v < p->nvars; v++)
        slot_insert(slots, cap, p->names[v], v);
    hn_free(p->name_slots);
    p->name_slots = slots;
    p->name_slots_cap = cap;
    return 0;
}

int hn_prog_var(hn_program *p, const char *name, int len)
{
    char *copy;
    int var = hn_prog_lookup_var(p, name, len);
    if (var >= 0)
        return var;
    if (slots_reserve(p) != 0 ||
        hn_grow((void **)&p->names, &p->names_cap, p->nvars, sizeof(*p->names)) != 0)
        return -1;
    if (hn_npool_filling(p) && p->npooled_names == p->nvars) {
        if ((copy = hn_npool_take((size_t)len + 1)) == NULL)
            return -1;
        memcpy(copy, name, (size_t)len);
        p->npooled_names++; /* names 0..npooled_names-1 lie in the pool */
    } else if ((copy = hn_strndup(name, (size_t)len)) == NULL) {
        return -1;
    }
    p->names[p->nvars] = copy;
    slot_insert(p->name_slots, p->name_slots_cap, copy, p->nvars);
    return p->nvars++;
}

int hn_prog_add_param(hn_program *p, int var, hn_expr *value, int line, int col)
{
    if (value == NULL ||
        hn_grow((void **)&p->params, &p->params_cap, p->nparams, sizeof(*p->params)) != 0) {
        hn_expr_free(value);
        return -1;
    }
    p->params[p->nparams].var = var;
    p->params[p->nparams].value = value;
    p->params[p->nparams].line = line;
    p->params[p->nparams].col = col;
    p->nparams++;
    return 0;
}

int hn_prog_add_io(hn_program *p, int is_output, int var, hn_type *type,
                   int shard_axis, int line, int col)
{
    hn_io **arr = is_output ? &p->outputs : &p->inputs;
    int *n = is_output ? &p->noutputs : &p->ninputs;
    int *cap = is_output ? &p->outputs_cap : &p->inputs_cap;
    hn_io *io;
    if (hn_grow((void **)arr, cap, *n, sizeof(**arr)) != 0) {
        hn_type_clear(type);
        return -1;
    }
    io = &(*arr)[(*n)++];
    io->var = var;
    io->type = *type; /* takes ownership of the shape expressions */
    memset(type, 0, sizeof(*type));
    io->shard_axis = shard_axis;
    io->line = line;
    io->col = col;
    return 0;
}

static int count_block(const hn_block *b)
{
    int n = 0;
    for (int i = 0; i < b->n; i++)
        n += 1 + count_block(&b->items[i]->body) + count_block(&b->items[i]->orelse);
    return n;
}

static void number_block(hn_program *p, const hn_block *b, int *next)
{
    for (int i = 0; i < b->n; i++) {
        hn_instr *in = b->items[i];
        p->has_wait |= in->op == HN_OP_WAIT;
        p->has_sched |= in->on_streams || (hn_op_table[in->op].flags & HN_OPF_PIPE) != 0;
        p->has_world_allreduce |= in->op == HN_OP_ALLREDUCE && in->team_kind == HN_TEAM_ALL;
        in->id = (*next)++;
        p->instrs[in->id] = in;
        number_block(p, &in->body, next);
        number_block(p, &in->orelse, next);
    }
}

hn_status_t hn_prog_finish(hn_program *p)
{
    int next = 0;
    int n = count_block(&p->body) + count_block(&p->reference);
    hn_free(p->instrs);
    p->instrs = hn_calloc((size_t)(n ? n : 1), sizeof(*p->instrs));
    if (p->instrs == NULL)
        return HN_ERR_NOMEM;
    p->has_wait = 0;
    p->has_sched = 0;
    p->has_world_allreduce = 0;
    number_block(p, &p->body, &next);
    number_block(p, &p->reference, &next);
    p->ninstrs = n;
    return HN_OK;
}

int hn_prog_input_index(const hn_program *p, int var)
{
    for (int i = 0; i < p->ninputs; i++)
        if (p->inputs[i].var == var)
            return i;
    return -1;
}

int hn_prog_output_index(const hn_program *p, int var)
{
    for (int i = 0; i < p->noutputs; i++)
        if (p->outputs[i].var == var)
            return i;
    return -1;
}
