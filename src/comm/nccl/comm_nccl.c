/* NCCL communicator. One NCCL communicator per (team, member), created on
 * the member's own rank thread with ncclCommInitRankConfig in non-blocking
 * mode (so a failing run can abort them), then warmed up; member 0 makes
 * the team's ncclUniqueId there and hands it to the others through the
 * world's exchange (they may live in other processes). A process touches
 * only the communicators of the members it joined. Collectives are
 * NCCL calls on the current stream; gather, scatter and all_to_all are
 * groups of ncclSend/ncclRecv; point-to-point uses the team of all ranks.
 * Every wait polls with a deadline and gives up when another rank failed. */
#include <nccl.h>
#include <pthread.h>
#include <sched.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "../../device/cuda_check.h"
#include "../../device/device_cuda.h"
#include "../comm_base.h"

typedef struct member {
    ncclComm_t comm; /* made on the member's thread (team_join) */
} member;

struct hn_comm_team {
    hn_comm_team_base base; /* the world, size, id, ranks (comm_base.h) */
    member m[];
};

/* the base's world hands out a team's id; its team 0..n-1 does send/recv */
struct hn_comm_world {
    hn_comm_base base;
    int blocking;
    int max_ctas; /* 0: NCCL's default */
    int aborted;
};

/* what a member's exchanges on a team are about */
enum { XCHG_ID = 1 };

static hn_status_t nccl_fail(ncclResult_t r, const char *what, const char *file, int line)
{
    if (HN_LOG_ERROR <= hn_log_level())
        hn_log_emit(HN_LOG_ERROR, file, line, "%s failed: %s (%s)", what, ncclGetErrorString(r),
                    ncclGetLastError(NULL));
    return r == ncclInvalidArgument || r == ncclInvalidUsage ? HN_ERR_INVALID : HN_ERR_DEVICE;
}

/* A non-blocking call returns ncclInProgress until it is done: poll. */
static hn_status_t settle(ncclComm_t comm, ncclResult_t r, const char *what, const char *file, int line,
                          const hn_fault_sink *sink)
{
    double start = hn_now(), timeout = sink != NULL ? sink->timeout_s : 60.0;
    while (r == ncclInProgress) {
        if (sink != NULL && sink->abort_flag != NULL && __atomic_load_n(sink->abort_flag, __ATOMIC_ACQUIRE))
            return HN_ERR_ABORTED;
        if (hn_now() - start > timeout) {
            HN_ERROR("%s: still in progress after %.0f s", what, timeout);
            return HN_ERR_TIMEOUT;
        }
        sched_yield();
        if (ncclCommGetAsyncError(comm, &r) != ncclSuccess)
            break;
    }
    if (r != ncclSuccess && sink != NULL && sink->abort_flag != NULL &&
        __atomic_load_n(sink->abort_flag, __ATOMIC_ACQUIRE)) {
        /* the run was aborted: its communicators were aborted under this
         * call, and NCCL's words for that ("internal error") name no fault */
        HN_INFO("%s: ended by the run's abort (%s)", what, ncclGetErrorString(r));
        return HN_ERR_ABORTED;
    }
    return r == ncclSuccess ? HN_OK : nccl_fail(r, what, file, line);
}

/* `what` names the NCCL call in messages */
#define HN_NCCL_SETTLE(comm, result, what, sink) settle((comm), (result), (what), __FILE__, __LINE__, (sink))

static hn_status_t nccl_init(const hn_comm_setup *setup, hn_comm_world **out)
{
    hn_status_t st = hn_comm_base_new("nccl", setup, sizeof(hn_comm_world), 0, out);
    if (st == HN_OK) {
        (*out)->blocking = setup->blocking;
        (*out)->max_ctas = setup->nccl_max_ctas;
    }
    return st;
}

static hn_status_t nccl_team_create(hn_comm_world *w, const int *ranks, int n, hn_comm_team **out)
{
    return hn_comm_team_new(&w->base, ranks, n, sizeof(hn_comm_team) + (size_t)n * sizeof(member), out);
}

/* The team's ncclUniqueId into *id, on member me's thread: member 0 asks
 * NCCL for one and every member takes member 0's from one exchange (every
 * member of a team joins at once, on its own thread, teams in one order
 * everywhere: no member waits for one held in an earlier team); the
 * others hand theirs empty. */
static hn_status_t team_id(hn_comm_team *t, int me, ncclUniqueId *id, const hn_origin *o)
{
    ncclUniqueId own, *all = hn_calloc((size_t)t->base.n, sizeof(*all));
    hn_status_t mine = HN_OK, st;
    if (all == NULL) {
        hn_origin_fail(o, HN_ERR_NOMEM, "nccl: out of host memory");
        return HN_ERR_NOMEM;
    }
    memset(&own, 0, sizeof(own));
    if (me == 0) {
        ncclResult_t r = ncclGetUniqueId(&own);
        if (r != ncclSuccess) {
            mine = nccl_fail(r, "ncclGetUniqueId", __FILE__, __LINE__);
            hn_origin_fail(o, mine, "nccl: ncclGetUniqueId failed for a team of %d", t->base.n);
        }
    }
    /* member 0 takes part even when it has no id: the others then fail at once instead of timing out */
    if ((st = hn_comm_team_xchg(&t->base, me, XCHG_ID, "handing out the id of", mine, &own, sizeof(own), all, o)) ==
        HN_OK)
        *id = all[0];
    hn_free(all);
    return st;
}

static hn_status_t nccl_team_join(hn_comm_team *t, int me, const hn_origin *o)
{
    const hn_comm_world *w = t->base.w;
    ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
    ncclUniqueId id;
    ncclResult_t r;
    hn_status_t st;
    if ((st = team_id(t, me, &id, o)) != HN_OK)
        return st;
    cfg.blocking = w->blocking; /* either way ncclCommAbort unblocks a failed run */
    /* inside a pipeline NCCL's kernels take SMs from the GEMM beside them:
     * a cap leaves the GEMM more (HIRNODE_NCCL_MAX_CTAS) */
    if (w->max_ctas > 0) {
        cfg.maxCTAs = w->max_ctas;
        cfg.minCTAs = 1;
    }
    r = ncclCommInitRankConfig(&t->m[me].comm, t->base.n, id, me, &cfg);
    st = HN_NCCL_SETTLE(t->m[me].comm, r, "ncclCommInitRankConfig", w->base.sink);
    if (st != HN_OK)
        hn_origin_fail(o, st, "cannot create the NCCL communicator of a team of %d (member %d)", t->base.n, me);
    return st;
}

static ncclDataType_t nccl_type(hn_dtype t)
{
    switch (t) {
    case HN_F32: return ncclFloat32;
    case HN_BF16: return ncclBfloat16;
    case HN_F16: return ncclFloat16;
    case HN_I32: return ncclInt32;
    default: return ncclInt64;
    }
}

static ncclRedOp_t nccl_op(hn_redop redop)
{
    switch (redop) {
    case HN_RED_PROD: return ncclProd;
    case HN_RED_MAX: return ncclMax;
    case HN_RED_MIN: return ncclMin;
    case HN_RED_AVG: return ncclAvg;
    default: return ncclSum;
    }
}

static hn_status_t nccl_team_warmup(hn_comm_team *t, int me, hn_dstream *s, const hn_origin *o)
{
    /* peers connect lazily: one small allreduce before steady state, on a
     * stream-ordered buffer (no device-wide synchronisation) */
    void *buf = NULL;
    hn_status_t st = HN_CUDA_STATUS(cudaMallocAsync(&buf, 64, s->s));
    if (st == HN_OK)
        st = HN_CUDA_STATUS(cudaMemsetAsync(buf, 0, 64, s->s));
    if (st == HN_OK)
        st = HN_NCCL_SETTLE(t->m[me].comm, ncclAllReduce(buf, buf, 16, ncclFloat32, ncclSum, t->m[me].comm, s->s),
                            "ncclAllReduce (warm-up)", t->base.w->base.sink);
    if (buf != NULL)
        (void)HN_CUDA_STATUS(cudaFreeAsync(buf, s->s));
    if (st != HN_OK && st != HN_ERR_ABORTED)
        hn_origin_fail(o, st, "warm-up of the NCCL communicator of a team of %d failed", t->base.n);
    return st;
}

/* Only the members joined here have a communicator here. */
static void nccl_team_destroy(hn_comm_team *t)
{
    if (t == NULL)
        return;
    for (int i = 0; i < t->base.n; i++)
        if (t->m[i].comm != NULL) {
            if (t->base.w->aborted)
                ncclCommAbort(t->m[i].comm);
            else
                ncclCommDestroy(t->m[i].comm);
        }
    hn_comm_team_free(&t->base);
}

/* gather / scatter / all_to_all as one group of sends and receives */
static ncclResult_t grouped(const hn_coll_args *a, int me, int n, ncclComm_t comm, cudaStream_t s)
{
    size_t es = (size_t)hn_dtype_size(a->dtype), c = a->count;
    ncclDataType_t t = nccl_type(a->dtype);
    ncclResult_t r = ncclGroupStart();
    for (int j = 0; j < n && (r == ncclSuccess || r == ncclInProgress); j++) {
        switch (a->kind) {
        case HN_COLL_GATHER:
            if (me == a->root)
                r = ncclRecv((char *)a->recv + (size_t)j * c * es, c, t, j, comm, s);
            if (j == a->root && (r == ncclSuccess || r == ncclInProgress))
                r = ncclSend(a->send, c, t, j, comm, s);
            break;
        case HN_COLL_SCATTER:
            if (me == a->root)
                r = ncclSend((const char *)a->send + (size_t)j * c * es, c, t, j, comm, s);
            if (j == a->root && (r == ncclSuccess || r == ncclInProgress))
                r = ncclRecv(a->recv, c, t, j, comm, s);
            break;
        default: /* all_to_all */
            r = ncclSend((const char *)a->send + (size_t)j * c * es, c, t, j, comm, s);
            if (r == ncclSuccess || r == ncclInProgress)
                r = ncclRecv((char *)a->recv + (size_t)j * c * es, c, t, j, comm, s);
            break;
        }
    }
    {
        ncclResult_t e = ncclGroupEnd();
        return r == ncclSuccess || r == ncclInProgress ? e : r;
    }
}

/* A team of one: every collective is a copy of the member's own data (or
 * nothing, in place). NCCL is not called: since 2.27.3 a non-blocking
 * single-rank communicator leaks its group job (~160 bytes) on every call,
 * and a copy is cheaper anyway. Capturable like any copy. */
static hn_status_t solo_copy(void *dst, const void *src, size_t bytes, hn_dstream *s, const hn_origin *o,
                             const char *what)
{
    hn_status_t st;
    if (dst == src || bytes == 0)
        return HN_OK;
    st = HN_CUDA_STATUS(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, s->s));
    if (st != HN_OK)
        hn_origin_fail(o, st, "nccl %s of one rank: the copy failed", what);
    return st;
}

static hn_status_t nccl_collective(hn_comm_team *t, int me, const hn_coll_args *a, hn_dstream *s,
                                   const hn_origin *o)
{
    ncclComm_t comm = t->m[me].comm;
    ncclDataType_t dt = nccl_type(a->dtype);
    ncclResult_t r;
    hn_status_t st;
    if (a->redop == HN_RED_AVG && !(a->dtype == HN_F32 || a->dtype == HN_BF16 || a->dtype == HN_F16) &&
        (a->kind == HN_COLL_ALLREDUCE || a->kind == HN_COLL_REDUCE || a->kind == HN_COLL_REDUCE_SCATTER)) {
        hn_origin_fail(o, HN_ERR_UNSUPPORTED, "the nccl communicator averages floating types only");
        return HN_ERR_UNSUPPORTED;
    }
    if (t->base.n == 1)
        return solo_copy(a->recv, a->send, a->count * (size_t)hn_dtype_size(a->dtype), s, o, hn_coll_name(a->kind));
    switch (a->kind) {
    case HN_COLL_ALLGATHER: r = ncclAllGather(a->send, a->recv, a->count, dt, comm, s->s); break;
    case HN_COLL_ALLREDUCE: r = ncclAllReduce(a->send, a->recv, a->count, dt, nccl_op(a->redop), comm, s->s); break;
    case HN_COLL_REDUCE_SCATTER:
        r = ncclReduceScatter(a->send, a->recv, a->count, dt, nccl_op(a->redop), comm, s->s);
        break;
    case HN_COLL_BROADCAST: r = ncclBroadcast(a->send, a->recv, a->count, dt, a->root, comm, s->s); break;
    case HN_COLL_REDUCE:
        r = ncclReduce(a->send, a->recv, a->count, dt, nccl_op(a->redop), a->root, comm, s->s);
        break;
    default: r = grouped(a, me, t->base.n, comm, s->s); break;
    }
    st = HN_NCCL_SETTLE(comm, r, hn_coll_name(a->kind), t->base.w->base.sink);
    if (st != HN_OK && st != HN_ERR_ABORTED)
        hn_origin_fail(o, st, "nccl %s: %s", hn_coll_name(a->kind), hn_status_string(st));
    return st;
}

static hn_status_t nccl_p2p(hn_comm_world *w, int rank, const hn_p2p_op *ops, int n, hn_dstream *s,
                            const hn_origin *o)
{
    ncclComm_t comm;
    ncclResult_t r;
    hn_status_t st;
    if (w->base.teams.all == NULL) {
        hn_origin_fail(o, HN_ERR_RUNTIME, "no communicator of all ranks for send/recv");
        return HN_ERR_RUNTIME;
    }
    if (w->base.nranks == 1) { /* sends to oneself: the k-th send feeds the k-th receive */
        int recv = 0;
        for (int i = 0; i < n; i++) {
            if (!ops[i].is_send)
                continue;
            while (recv < n && ops[recv].is_send)
                recv++;
            if (recv == n || ops[recv].bytes != ops[i].bytes) {
                hn_origin_fail(o, HN_ERR_MISMATCH, "nccl send/recv of one rank: a send without its receive");
                return HN_ERR_MISMATCH;
            }
            if ((st = solo_copy(ops[recv].buf, ops[i].buf, ops[i].bytes, s, o, "send/recv")) != HN_OK)
                return st;
            recv++;
        }
        return HN_OK;
    }
    comm = ((hn_comm_team *)w->base.teams.all)->m[rank].comm;
    /* one group: NCCL orders the posting, no order of them deadlocks */
    r = ncclGroupStart();
    for (int i = 0; i < n && (r == ncclSuccess || r == ncclInProgress); i++)
        r = ops[i].is_send ? ncclSend(ops[i].buf, ops[i].bytes, ncclInt8, ops[i].peer, comm, s->s)
                           : ncclRecv(ops[i].buf, ops[i].bytes, ncclInt8, ops[i].peer, comm, s->s);
    {
        ncclResult_t e = ncclGroupEnd();
        if (r == ncclSuccess || r == ncclInProgress)
            r = e;
    }
    st = HN_NCCL_SETTLE(comm, r, "ncclSend/ncclRecv group", w->base.sink);
    if (st != HN_OK && st != HN_ERR_ABORTED)
        hn_origin_fail(o, st, "nccl send/recv: %s", hn_status_string(st));
    return st;
}

#define ABORT_JOIN_S 2

static void *abort_main(void *arg)
{
    ncclCommAbort(*(ncclComm_t *)arg);
    return NULL;
}

static int nccl_abort(hn_comm_world *w)
{
    /* NCCL kernels of a failed run may spin forever: abort every
     * communicator of this process (another process aborts its own once
     * it sees the world's abort word), all at once, one thread each. NCCL wants every rank of
     * a node aborted together: one after another,
     * the first abort may free memory that a peer's kernel, not yet
     * aborted, still reads. The runtime then destroys the teams and makes
     * new ones. */
    int total = 0, k = 0, left = 0;
    ncclComm_t *all;
    pthread_t *th;
    w->aborted = 1;
    for (int i = 0; i < w->base.teams.n; i++)
        total += ((hn_comm_team *)w->base.teams.teams[i])->base.n;
    all = hn_calloc((size_t)total + 1, sizeof(*all));
    th = hn_calloc((size_t)total + 1, sizeof(*th));
    for (int i = 0; i < w->base.teams.n; i++) {
        hn_comm_team *t = w->base.teams.teams[i];
        for (int m = 0; m < t->base.n; m++)
            if (t->m[m].comm != NULL) {
                if (all != NULL)
                    all[k++] = t->m[m].comm;
                else /* no memory for threads: one after another */
                    ncclCommAbort(t->m[m].comm);
                t->m[m].comm = NULL;
            }
    }
    if (all != NULL) {
        int started = 0;
        for (int i = 0; i < k; i++) {
            if (th == NULL || pthread_create(&th[i], NULL, abort_main, &all[i]) != 0)
                break;
            started++;
        }
        for (int i = started; i < k; i++) /* threads could not start: here */
            ncclCommAbort(all[i]);
        /* An abort can block (seen: a communicator that CUDA graphs still
         * hold, with their kernels spinning): together they get
         * ABORT_JOIN_S, then a thread still in one is left to finish on its
         * own, with `all` (which it reads), and the runtime is lost. */
        struct timespec until;
        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_sec += ABORT_JOIN_S;
        for (int i = 0; i < started; i++)
            if (pthread_timedjoin_np(th[i], NULL, &until) != 0) {
                pthread_detach(th[i]);
                left++;
            }
    }
    hn_free(th);
    if (left == 0)
        hn_free(all);
    if (left > 0) {
        HN_WARN("nccl: %d communicator abort%s did not return within %d s (left to finish on %s own thread%s)",
                left, left == 1 ? "" : "s", ABORT_JOIN_S, left == 1 ? "its" : "their", left == 1 ? "" : "s");
        return HN_COMM_DEAD | HN_COMM_STUCK;
    }
    return HN_COMM_DEAD;
}

static void nccl_reset(hn_comm_world *w)
{
    if (w->base.teams.n == 0)
        w->aborted = 0;
}

const hn_comm_ops hn_comm_nccl = {
    .name = "nccl",
    .ranks_per_device = 1,
    .init = nccl_init,
    .fini = hn_comm_base_fini,
    .team_create = nccl_team_create,
    .team_join = nccl_team_join,
    .team_warmup = nccl_team_warmup,
    .team_destroy = nccl_team_destroy,
    .collective = nccl_collective,
    .p2p = nccl_p2p,
    .abort = nccl_abort,
    .reset = nccl_reset,
};
