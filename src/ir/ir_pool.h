/* The parser's node pool (ir_pool.c), for ir.c: while a program is being
 * parsed on this thread (hn_prog_pool_begin), its nodes are taken from its
 * pool, without malloc's headers, and freed with it. */
#ifndef HN_IR_POOL_H
#define HN_IR_POOL_H

#include <stddef.h>
#include <stdint.h>

#include "ir.h"

/* Whether a pool is being filled on this thread; whether it is p's. */
int hn_npool_active(void);
int hn_npool_filling(const hn_program *p);
/* Stops filling p's pool on this thread, if it was. */
void hn_npool_stop(const hn_program *p);
/* n zeroed bytes of the pool being filled (8-byte aligned), or NULL when
 * out of memory or when none is. */
void *hn_npool_take(size_t n);
/* old (old_n bytes of the pool being filled, or NULL) grown to n bytes: in
 * place when it was the last taken, else moved; NULL when out of memory. */
void *hn_npool_grow(void *old, size_t old_n, size_t n);
void hn_npool_free(struct hn_node_pool *pl);
/* A fresh node of the kind (var -1): in the pool being filled, else of
 * its own (hn_calloc); NULL when out of memory. */
hn_expr *hn_npool_expr(hn_expr_kind kind);
/* A node: a number (HN_EX_INT, HN_EX_FLOAT: its bits), or of operator op
 * and operands a, b (not taken). While parsing, a number or a node of
 * shared operands only is the pool's one node for it (pooled 2). */
hn_expr *hn_npool_node(int kind, int op, uint64_t bits, hn_expr *a, hn_expr *b);

#endif
