/* Host IR construction, destruction, equality and scalar evaluation. */
#include "ir.h"

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
static const char *backend_names[HN_VIA_COUNT] = {"default", "nccl", "p2p", "auto", "ll"};
static const char *strategy_names[HN_STRAT_COUNT] = {"auto", "sequential", "ring", "collective", "broadcast"};

const char *hn_strategy_name(hn_strategy s)
{
    return (unsigned)s < HN_STRAT_COUNT ? strategy_names[s] : "?";
}

const char *hn_redop_name(hn_redop r) { return (unsigned)r < HN_RED_COUNT ? redop_names[r] : "?"; }
const char *hn_backend_name(hn_backend_kind b)
{
    return (unsigned)b < HN_VIA_COUNT ? backend_names[b] : "?";
}

const char *hn_via_variant(hn_backend_kind b, int get)
{
    if (b == HN_VIA_P2P)
        return get ? " get" : "";
    if (b == HN_VIA_LL)
        return get == 1 ? " oneshot" : get == 2 ? " twoshot" : "";
    return "";
}

/* ---- the node pool ---- */

/* Chunks that a parser fills one after the other, freed all at once with
 * their program: millions of small nodes without a malloc header each (and
 * without malloc's rounding). */
#define POOL_CHUNK ((size_t)1 << 20)
/* -DHN_POOL_DEBUG: every node a block of its own, of its size (valgrind
 * or ASan then see a read past the parts a pooled instruction has) */
#ifdef HN_POOL_DEBUG
#define POOL_DEBUG 1
#else
#define POOL_DEBUG 0
#endif

typedef struct pool_chunk {
    struct pool_chunk *prev;
    size_t used, size;
    max_align_t data[];
} pool_chunk;

struct hn_node_pool {
    pool_chunk *top;
    /* while parsing: the nodes shared by every use (ex_node: numbers, and
     * nodes of shared operands only), one per value (their positions name
     * nothing: messages take the enclosing ones) */
    hn_expr **leaves; /* open addressing, at most half full */
    int nleaves, leaves_cap;
    hn_expr *rank, *world, *nstreams;
};

/* The pool that this thread's parser fills, or NULL. */
static _Thread_local struct hn_node_pool *cur_pool;

/* n zeroed bytes of the current pool (8-byte aligned), or NULL when out of
 * memory or when no pool is being filled. */
static void *pool_take(size_t n)
{
    struct hn_node_pool *pl = cur_pool;
    pool_chunk *c;
    void *p;
    if (pl == NULL)
        return NULL;
    n = (n + 7) & ~(size_t)7;
    c = pl->top;
    if (c == NULL || c->size - c->used < n || POOL_DEBUG) {
        int big = n > POOL_CHUNK / 4 || POOL_DEBUG;
        size_t size = big ? n : POOL_CHUNK - sizeof(pool_chunk) - 64;
        if ((c = hn_malloc(sizeof(pool_chunk) + size)) == NULL)
            return NULL;
        c->used = 0;
        c->size = size;
        if (big && pl->top != NULL) { /* a chunk of its own, behind the one being filled */
            c->prev = pl->top->prev;
            pl->top->prev = c;
        } else {
            c->prev = pl->top;
            pl->top = c;
        }
    }
    p = (char *)c->data + c->used;
    c->used += n;
    memset(p, 0, n);
    return p;
}

/* old (old_n bytes of the current pool, or NULL) grown to n bytes: in
 * place when it was the last taken, else moved (the old bytes stay
 * unused); the new bytes zeroed. NULL when out of memory. */
static void *pool_grow(void *old, size_t old_n, size_t n)
{
    pool_chunk *c = cur_pool != NULL ? cur_pool->top : NULL;
    void *p;
    old_n = (old_n + 7) & ~(size_t)7;
    if (old != NULL && c != NULL && !POOL_DEBUG && (char *)old + old_n == (char *)c->data + c->used &&
        c->size - c->used >= ((n + 7) & ~(size_t)7) - old_n) {
        c->used += ((n + 7) & ~(size_t)7) - old_n;
        memset((char *)old + old_n, 0, ((n + 7) & ~(size_t)7) - old_n);
        return old;
    }
    if ((p = pool_take(n)) != NULL && old != NULL)
        memcpy(p, old, old_n < n ? old_n : n);
    return p;
}

static void leaves_free(struct hn_node_pool *pl)
{
    hn_free(pl->leaves);
    pl->leaves = NULL;
    pl->nleaves = pl->leaves_cap = 0;
    pl->rank = pl->world = pl->nstreams = NULL;
}

static void pool_free(struct hn_node_pool *pl)
{
    if (pl == NULL)
        return;
    leaves_free(pl);
    while (pl->top != NULL) {
        pool_chunk *c = pl->top;
        pl->top = c->prev;
        hn_free(c);
    }
    hn_free(pl);
}

int hn_prog_pool_begin(hn_program *p)
{
    if (p->pool == NULL && (p->pool = hn_calloc(1, sizeof(*p->pool))) == NULL)
        return -1;
    cur_pool = p->pool;
    return 0;
}

void hn_prog_pool_end(hn_program *p)
{
    if (cur_pool != NULL && cur_pool == p->pool) {
        leaves_free(cur_pool); /* the program is built: nothing more to share */
        cur_pool = NULL;
    }
}

int hn_block_seal(hn_block *b)
{
    hn_instr **items;
    if (cur_pool == NULL || b->cap < 0)
        return 0;
    if (b->n == 0) {
        hn_free(b->items);
        memset(b, 0, sizeof(*b));
        return 0;
    }
    if ((items = pool_take((size_t)b->n * sizeof(*items))) == NULL)
        return -1;
    memcpy(items, b->items, (size_t)b->n * sizeof(*items));
    hn_free(b->items);
    b->items = items;
    b->cap = -1;
    return 0;
}

/* ---- expressions ---- */

static hn_expr *ex_new(hn_expr_kind kind)
{
    hn_expr *e = cur_pool != NULL ? pool_take(sizeof(*e)) : hn_calloc(1, sizeof(*e));
    if (e != NULL) {
        e->kind = kind;
        e->var = -1;
        e->pooled = cur_pool != NULL;
    }
    return e;
}

static uint64_t leaf_bits(const hn_expr *e)
{
    uint64_t bits;
    memcpy(&bits, &e->ival, sizeof(bits)); /* ival and fval share it */
    return bits;
}

static int is_number(int kind) { return kind == HN_EX_INT || kind == HN_EX_FLOAT; }

/* A shared node's identity: a number by its value, any other node by its
 * operator and its (shared) operands. */
typedef struct node_key {
    int kind, op;
    uint64_t bits;
    const hn_expr *a, *b;
} node_key;

static node_key key_of(const hn_expr *e)
{
    node_key k = {e->kind, e->op, 0, e->a, e->b};
    if (is_number(e->kind)) {
        k.bits = leaf_bits(e);
        k.op = 0;
        k.a = k.b = NULL;
    }
    return k;
}

static uint32_t key_hash(const node_key *k)
{
    uint64_t h = k->bits ^ ((uint64_t)k->kind << 56) ^ ((uint64_t)k->op << 48);
    h ^= (uint64_t)(uintptr_t)k->a * 0x9e3779b97f4a7c15u;
    h ^= (uint64_t)(uintptr_t)k->b * 0xc2b2ae3d27d4eb4fu;
    h *= 0xff51afd7ed558ccdu;
    return (uint32_t)(h >> 32);
}

static int key_is(const hn_expr *e, const node_key *k)
{
    if (e->kind != k->kind)
        return 0;
    if (is_number(k->kind))
        return leaf_bits(e) == k->bits;
    return e->op == k->op && e->a == k->a && e->b == k->b;
}

/* The slot of the node k in pl's table: it, or an empty one. */
static hn_expr **node_slot(struct hn_node_pool *pl, const node_key *k)
{
    uint32_t mask = (uint32_t)pl->leaves_cap - 1;
    for (uint32_t h = key_hash(k) & mask;; h = (h + 1) & mask) {
        hn_expr *e = pl->leaves[h];
        if (e == NULL || key_is(e, k))
            return &pl->leaves[h];
    }
}

/* A node of kind k. While parsing, a number, or a node whose operands are
 * all shared (numbers, world, nstreams, rank, and nodes of them only: no
 * message names a position in it), is the pool's one node for it, shared
 * by every use (pooled 2, positionless); else a node of its own. */
static hn_expr *ex_node(const node_key *k)
{
    struct hn_node_pool *pl = cur_pool;
    hn_expr **slot = NULL, *e;
    int share = pl != NULL && (is_number(k->kind) || ((k->a == NULL || k->a->pooled == 2) &&
                                                       (k->b == NULL || k->b->pooled == 2)));
    if (share && 2 * (pl->nleaves + 1) > pl->leaves_cap) { /* grow: at most half full */
        int cap = pl->leaves_cap ? 2 * pl->leaves_cap : 1024;
        hn_expr **old = pl->leaves;
        int oldcap = pl->leaves_cap;
        if ((pl->leaves = hn_calloc((size_t)cap, sizeof(*pl->leaves))) == NULL) {
            pl->leaves = old;
            return NULL;
        }
        pl->leaves_cap = cap;
        for (int i = 0; i < oldcap; i++)
            if (old[i] != NULL) {
                node_key ok = key_of(old[i]);
                *node_slot(pl, &ok) = old[i];
            }
        hn_free(old);
    }
    if (share && *(slot = node_slot(pl, k)) != NULL)
        return *slot;
    if ((e = ex_new((hn_expr_kind)k->kind)) == NULL)
        return NULL;
    if (is_number(k->kind)) {
        memcpy(&e->ival, &k->bits, sizeof(k->bits));
    } else {
        e->op = (unsigned char)k->op;
        e->a = (hn_expr *)k->a;
        e->b = (hn_expr *)k->b;
    }
    if (share) {
        e->pooled = 2; /* shared */
        *slot = e;
        pl->nleaves++;
    }
    return e;
}

static hn_expr *ex_number(hn_expr_kind kind, uint64_t bits)
{
    node_key k = {kind, 0, bits, NULL, NULL};
    return ex_node(&k);
}

hn_expr *hn_ex_int(int64_t v) { return ex_number(HN_EX_INT, (uint64_t)v); }

hn_expr *hn_ex_float(double v)
{
    uint64_t bits;
    memcpy(&bits, &v, sizeof(bits));
    return ex_number(HN_EX_FLOAT, bits);
}

hn_expr *hn_ex_var(int var)
{
    hn_expr *e = var >= 0 ? ex_new(HN_EX_VAR) : NULL;
    if (e != NULL)
        e->var = var;
    return e;
}

/* The pool's one node for rank, world or nstreams while parsing, else a
 * node of its own. */
hn_expr *hn_ex_leaf_shared(hn_expr_kind kind)
{
    hn_expr **one = cur_pool == NULL ? NULL
                    : kind == HN_EX_RANK     ? &cur_pool->rank
                    : kind == HN_EX_WORLD    ? &cur_pool->world
                    : kind == HN_EX_NSTREAMS ? &cur_pool->nstreams
                                             : NULL;
    hn_expr *e;
    if (one != NULL && *one != NULL)
        return *one;
    e = ex_new(kind);
    if (one != NULL && e != NULL) {
        e->pooled = 2; /* shared */
        *one = e;
    }
    return e;
}

hn_expr *hn_ex_leaf(hn_expr_kind kind)
{
    /* world and nstreams: one node each while parsing; rank a node of its
     * own (hn_ex_leaf_shared: where no message may name its position) */
    return kind == HN_EX_RANK ? ex_new(kind) : hn_ex_leaf_shared(kind);
}

hn_expr *hn_ex_unary(hn_expr_kind kind, hn_expr *a)
{
    node_key k = {kind, 0, 0, a, NULL};
    hn_expr *e = a != NULL ? ex_node(&k) : NULL;
    if (e == NULL)
        hn_expr_free(a);
    return e;
}

/* A node of two operands (taking them; both freed when out of memory). */
static hn_expr *ex_two(hn_expr_kind kind, hn_binop op, hn_expr *a, hn_expr *b)
{
    node_key k = {kind, op, 0, a, b};
    hn_expr *e = (a != NULL && b != NULL) ? ex_node(&k) : NULL;
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
    int tier = cur_pool != NULL ? tier_of(op) : 0;
    hn_instr *in = tier ? pool_take(tier_bytes(tier)) : hn_calloc(1, sizeof(*in));
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

int hn_tref_push_idx(hn_tref *t, hn_expr *e)
{
    hn_expr **grown;
    if (e == NULL || t->nidx >= HN_MAX_DIMS ||
        (grown = hn_realloc(t->idx, (size_t)(t->nidx + 1) * sizeof(*grown))) == NULL) {
        hn_expr_free(e);
        return -1;
    }
    t->idx = grown;
    t->idx[t->nidx++] = e;
    return 0;
}

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

int hn_type_push_dim(hn_type *t, hn_expr *e)
{
    hn_expr **grown;
    if (e == NULL || t->ndim >= HN_MAX_DIMS ||
        (grown = hn_realloc(t->shape, (size_t)(t->ndim + 1) * sizeof(*grown))) == NULL) {
        hn_expr_free(e);
        return -1;
    }
    t->shape = grown;
    t->shape[t->ndim++] = e;
    return 0;
}

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
        if (cur_pool == NULL ||
            (grown = pool_grow(in->args, (size_t)in->nargs * sizeof(*grown),
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
    if (cur_pool != NULL && cur_pool == p->pool)
        cur_pool = NULL;
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
    pool_free(p->pool); /* last: the nodes freed above may lie in it */
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
    if (cur_pool != NULL && cur_pool == p->pool && p->npooled_names == p->nvars) {
        if ((copy = pool_take((size_t)len + 1)) == NULL)
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

/* ---- equality ---- */

/* Variables are slots; programs are compared by the names behind them. */
typedef struct eq_ctx {
    const hn_program *pa, *pb;
} eq_ctx;

static int name_equal(const eq_ctx *c, int a, int b)
{
    if (a < 0 || b < 0)
        return a == b;
    return strcmp(c->pa->names[a], c->pb->names[b]) == 0;
}

static int expr_eq(const eq_ctx *c, const hn_expr *a, const hn_expr *b)
{
    if (a == NULL || b == NULL)
        return a == b;
    if (a->kind != b->kind)
        return 0;
    if (a->kind == HN_EX_VAR)
        return name_equal(c, a->var, b->var);
    if (a->kind == HN_EX_INT)
        return a->ival == b->ival;
    if (a->kind == HN_EX_FLOAT)
        return a->fval == b->fval;
    if (a->kind == HN_EX_BIN && a->op != b->op)
        return 0;
    return expr_eq(c, a->a, b->a) && expr_eq(c, a->b, b->b);
}

static int tref_eq(const eq_ctx *c, const hn_tref *a, const hn_tref *b)
{
    if (!name_equal(c, a->var, b->var) || a->nidx != b->nidx)
        return 0;
    for (int i = 0; i < a->nidx; i++)
        if (!expr_eq(c, a->idx[i], b->idx[i]))
            return 0;
    return 1;
}

static int type_eq(const eq_ctx *c, const hn_type *a, const hn_type *b)
{
    if (a->dtype != b->dtype || a->ndim != b->ndim)
        return 0;
    for (int i = 0; i < a->ndim; i++)
        if (!expr_eq(c, a->shape[i], b->shape[i]))
            return 0;
    return 1;
}

static int block_eq(const eq_ctx *c, const hn_block *a, const hn_block *b);

/* An instruction's parts, or what one without them holds (hn_instr_new). */
static const hn_tref no_tref = {-1, 0, NULL, 0, 0};
static const hn_type no_type;

static const hn_tref *part_a(const hn_instr *in) { return hn_instr_has_operands(in) ? &in->a : &no_tref; }
static const hn_tref *part_b(const hn_instr *in) { return hn_instr_has_all(in) ? &in->b : &no_tref; }
static const hn_type *part_type(const hn_instr *in) { return hn_instr_has_all(in) ? &in->type : &no_type; }
static const hn_expr *part_sref(const hn_instr *in) { return hn_instr_has_streamref(in) ? in->sref_index : NULL; }
static int part_sref_var(const hn_instr *in) { return hn_instr_has_streamref(in) ? in->sref_var : -1; }
static int part_wait_var(const hn_instr *in) { return hn_instr_has_streamref(in) ? in->wait_var : -1; }
static int part_nteam(const hn_instr *in) { return hn_instr_has_all(in) ? in->nteam : 0; }

static int instr_eq(const eq_ctx *c, const hn_instr *a, const hn_instr *b)
{
    if (a->op != b->op || !name_equal(c, a->dst, b->dst) || !tref_eq(c, part_a(a), part_a(b)) ||
        !tref_eq(c, part_b(a), part_b(b)) || !type_eq(c, part_type(a), part_type(b)) ||
        !name_equal(c, part_sref_var(a), part_sref_var(b)) || !expr_eq(c, part_sref(a), part_sref(b)) ||
        a->redop != b->redop || a->via != b->via || a->get != b->get || a->team_kind != b->team_kind ||
        a->strategy != b->strategy || a->protocol != b->protocol || a->on_streams != b->on_streams ||
        part_nteam(a) != part_nteam(b) || !name_equal(c, part_wait_var(a), part_wait_var(b)) ||
        a->nargs != b->nargs)
        return 0;
    for (int i = 0; i < 3; i++)
        if (!expr_eq(c, a->e[i], b->e[i]))
            return 0;
    /* nargs is 0 where the operands are missing */
    for (int i = 0; i < part_nteam(a); i++)
        if (!expr_eq(c, a->team[i], b->team[i]))
            return 0;
    for (int i = 0; i < a->nargs; i++)
        if (a->args[i].is_tensor != b->args[i].is_tensor ||
            !tref_eq(c, &a->args[i].t, &b->args[i].t) || !expr_eq(c, a->args[i].e, b->args[i].e))
            return 0;
    return block_eq(c, &a->body, &b->body) && block_eq(c, &a->orelse, &b->orelse);
}

static int block_eq(const eq_ctx *c, const hn_block *a, const hn_block *b)
{
    if (a->n != b->n)
        return 0;
    for (int i = 0; i < a->n; i++)
        if (!instr_eq(c, a->items[i], b->items[i]))
            return 0;
    return 1;
}

static int io_eq(const eq_ctx *c, const hn_io *a, int na, const hn_io *b, int nb)
{
    if (na != nb)
        return 0;
    for (int i = 0; i < na; i++)
        if (!name_equal(c, a[i].var, b[i].var) || a[i].shard_axis != b[i].shard_axis ||
            !type_eq(c, &a[i].type, &b[i].type))
            return 0;
    return 1;
}

int hn_prog_equal(const hn_program *a, const hn_program *b)
{
    eq_ctx c = {a, b};
    if (a->nparams != b->nparams || a->has_reference != b->has_reference)
        return 0;
    for (int i = 0; i < a->nparams; i++)
        if (!name_equal(&c, a->params[i].var, b->params[i].var) ||
            !expr_eq(&c, a->params[i].value, b->params[i].value))
            return 0;
    return io_eq(&c, a->inputs, a->ninputs, b->inputs, b->ninputs) &&
           io_eq(&c, a->outputs, a->noutputs, b->outputs, b->noutputs) &&
           block_eq(&c, &a->body, &b->body) && block_eq(&c, &a->reference, &b->reference);
}
