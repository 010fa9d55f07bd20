/* Bindings (bind.c): what a program's inputs and outputs need at one
 * configuration, the check of a call's bindings against it, and the table
 * of the blocks hn_runtime_alloc gave out. From the caller's thread. */
#ifndef HN_SCHED_BIND_H
#define HN_SCHED_BIND_H

#include "../ranks/runtime_int.h"

/* What the bindings of p need at these parameters on `world` ranks: the
 * bytes of input / output k on rank r at [k * world + r], the element size
 * of k at [nio * world + k] (hn_verified.need's layout); NULL when out of
 * memory or when a shape does not evaluate (the dry run says why). */
size_t *hn_bind_needs(const hn_program *p, const int64_t *params, int world, int nstreams);

/* The pointers and sizes of a call's bindings, matched to p's inputs then
 * outputs: ptr[k][i], bytes[k][i] for the runtime's local rank i (rank
 * first + i: hn_runtime_first_rank). */
typedef struct hn_bound {
    void ***ptr;
    const size_t **bytes;
} hn_bound;

/* Matches args' bindings to p's inputs and outputs by name (the last of a
 * name wins; others are ignored) into b (arrays of nio, allocated here;
 * hn_bound_free). A name not bound, a binding without a name, pointers or
 * sizes is an error in diag (HN_ERR_INVALID). */
hn_status_t hn_bind_match(const hn_program *p, const hn_run_args *args, hn_bound *b, hn_strbuf *diag);
void hn_bound_free(hn_bound *b);

/* Checks b on every local rank against what p needs at these parameters (v: its
 * prepared configuration, whose needs are used when known; else they are
 * worked out now): a NULL pointer (unless nothing is needed), fewer bytes
 * than needed, a pointer not aligned to the element size, a pointer into
 * a block of hn_runtime_alloc that ends before the tensor does. The first
 * such binding is an error in diag naming the tensor, the rank, the bytes
 * needed and given (HN_ERR_INVALID). */
hn_status_t hn_bind_check(hn_runtime *rt, const hn_program *p, const int64_t *params, const hn_verified *v,
                          const hn_bound *b, hn_strbuf *diag);

/* The table of hn_runtime_alloc's blocks of rank r: note one (HN_ERR_NOMEM
 * when the table cannot grow), drop one (0 if ptr is none of them), free
 * every rank's table (the runtime's end). */
hn_status_t hn_bind_note_block(hn_rank *r, void *ptr, size_t bytes);
int hn_bind_drop_block(hn_rank *r, void *ptr);
/* 0 when ptr points into a block of rank r's table that ends before
 * ptr + bytes; 1 otherwise (inside, or in no block: not known). */
int hn_bind_fits(const hn_rank *r, const void *ptr, size_t bytes);
/* The block of hn_runtime_alloc ptr points into (its start and bytes):
 * 1, or 0 when it points into none. */
int hn_bind_block_of(const hn_rank *r, const void *ptr, uintptr_t *base, size_t *bytes);
void hn_bind_fini(hn_runtime *rt);

#endif
