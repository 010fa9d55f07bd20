/* Bindings: what a program's inputs and outputs need at a configuration
 * (bytes and element size on every rank, worked out once when the
 * configuration is prepared), the check of a call's bindings against it
 * and against the blocks hn_runtime_alloc gave out (a per-rank table
 * sorted by address), and the public hn_program_io, which answers the
 * same question for a caller before it allocates. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "bind.h"
#include "procs.h"
#include "../ranks/teams.h"
#include "../ir/params.h"

_Static_assert(HN_MAX_DIMS == HN_TENSOR_MAX_DIMS, "the public limit on dimensions is the IR's");
#define X(e, n, s, f) _Static_assert((int)HN_DTYPE_##e == (int)HN_##e, "hn_dtype_code follows hn_dtype");
HN_DTYPE_LIST(X)
#undef X

static const hn_io *io_at(const hn_program *p, int k)
{
    return k < p->ninputs ? &p->inputs[k] : &p->outputs[k - p->ninputs];
}

size_t *hn_bind_needs(const hn_program *p, const int64_t *params, int world, int nstreams)
{
    int nio = p->ninputs + p->noutputs;
    size_t *need = hn_calloc((size_t)nio * (size_t)(world + 1) + 1, sizeof(size_t));
    hn_strbuf quiet; /* the dry run reports a shape that does not evaluate */
    hn_status_t st = HN_OK;
    if (need == NULL)
        return NULL;
    hn_sb_init(&quiet);
    for (int k = 0; k < nio && st == HN_OK; k++) {
        const hn_io *io = io_at(p, k);
        need[(size_t)nio * (size_t)world + (size_t)k] = (size_t)hn_dtype_size(io->type.dtype);
        for (int r = 0; r < world && st == HN_OK; r++) {
            hn_tensor t;
            if ((st = hn_io_tensor(p, io, params, r, world, nstreams, 0, &t, &quiet)) == HN_OK)
                need[(size_t)k * (size_t)world + (size_t)r] = hn_tensor_bytes(&t);
        }
    }
    hn_sb_free(&quiet);
    if (st != HN_OK) {
        hn_free(need);
        return NULL;
    }
    return need;
}

void hn_bound_free(hn_bound *b)
{
    hn_free(b->ptr); /* the sizes' array lives in the same block */
    b->ptr = NULL;
    b->bytes = NULL;
}

hn_status_t hn_bind_match(const hn_program *p, const hn_run_args *args, hn_bound *b, hn_strbuf *diag)
{
    int nio = p->ninputs + p->noutputs;
    hn_status_t st = HN_OK;
    /* one block, pointers then sizes: a launch pays one allocation */
    if ((b->ptr = hn_calloc((size_t)(nio + 1) * 2, sizeof(void *))) == NULL)
        return HN_ERR_NOMEM;
    b->bytes = (const size_t **)(void *)(b->ptr + nio + 1);
    if (args->nbindings > 0 && args->bindings == NULL) {
        hn_sb_printf(diag, "%s: error: %d bindings, but no array of them (hn_run_args.bindings is NULL)\n",
                     p->filename, args->nbindings);
        hn_bound_free(b);
        return HN_ERR_INVALID;
    }
    for (int i = 0; i < args->nbindings && st == HN_OK; i++) {
        const hn_binding *x = &args->bindings[i];
        if (x->name == NULL) {
            hn_sb_printf(diag, "%s: error: binding %d has no name\n", p->filename, i);
            st = HN_ERR_INVALID;
        } else if (x->data == NULL || x->bytes == NULL) {
            hn_sb_printf(diag, "%s: error: binding '%s': no %s (hn_binding.%s is NULL)\n", p->filename, x->name,
                         x->data == NULL ? "pointers" : "sizes", x->data == NULL ? "data" : "bytes");
            st = HN_ERR_INVALID;
        }
    }
    for (int k = 0; k < nio && st == HN_OK; k++) {
        const hn_io *io = io_at(p, k);
        for (int i = 0; i < args->nbindings; i++)
            if (strcmp(args->bindings[i].name, p->names[io->var]) == 0) {
                b->ptr[k] = (void **)args->bindings[i].data;
                b->bytes[k] = args->bindings[i].bytes;
            }
        if (b->ptr[k] == NULL) {
            hn_sb_printf(diag, "%s: error: no binding for %s '%s'\n", p->filename,
                         k < p->ninputs ? "input" : "output", p->names[io->var]);
            st = HN_ERR_INVALID;
        }
    }
    if (st != HN_OK)
        hn_bound_free(b);
    return st;
}

/* ---- hn_runtime_alloc's blocks ---- */

/* index of the last block whose base is <= a, or -1 */
static int block_at_or_before(const hn_rank *r, uintptr_t a)
{
    int lo = 0, hi = r->nuser_blocks - 1, found = -1;
    while (lo <= hi) {
        int mid = lo + (hi - lo) / 2;
        if (r->user_blocks[mid].base <= a) {
            found = mid;
            lo = mid + 1;
        } else {
            hi = mid - 1;
        }
    }
    return found;
}

/* the bytes from a to the end of the block of hn_runtime_alloc that a
 * points into; SIZE_MAX when it points into none */
static size_t block_room(const hn_rank *r, uintptr_t a)
{
    int at = r->nuser_blocks > 0 ? block_at_or_before(r, a) : -1;
    if (at < 0 || a - r->user_blocks[at].base >= r->user_blocks[at].bytes)
        return SIZE_MAX;
    return r->user_blocks[at].bytes - (size_t)(a - r->user_blocks[at].base);
}

int hn_bind_fits(const hn_rank *r, const void *ptr, size_t bytes)
{
    return bytes <= block_room(r, (uintptr_t)ptr);
}

int hn_bind_block_of(const hn_rank *r, const void *ptr, uintptr_t *base, size_t *bytes)
{
    uintptr_t a = (uintptr_t)ptr;
    int at;
    if (block_room(r, a) == SIZE_MAX)
        return 0;
    at = block_at_or_before(r, a);
    *base = r->user_blocks[at].base;
    *bytes = r->user_blocks[at].bytes;
    return 1;
}

hn_status_t hn_bind_note_block(hn_rank *r, void *ptr, size_t bytes)
{
    uintptr_t a = (uintptr_t)ptr;
    int at;
    if (hn_grow((void **)&r->user_blocks, &r->user_blocks_cap, r->nuser_blocks, sizeof(*r->user_blocks)) != 0)
        return HN_ERR_NOMEM;
    at = block_at_or_before(r, a) + 1;
    memmove(&r->user_blocks[at + 1], &r->user_blocks[at], (size_t)(r->nuser_blocks - at) * sizeof(hn_user_block));
    r->user_blocks[at].base = a;
    r->user_blocks[at].bytes = bytes;
    r->nuser_blocks++;
    return HN_OK;
}

int hn_bind_drop_block(hn_rank *r, void *ptr)
{
    int at = block_at_or_before(r, (uintptr_t)ptr);
    if (at < 0 || r->user_blocks[at].base != (uintptr_t)ptr)
        return 0;
    memmove(&r->user_blocks[at], &r->user_blocks[at + 1],
            (size_t)(r->nuser_blocks - at - 1) * sizeof(hn_user_block));
    r->nuser_blocks--;
    return 1;
}

void hn_bind_fini(hn_runtime *rt)
{
    for (int i = 0; rt->ranks != NULL && i < rt->nlocal; i++) {
        hn_free(rt->ranks[i].user_blocks);
        rt->ranks[i].user_blocks = NULL;
        rt->ranks[i].nuser_blocks = rt->ranks[i].user_blocks_cap = 0;
    }
}

/* ---- the check ---- */

/* "binding 'X' on rank 1: 4096 bytes needed (f32[32, 32]), " */
static void say_needed(hn_strbuf *diag, hn_runtime *rt, const hn_program *p, const int64_t *params, int k, int rank,
                       size_t need)
{
    const hn_io *io = io_at(p, k);
    hn_strbuf quiet;
    hn_tensor t;
    char shape[160];
    hn_sb_init(&quiet);
    if (hn_io_tensor(p, io, params, rank, rt->world, rt->cfg.nstreams, 0, &t, &quiet) == HN_OK)
        hn_tensor_shape_text(&t, shape, sizeof(shape));
    else
        snprintf(shape, sizeof(shape), "%s", hn_dtype_name(io->type.dtype));
    hn_sb_free(&quiet);
    hn_sb_printf(diag, "%s: error: binding '%s' on rank %d: %zu bytes needed (%s), ", p->filename,
                 p->names[io->var], rank, need, shape);
}

hn_status_t hn_bind_check(hn_runtime *rt, const hn_program *p, const int64_t *params, const hn_verified *v,
                          const hn_bound *b, hn_strbuf *diag)
{
    int n = rt->world, nio = p->ninputs + p->noutputs;
    size_t *own = NULL;
    const size_t *need = v != NULL && v->nio == nio ? v->need : NULL;
    if (need == NULL && (need = own = hn_bind_needs(p, params, n, rt->cfg.nstreams)) == NULL)
        return HN_ERR_NOMEM; /* the configuration was prepared, so its shapes evaluate */
    for (int k = 0; k < nio; k++) {
        size_t esize = need[(size_t)nio * (size_t)n + (size_t)k];
        for (int i = 0; i < rt->nlocal; i++) { /* bindings hold the local ranks', needs the world's */
            const hn_rank *rk = &rt->ranks[i];
            int r = rk->rank;
            uintptr_t a = (uintptr_t)b->ptr[k][i];
            size_t want = need[(size_t)k * (size_t)n + (size_t)r], given = b->bytes[k][i], room;
            if (a == 0 && want == 0)
                continue; /* nothing to point at */
            if (a == 0 || given < want) {
                say_needed(diag, rt, p, params, k, r, want);
                if (a == 0)
                    hn_sb_printf(diag, "a NULL pointer given\n");
                else
                    hn_sb_printf(diag, "%zu given\n", given);
                goto refuse;
            }
            if (a % esize != 0) {
                const hn_io *io = io_at(p, k);
                hn_sb_printf(diag, "%s: error: binding '%s' on rank %d: pointer %p is not aligned to %zu bytes "
                             "(an element of %s)\n", p->filename, p->names[io->var], r, (void *)a, esize,
                             hn_dtype_name(io->type.dtype));
                goto refuse;
            }
            /* across processes the others reach only this rank's shared device
             * memory: where a communicator reads and writes the peers' buffers
             * themselves, every binding must be there */
            if ((room = block_room(rk, a)) == SIZE_MAX)
                room = hn_reg_room(rt, r, (const void *)a); /* registered across processes */
            if (room == SIZE_MAX && hn_procs(rt) && (v == NULL || !v->reach_none)) {
                const hn_io *io = io_at(p, k);
                hn_sb_printf(diag, "%s: error: binding '%s' on rank %d: %p is no memory of hn_runtime_alloc; in a "
                             "world across processes the other processes reach only that memory, ",
                             p->filename, p->names[io->var], r, (void *)a);
                if (v != NULL && v->reach != NULL)
                    hn_sb_printf(diag, "and they read and write this program's buffers themselves at %s: "
                                 "allocate '%s' with hn_runtime_alloc (Python: Runtime.alloc)%s, or take "
                                 "`via nccl` or `via ll` there (their peers touch only their own memory)\n",
                                 v->reach, p->names[io->var],
                                 rt->dev->share != NULL && rt->dev->share->ipc_export != NULL
                                     ? ", register its memory once in every process (hn_runtime_register; "
                                       "Python: Runtime.register)"
                                     : "");
                else
                    hn_sb_printf(diag, "and every binding must be (allocate '%s' with hn_runtime_alloc; Python: "
                                 "Runtime.alloc)\n", p->names[io->var]);
                goto refuse;
            }
            /* inside a block of hn_runtime_alloc (or a registered allocation): its end bounds what is given */
            if (room < want) {
                say_needed(diag, rt, p, params, k, r, want);
                hn_sb_printf(diag, "%zu given, but the block from hn_runtime_alloc (or the registered "
                             "allocation) it points into ends %zu bytes after it\n", given, room);
                goto refuse;
            }
        }
    }
    hn_free(own);
    return HN_OK;
refuse:
    hn_free(own);
    return HN_ERR_INVALID;
}

/* ---- hn_program_io ---- */

static hn_dtype_code dtype_code(hn_dtype t) { return (hn_dtype_code)t; }

hn_status_t hn_program_io(const hn_program *p, int world, int nstreams, const hn_run_args *args, int rank,
                          hn_io_info *out, int cap, int *n, char **diag)
{
    hn_strbuf sb;
    hn_status_t st = HN_OK;
    int64_t *params = NULL;
    int nio;
    if (diag != NULL)
        *diag = NULL;
    if (p == NULL || n == NULL || cap < 0 || (cap > 0 && out == NULL))
        return HN_ERR_INVALID;
    nio = p->ninputs + p->noutputs;
    hn_sb_init(&sb);
    if (world < 1 || nstreams < 1 || nstreams > HN_MAX_STREAMS || rank < 0 || rank >= world) {
        hn_sb_printf(&sb, "%s: error: no such configuration: world %d, nstreams %d (1 to %d), rank %d\n",
                     p->filename, world, nstreams, HN_MAX_STREAMS, rank);
        st = HN_ERR_INVALID;
    } else if (args != NULL && args->nparams > 0 && (args->param_names == NULL || args->param_values == NULL)) {
        hn_sb_printf(&sb, "%s: error: %d parameter overrides, but no names or values\n", p->filename,
                     args->nparams);
        st = HN_ERR_INVALID;
    } else if ((params = hn_calloc((size_t)p->nparams + 1, sizeof(int64_t))) == NULL) {
        st = HN_ERR_NOMEM;
    } else {
        for (int i = 0; args != NULL && i < args->nparams && st == HN_OK; i++)
            if (args->param_names[i] == NULL) {
                hn_sb_printf(&sb, "%s: error: parameter override %d has no name\n", p->filename, i);
                st = HN_ERR_INVALID;
            }
        if (st == HN_OK)
            st = hn_params_resolve(p, world, nstreams, args != NULL ? args->nparams : 0,
                                   args != NULL ? args->param_names : NULL, args != NULL ? args->param_values : NULL,
                                   params, &sb);
    }
    for (int k = 0; k < nio && st == HN_OK; k++) {
        const hn_io *io = io_at(p, k);
        hn_tensor t;
        if ((st = hn_io_tensor(p, io, params, rank, world, nstreams, 0, &t, &sb)) != HN_OK || k >= cap)
            continue;
        memset(&out[k], 0, sizeof(out[k]));
        out[k].name = p->names[io->var];
        out[k].is_output = k >= p->ninputs;
        out[k].dtype = dtype_code(t.dtype);
        out[k].ndim = t.ndim;
        memcpy(out[k].shape, t.shape, sizeof(int64_t) * (size_t)t.ndim);
        out[k].bytes = hn_tensor_bytes(&t);
        out[k].shard_axis = io->shard_axis;
    }
    hn_free(params);
    if (st == HN_OK)
        *n = nio;
    else if (diag != NULL)
        *diag = hn_sb_take(&sb);
    hn_sb_free(&sb);
    return st;
}
