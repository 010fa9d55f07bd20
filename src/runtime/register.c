/* Caller memory registered across processes (hn_runtime_register): every
 * process hands the others the allocation its rank's pointer lies in (the
 * backend's ipc_export, on the rank's thread), and opens theirs
 * (ipc_open), so that the peer copies reach a tensor torch's caching
 * allocator gave out, which lies at another address in every process. The
 * table (hn_runtime.regs): one entry per (rank, allocation) — the rank's
 * own address of it and where this process reaches it — read by the
 * communicators through hn_reg_peer_addr while they issue, and by the
 * bindings' check (hn_reg_room; both in src/ranks/teams.c). */
#include <stdio.h>
#include <string.h>

#include "issue.h"
#include "procs.h"
#include "register.h"
#include "../ranks/pool.h"
#include "../ranks/run_error.h"
#include "../ranks/teams.h"

/* What each process hands the others in a registration. */
typedef struct reg_msg {
    int32_t ok;
    int32_t pad;
    uint64_t base, bytes;
    unsigned char handle[HN_IPC_HANDLE_BYTES];
    char why[200];
} reg_msg;

typedef struct reg_job {
    int rank; /* on whose thread */
    int op;   /* 0: export p, 1: open handle, 2: close local */
    const void *p;
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
        j->st = sh->ipc_export(ord, j->p, &base, &bytes, j->msg->handle, j->msg->why, sizeof(j->msg->why));
        j->msg->base = (uint64_t)(uintptr_t)base;
        j->msg->bytes = bytes;
    } else if (j->op == 1) {
        j->st = sh->ipc_open(ord, j->msg->handle, &j->local);
    } else {
        sh->ipc_close(ord, j->local);
        j->st = HN_OK;
    }
    return HN_OK;
}

/* Rank q's allocation (base, bytes), reached here at local, into the table;
 * one that overlaps it first goes (that rank freed it and allocated anew),
 * its mapping closed. */
static hn_status_t remember(hn_runtime *rt, int q, uint64_t base, uint64_t bytes, void *local)
{
    for (int i = 0; i < rt->nregs; i++) {
        hn_reg *g = &rt->regs[i];
        if (g->rank == q && g->base < base + bytes && base < g->base + g->bytes) {
            if (q < rt->first || q >= rt->first + rt->nlocal) {
                reg_job j = {rt->first, 2, NULL, NULL, g->local, HN_OK};
                (void)hn_pool_exec(rt, reg_on_rank, &j, 0);
            }
            *g = rt->regs[--rt->nregs];
            i--;
        }
    }
    if (rt->nregs == rt->regs_cap) {
        int cap = rt->regs_cap > 0 ? 2 * rt->regs_cap : 16;
        hn_reg *more = hn_realloc(rt->regs, (size_t)cap * sizeof(*more));
        if (more == NULL)
            return HN_ERR_NOMEM;
        rt->regs = more;
        rt->regs_cap = cap;
    }
    rt->regs[rt->nregs].rank = q;
    rt->regs[rt->nregs].base = (uintptr_t)base;
    rt->regs[rt->nregs].bytes = (size_t)bytes;
    rt->regs[rt->nregs].local = local;
    rt->nregs++;
    return HN_OK;
}

static hn_status_t refuse(hn_runtime *rt, hn_status_t st, const char *fmt, int a, const char *b)
{
    char text[sizeof(rt->err_text)];
    snprintf(text, sizeof(text), fmt, a, b);
    hn_runtime_set_error_text(rt, text);
    return st;
}

hn_status_t hn_runtime_register(hn_runtime *rt, int rank, void *ptr, size_t bytes)
{
    reg_msg mine, *all = NULL;
    reg_job j;
    hn_status_t st, x;
    int32_t opened, *oks = NULL;
    if (rt == NULL)
        return HN_ERR_INVALID;
    if (!hn_runtime_drives(rt, rank) || ptr == NULL || bytes == 0)
        return refuse(rt, HN_ERR_INVALID, "hirnode: error: hn_runtime_register: rank %d%s", rank,
                      hn_runtime_drives(rt, rank) ? ": a NULL pointer or no bytes" : " is not driven here");
    if (!hn_procs(rt))
        return HN_OK; /* in one process every rank's memory is reached as it is */
    if (rt->dev->share->ipc_export == NULL)
        return refuse(rt, HN_ERR_UNSUPPORTED,
                      "hirnode: error: hn_runtime_register: rank %d: the %s backend cannot hand its memory to "
                      "other processes: allocate it with hn_runtime_alloc",
                      rank, rt->dev->name);
    if ((st = hn_runtime_finish_launches(rt)) != HN_OK) /* the table is read while launches issue */
        return st;
    memset(&mine, 0, sizeof(mine));
    j = (reg_job){rank, 0, ptr, &mine, NULL, HN_OK};
    if ((st = hn_pool_exec(rt, reg_on_rank, &j, 0)) == HN_OK && (st = j.st) == HN_OK &&
        (uintptr_t)ptr + bytes > mine.base + mine.bytes)
        snprintf(mine.why, sizeof(mine.why), "%zu bytes at %p run past the end of its allocation (%llu bytes at "
                 "0x%llx)", bytes, ptr, (unsigned long long)mine.bytes, (unsigned long long)mine.base),
            st = HN_ERR_INVALID;
    mine.ok = st == HN_OK;
    if ((all = hn_calloc((size_t)rt->world, sizeof(*all))) == NULL ||
        (oks = hn_calloc((size_t)rt->world, sizeof(*oks))) == NULL) {
        hn_free(all);
        return HN_ERR_NOMEM;
    }
    if ((st = hn_procs_xchg(rt, "hn_runtime_register", &mine, sizeof(mine), all)) != HN_OK)
        goto done;
    /* every process sees the same answers: all refuse together, or all go on */
    for (int q = 0; q < rt->world && st == HN_OK; q++)
        if (!all[q].ok) {
            all[q].why[sizeof(all[q].why) - 1] = '\0';
            st = refuse(rt, HN_ERR_INVALID, "hirnode: error: hn_runtime_register: rank %d: %s", q, all[q].why);
        }
    if (st != HN_OK)
        goto done;
    /* every other rank's allocation opened here, once */
    for (int q = 0; q < rt->world && st == HN_OK; q++) {
        const hn_reg *g = hn_reg_find(rt, q, (uintptr_t)all[q].base);
        if (g != NULL && g->base == all[q].base && g->bytes == all[q].bytes)
            continue;
        if (q == rank) {
            st = remember(rt, q, all[q].base, all[q].bytes, (void *)(uintptr_t)all[q].base);
            continue;
        }
        j = (reg_job){rank, 1, NULL, &all[q], NULL, HN_OK};
        if ((st = hn_pool_exec(rt, reg_on_rank, &j, 0)) == HN_OK && (st = j.st) == HN_OK &&
            (st = remember(rt, q, all[q].base, all[q].bytes, j.local)) != HN_OK) {
            j.op = 2;
            (void)hn_pool_exec(rt, reg_on_rank, &j, 0);
        }
        if (st != HN_OK)
            (void)refuse(rt, st, "hirnode: error: hn_runtime_register: rank %d's allocation cannot be mapped on %s",
                         q, "this rank's device (the log says why)");
    }
    /* and on the outcome of the mappings */
    opened = st == HN_OK;
    x = hn_procs_xchg(rt, "hn_runtime_register: mapped", &opened, sizeof(opened), oks);
    for (int q = 0; x == HN_OK && q < rt->world && st == HN_OK; q++)
        if (!oks[q])
            st = refuse(rt, HN_ERR_DEVICE, "hirnode: error: hn_runtime_register: rank %d could not map %s", q,
                        "the others' allocations (its log says why)");
    if (x != HN_OK && st == HN_OK)
        st = x;
done:
    hn_free(all);
    hn_free(oks);
    return st;
}

void hn_reg_fini(hn_runtime *rt)
{
    for (int i = 0; i < rt->nregs; i++)
        if (rt->regs[i].rank < rt->first || rt->regs[i].rank >= rt->first + rt->nlocal) {
            reg_job j = {rt->first, 2, NULL, NULL, rt->regs[i].local, HN_OK};
            (void)hn_pool_exec(rt, reg_on_rank, &j, 0);
        }
    hn_free(rt->regs);
    rt->regs = NULL;
    rt->nregs = rt->regs_cap = 0;
}
