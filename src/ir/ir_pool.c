/* The parser's node pool (ir_pool.h): chunks that a parser fills one
 * after the other, freed all at once with their program, and the nodes
 * shared by every use while parsing. Calls nothing of ir.c. */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "ir.h"
#include "ir_pool.h"

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

int hn_npool_active(void) { return cur_pool != NULL; }

int hn_npool_filling(const hn_program *p) { return cur_pool != NULL && cur_pool == p->pool; }

void hn_npool_stop(const hn_program *p)
{
    if (hn_npool_filling(p))
        cur_pool = NULL;
}

/* n zeroed bytes of the current pool (8-byte aligned), or NULL when out of
 * memory or when no pool is being filled. */
void *hn_npool_take(size_t n)
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
void *hn_npool_grow(void *old, size_t old_n, size_t n)
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
    if ((p = hn_npool_take(n)) != NULL && old != NULL)
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

void hn_npool_free(struct hn_node_pool *pl)
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
    if ((items = hn_npool_take((size_t)b->n * sizeof(*items))) == NULL)
        return -1;
    memcpy(items, b->items, (size_t)b->n * sizeof(*items));
    hn_free(b->items);
    b->items = items;
    b->cap = -1;
    return 0;
}

/* ---- expression nodes ---- */

hn_expr *hn_npool_expr(hn_expr_kind kind)
{
    hn_expr *e = cur_pool != NULL ? hn_npool_take(sizeof(*e)) : hn_calloc(1, sizeof(*e));
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
    if ((e = hn_npool_expr((hn_expr_kind)k->kind)) == NULL)
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

hn_expr *hn_npool_node(int kind, int op, uint64_t bits, hn_expr *a, hn_expr *b)
{
    node_key k = {kind, op, bits, a, b};
    return ex_node(&k);
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
    e = hn_npool_expr(kind);
    if (one != NULL && e != NULL) {
        e->pooled = 2; /* shared */
        *one = e;
    }
    return e;
}

