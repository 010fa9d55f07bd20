/* Caller memory registered across processes (hn_runtime_register): every
 * process hands the others the allocation its rank's pointer lies in (the
 * backend's ipc_export, on the rank's thread), and opens theirs
 * (ipc_open), so that the peer copies reach a tensor torch's caching
 * allocator gave out, which lies at another address in every process. The
 * table (hn_runtime.regs): one entry per (rank, allocation) — the rank's
 * own address of it and where this process reaches it — read by the
 * communicators through hn_reg_peer_addr while they issue, and by the
 * bindings' check (hn_reg_room; both in src/ranks/teams.c). */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "config_cache.h"
#include "bind.h"
#include "issue.h"
#include "procs.h"
#include "register.h"
#include "../ranks/pool.h"
#include "../ranks/run_error.h"
#include "../ranks/teams.h"

/* What each process hands the others in a registration. shared: the
 * memory is the runtime's own (a block of hn_runtime_alloc), at the same
 * address in every process already: nothing to open. */
typedef struct reg_msg {
    int32_t ok;
    int32_t shared;
    int32_t status; /* when not ok: what every process returns */
    int32_t pad;
    uint64_t base, bytes;
    unsigned char handle[HN_IPC_HANDLE_BYTES];
    char why[200];
} reg_msg;

typedef struct reg_job {
    int rank; /* on whose thread */
    int op;   /* 0: export p, 1: open handle, 2: close local, 3: the export done */
    const void *p;
    size_t need;       /* export: p's bytes */
    uintptr_t lo, hi;  /* export: what the rank's overlapping registrations covered */
    reg_msg *msg;
    void *local;
    hn_status_t st;
} reg_job;

static hn_status_t reg_on_rank(hn_rank *r, void *arg)
{
    reg_job *j = arg;
    hn_runtime *rt = r->rt;
    const hn_share_ops *sh = rt->dev->share;
    int ord = hn_runtime_device_of(rt, r->rank);
    void *base = NULL;
    size_t bytes = 0;
    if (r->rank != j->rank)
        return HN_OK;
    if (j->op == 0) {
        j->st = sh->ipc_export(ord, j->p, j->need, j->lo, j->hi, &base, &bytes, j->msg->handle, j->msg->why,
                               sizeof(j->msg->why));
        j->msg->base = (uint64_t)(uintptr_t)base;
        j->msg->bytes = bytes;
    } else if (j->op == 1) {
        j->st = sh->ipc_open(ord, j->msg->handle, &j->local);
    } else if (j->op == 3) {
        if (sh->ipc_done != NULL)
            sh->ipc_done(ord, j->msg->handle);
        j->st = HN_OK;
    } else {
        sh->ipc_close(ord, j->local);
        j->st = HN_OK;
    }
    return HN_OK;
}

/* [*lo, *hi): what the rank's registrations that overlap [a, b), and
 * those that overlap them, cover (lo = hi: none). Pieces of one run of
 * cuMem allocations registered one after another (torch's expandable
 * segments: tensors side by side) come to overlap; the backend then
 * exports the union, so that one entry covers them all instead of the
 * last one replacing the others. */
static void cover(const hn_runtime *rt, int rank, uintptr_t a, uintptr_t b, uintptr_t *lo, uintptr_t *hi)
{
    int grew = 1;
    *lo = *hi = 0;
    while (grew) {
        grew = 0;
        for (int i = 0; i < rt->nregs; i++) {
            const hn_reg *g = &rt->regs[i];
            uintptr_t s = *lo != *hi ? HN_MIN(a, *lo) : a, e = *lo != *hi ? HN_MAX(b, *hi) : b;
            if (g->rank != rank || g->opened || g->base >= e || g->base + g->bytes <= s)
                continue;
            if (*lo == *hi || g->base < *lo || g->base + g->bytes > *hi) {
                *lo = *lo != *hi ? HN_MIN(*lo, g->base) : g->base;
                *hi = HN_MAX(*hi, g->base + g->bytes);
                grew = 1;
            }
        }
    }
}

/* What this process's export held open for the others goes (once). */
static void export_done(hn_runtime *rt, int rank, reg_msg *mine, int *exported)
{
    reg_job j = {rank, 3, NULL, 0, 0, 0, mine, NULL, HN_OK};
    if (*exported)
        (void)hn_pool_exec(rt, reg_on_rank, &j, 0);
    *exported = 0;
}

/* st, with the runtime's error text set from fmt */
__attribute__((format(printf, 3, 4))) static hn_status_t refuse(hn_runtime *rt, hn_status_t st, const char *fmt,
                                                                ...)
{
    char text[sizeof(rt->err_text)];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof(text), fmt, ap);
    va_end(ap);
    hn_runtime_set_error_text(rt, text);
    return st;
}

/* Whether the table holds rank q's allocation as msg describes it (the
 * same place, size and handle: nothing to open again). */
static int known(const hn_runtime *rt, int q, const reg_msg *m)
{
    const hn_reg *g = hn_reg_find(rt, q, (uintptr_t)m->base);
    return g != NULL && g->base == m->base && g->bytes == m->bytes && memcmp(g->key, m->handle, HN_IPC_KEY_BYTES) == 0;
}

static void close_mapping(hn_runtime *rt, void *local)
{
    reg_job j = {rt->first, 2, NULL, 0, 0, 0, NULL, local, HN_OK};
    (void)hn_pool_exec(rt, reg_on_rank, &j, 0);
}

/* Rank q's allocation (m), reached here at local (a mapping ipc_open
 * made when `opened`), into the table (room made before); entries of q
 * it overlaps go first (q freed them and allocated anew), their mappings
 * closed. 1 when one went. */
static int commit(hn_runtime *rt, int q, const reg_msg *m, void *local, int opened)
{
    int evicted = 0;
    for (int i = 0; i < rt->nregs; i++) {
        hn_reg *g = &rt->regs[i];
        if (g->rank == q && g->base < m->base + m->bytes && m->base < g->base + g->bytes) {
            if (g->opened)
                close_mapping(rt, g->local);
            *g = rt->regs[--rt->nregs];
            i--;
            evicted = 1;
        }
    }
    rt->regs[rt->nregs].rank = q;
    rt->regs[rt->nregs].base = (uintptr_t)m->base;
    rt->regs[rt->nregs].bytes = (size_t)m->bytes;
    rt->regs[rt->nregs].local = local;
    rt->regs[rt->nregs].opened = opened;
    memcpy(rt->regs[rt->nregs].key, m->handle, HN_IPC_KEY_BYTES);
    rt->nregs++;
    return evicted;
}

/* The table's room for `more` entries. */
static int reserve(hn_runtime *rt, int more)
{
    if (rt->nregs + more > rt->regs_cap) {
        int cap = rt->regs_cap > 0 ? rt->regs_cap : 16;
        hn_reg *bigger;
        while (cap < rt->nregs + more)
            cap *= 2;
        if ((bigger = hn_realloc(rt->regs, (size_t)cap * sizeof(*bigger))) == NULL)
            return 0;
        rt->regs = bigger;
        rt->regs_cap = cap;
    }
    return 1;
}

/* The steps every process takes alike, whatever failed where: the first
 * exchange (every rank's allocation, or why not), the mappings opened
 * here, the second exchange (whether every process opened them); the
 * table changes only when all did, else what was opened is closed. */
hn_status_t hn_runtime_register(hn_runtime *rt, int rank, void *ptr, size_t bytes)
{
    /* small worlds on the stack, so that running out of memory is said in
     * the exchange, not by leaving it */
    reg_msg mine, small[8], *all = NULL;
    void *small_opened[8], **opened = NULL;
    int32_t ok, small_oks[8], *oks = NULL;
    hn_status_t st = HN_OK, x;
    int evicted = 0, heap = 0, exported = 0;
    uintptr_t block_base = 0;
    size_t block_bytes = 0;
    if (rt == NULL)
        return HN_ERR_INVALID;
    if (!hn_procs(rt)) { /* in one process every rank's memory is reached as it is */
        if (!hn_runtime_drives(rt, rank) || ptr == NULL || bytes == 0)
            return refuse(rt, HN_ERR_INVALID, "hirnode: error: hn_runtime_register: rank %d%s", rank,
                          hn_runtime_drives(rt, rank) ? ": a NULL pointer or no bytes" : " is not driven here");
        return HN_OK;
    }
    /* the launches in flight end first, together in every process (the
     * table is read while they issue): their error is every process's */
    if ((st = hn_runtime_finish_launches(rt)) != HN_OK)
        return st;
    /* from here every process exchanges twice, a refusal of its own included */
    memset(&mine, 0, sizeof(mine));
    if (rt->world <= 8) {
        all = small;
        oks = small_oks;
        opened = small_opened;
        memset(small_opened, 0, sizeof(small_opened));
    } else {
        heap = 1;
        all = hn_calloc((size_t)rt->world, sizeof(*all));
        oks = hn_calloc((size_t)rt->world, sizeof(*oks));
        opened = hn_calloc((size_t)rt->world, sizeof(*opened));
        if (all == NULL || oks == NULL || opened == NULL) { /* the others learn it at the deadline */
            st = HN_ERR_NOMEM;
            goto done;
        }
    }
    if (rank != rt->first)
        snprintf(mine.why, sizeof(mine.why), "not the rank this process drives (%d)", rt->first);
    else if (ptr == NULL || bytes == 0)
        snprintf(mine.why, sizeof(mine.why), "a NULL pointer or no bytes");
    else if (hn_bind_block_of(&rt->ranks[0], ptr, &block_base, &block_bytes)) { /* the runtime's own */
        mine.shared = 1;
        mine.base = block_base;
        mine.bytes = block_bytes;
        if (bytes > block_bytes - ((uintptr_t)ptr - block_base))
            snprintf(mine.why, sizeof(mine.why), "%zu bytes at %p run past the end of its block of "
                     "hn_runtime_alloc (%zu bytes at 0x%llx)", bytes, ptr, block_bytes,
                     (unsigned long long)block_base);
    } else if (rt->dev->share->ipc_export == NULL) {
        snprintf(mine.why, sizeof(mine.why), "the %s backend cannot hand its memory to other processes: allocate "
                 "it with hn_runtime_alloc", rt->dev->name);
        mine.status = HN_ERR_UNSUPPORTED;
    } else {
        reg_job j = {rank, 0, ptr, bytes, 0, 0, &mine, NULL, HN_OK};
        cover(rt, rank, (uintptr_t)ptr, (uintptr_t)ptr + bytes, &j.lo, &j.hi);
        if ((st = hn_pool_exec(rt, reg_on_rank, &j, 0)) == HN_OK && (st = j.st) == HN_OK) {
            exported = 1;
            if ((uintptr_t)ptr < mine.base || (uintptr_t)ptr - mine.base > mine.bytes ||
                bytes > mine.bytes - ((uintptr_t)ptr - mine.base))
                snprintf(mine.why, sizeof(mine.why), "%zu bytes at %p run past the end of its allocation (%llu "
                         "bytes at 0x%llx)", bytes, ptr, (unsigned long long)mine.bytes,
                         (unsigned long long)mine.base);
        } else if (mine.why[0] == '\0') {
            snprintf(mine.why, sizeof(mine.why), "its device could not export %p (%s)", ptr, hn_status_string(st));
        }
    }
    mine.ok = mine.why[0] == '\0';
    if ((x = hn_procs_xchg(rt, "hn_runtime_register", &mine, sizeof(mine), all)) != HN_OK) {
        st = x;
        goto done;
    }
    /* every process sees the same answers: all refuse together, or all go on */
    st = HN_OK;
    for (int q = 0; q < rt->world && st == HN_OK; q++)
        if (!all[q].ok) {
            all[q].why[sizeof(all[q].why) - 1] = '\0';
            st = refuse(rt, all[q].status == HN_ERR_UNSUPPORTED ? HN_ERR_UNSUPPORTED : HN_ERR_INVALID,
                        "hirnode: error: hn_runtime_register: rank %d: %s", q, all[q].why);
        }
    if (st != HN_OK)
        goto done;
    /* the others' allocations opened here (not yet in the table) */
    ok = reserve(rt, rt->world);
    for (int q = 0; q < rt->world && ok; q++) {
        reg_job j = {rank, 1, NULL, 0, 0, 0, &all[q], NULL, HN_OK};
        if (q == rank || known(rt, q, &all[q]) || all[q].shared)
            continue;
        if (hn_pool_exec(rt, reg_on_rank, &j, 0) != HN_OK || j.st != HN_OK)
            ok = 0;
        else
            opened[q] = j.local;
    }
    x = hn_procs_xchg(rt, "hn_runtime_register: mapped", &ok, sizeof(ok), oks);
    export_done(rt, rank, &mine, &exported); /* every other process opened it, or gave up */
    for (int q = 0; q < rt->world && x == HN_OK && st == HN_OK; q++)
        if (!oks[q])
            st = refuse(rt, HN_ERR_DEVICE, "hirnode: error: hn_runtime_register: rank %d could not map the others' "
                        "allocations (its log says why)", q);
    if (x != HN_OK)
        st = x;
    for (int q = 0; q < rt->world; q++) {
        if (st != HN_OK) { /* nothing kept */
            if (opened[q] != NULL)
                close_mapping(rt, opened[q]);
            continue;
        }
        if ((q == rank || all[q].shared) && !known(rt, q, &all[q]))
            evicted |= commit(rt, q, &all[q], (void *)(uintptr_t)all[q].base, 0); /* reached as it is */
        else if (opened[q] != NULL)
            evicted |= commit(rt, q, &all[q], opened[q], 1);
    }
    /* a rank's allocation replaced (freed and made anew): what was prepared
     * and captured with the old one goes, in every process alike */
    if (evicted)
        hn_cache_forget(rt, NULL, 0,
                        "hn_runtime_register replaced a registered allocation: graphs captured with the old one "
                        "would reach freed memory");
done:
    export_done(rt, rank, &mine, &exported);
    if (heap) {
        hn_free(all);
        hn_free(oks);
        hn_free(opened);
    }
    return st;
}

void hn_reg_fini(hn_runtime *rt)
{
    for (int i = 0; i < rt->nregs; i++)
        if (rt->regs[i].opened) {
            reg_job j = {rt->first, 2, NULL, 0, 0, 0, NULL, rt->regs[i].local, HN_OK};
            (void)hn_pool_exec(rt, reg_on_rank, &j, 0);
        }
    hn_free(rt->regs);
    rt->regs = NULL;
    rt->nregs = rt->regs_cap = 0;
}
