/* The baseline of `hirnode bench collectives`: raw NCCL calls on
 * communicators of their own, one thread per device, timed exactly as the
 * runtime's runs are (the slowest rank counts, median of repetitions):
 * CUDA events around a loop of calls (device time), or the host clock
 * around the loop and the stream's completion; with --graph, the loop
 * captured once in a CUDA graph per rank and each repetition one launch of
 * it, as the runtime's side replays its own. And NCCL's version, for the
 * machine profile. */
#include <nccl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../device/cuda_check.h"
#include "../../device/device_cuda.h"
#include "../comm.h"

/* A spinning barrier: every rank leaves it within a microsecond, so the
 * baseline's calls start together (a sleeping barrier releases its threads
 * one wake-up apart). */
typedef struct spin_barrier {
    int n;
    int count;
    int sense;
} spin_barrier;

static void spin_wait(spin_barrier *b)
{
    int sense = __atomic_load_n(&b->sense, __ATOMIC_ACQUIRE);
    if (__atomic_add_fetch(&b->count, 1, __ATOMIC_ACQ_REL) == b->n) {
        __atomic_store_n(&b->count, 0, __ATOMIC_RELAXED);
        __atomic_store_n(&b->sense, !sense, __ATOMIC_RELEASE);
    } else {
        while (__atomic_load_n(&b->sense, __ATOMIC_ACQUIRE) == sense)
            ;
    }
}

typedef struct raw_rank {
    const hn_bench_case *c;
    int rank, n;
    ncclComm_t comm;
    cudaStream_t s;
    cudaGraphExec_t graph; /* `graph_calls` calls captured, or NULL */
    int graph_calls;
    cudaEvent_t mark[2]; /* device timing: around the loop */
    void *send, *recv;
    size_t send_count, recv_count;
    spin_barrier *barrier;
    double *times; /* [reps] */
    hn_status_t st;
} raw_rank;

static ncclDataType_t type_of(hn_dtype t)
{
    return t == HN_BF16 ? ncclBfloat16 : t == HN_F16 ? ncclFloat16 : t == HN_I32 ? ncclInt32 : ncclFloat32;
}

static ncclResult_t one_call(raw_rank *r)
{
    ncclDataType_t t = type_of(r->c->dtype);
    switch (r->c->kind) {
    case HN_COLL_ALLGATHER: return ncclAllGather(r->send, r->recv, r->send_count, t, r->comm, r->s);
    case HN_COLL_REDUCE_SCATTER:
        return ncclReduceScatter(r->send, r->recv, r->recv_count, t, ncclSum, r->comm, r->s);
    default: return ncclAllReduce(r->send, r->recv, r->send_count, t, ncclSum, r->comm, r->s);
    }
}

static hn_status_t calls(raw_rank *r, int iters)
{
    for (int i = 0; i < iters; i++) {
        ncclResult_t e = one_call(r);
        if (e != ncclSuccess) {
            HN_ERROR("raw nccl %s: %s", hn_coll_name(r->c->kind), ncclGetErrorString(e));
            return HN_ERR_DEVICE;
        }
    }
    return HN_OK;
}

/* `iters` calls back to back (one launch of their graph, when captured),
 * then the stream's completion; with device timing, the events' time
 * around the calls into *device_s. */
static hn_status_t loop(raw_rank *r, int iters, double *device_s)
{
    hn_status_t st = HN_OK;
    float ms = 0;
    if (r->c->device_timing && (st = HN_CUDA_STATUS(cudaEventRecord(r->mark[0], r->s))) != HN_OK)
        return st;
    if (r->graph != NULL && iters == r->graph_calls)
        st = HN_CUDA_STATUS(cudaGraphLaunch(r->graph, r->s));
    else
        st = calls(r, iters);
    if (st != HN_OK)
        return st;
    if (r->c->device_timing && (st = HN_CUDA_STATUS(cudaEventRecord(r->mark[1], r->s))) != HN_OK)
        return st;
    if ((st = HN_CUDA_STATUS(cudaStreamSynchronize(r->s))) != HN_OK)
        return st;
    if (r->c->device_timing && (st = HN_CUDA_STATUS(cudaEventElapsedTime(&ms, r->mark[0], r->mark[1]))) == HN_OK)
        *device_s = ms * 1e-3;
    return st;
}

struct hn_nccl_raw {
    int n;
    hn_bench_case c;
    ncclComm_t *comms;
    raw_rank *rs;
    spin_barrier barrier;
};

/* One repetition on one rank's thread: barrier, `iters` calls, completion. */
static void *raw_rep(void *arg)
{
    raw_rank *r = arg;
    double t0;
    if ((r->st = HN_CUDA_STATUS(cudaSetDevice(r->rank))) != HN_OK)
        return NULL;
    double device_s = 0;
    spin_wait(r->barrier);
    t0 = hn_now();
    r->st = loop(r, r->c->iters, &device_s);
    r->times[0] = (r->c->device_timing ? device_s : hn_now() - t0) / r->c->iters;
    return NULL;
}

hn_status_t hn_nccl_raw_rep(hn_nccl_raw *h, int iters, double *seconds)
{
    pthread_t th[256];
    hn_status_t st = HN_OK;
    double worst = 0;
    h->c.iters = iters;
    for (int i = 0; i < h->n; i++)
        pthread_create(&th[i], NULL, raw_rep, &h->rs[i]);
    for (int i = 0; i < h->n; i++)
        pthread_join(th[i], NULL);
    for (int i = 0; i < h->n; i++) {
        if (h->rs[i].st != HN_OK)
            st = h->rs[i].st;
        worst = HN_MAX(worst, h->rs[i].times[0]);
    }
    *seconds = worst; /* the slowest rank, per call */
    return st;
}

/* On one rank's thread: its `iters` calls captured into a graph (the
 * threads capture at once: NCCL's calls are issued together). */
static void *raw_capture(void *arg)
{
    raw_rank *r = arg;
    cudaGraph_t g = NULL;
    hn_status_t end;
    if ((r->st = HN_CUDA_STATUS(cudaSetDevice(r->rank))) != HN_OK)
        return NULL;
    spin_wait(r->barrier);
    if ((r->st = HN_CUDA_STATUS(cudaStreamBeginCapture(r->s, cudaStreamCaptureModeThreadLocal))) != HN_OK)
        return NULL;
    r->st = calls(r, r->c->iters);
    end = HN_CUDA_STATUS(cudaStreamEndCapture(r->s, &g));
    if (r->st == HN_OK)
        r->st = end;
    if (r->st == HN_OK)
        r->st = HN_CUDA_STATUS(cudaGraphInstantiate(&r->graph, g, 0));
    if (g != NULL)
        cudaGraphDestroy(g);
    if (r->st == HN_OK)
        r->graph_calls = r->c->iters;
    return NULL;
}

hn_status_t hn_nccl_raw_capture(hn_nccl_raw *h, int iters)
{
    pthread_t th[256];
    hn_status_t st = HN_OK;
    h->c.iters = iters;
    for (int i = 0; i < h->n; i++)
        pthread_create(&th[i], NULL, raw_capture, &h->rs[i]);
    for (int i = 0; i < h->n; i++)
        pthread_join(th[i], NULL);
    for (int i = 0; i < h->n; i++)
        if (h->rs[i].st != HN_OK)
            st = h->rs[i].st;
    return st;
}

hn_status_t hn_nccl_raw_open(int n, const hn_bench_case *c, hn_nccl_raw **out)
{
    hn_nccl_raw *h = hn_calloc(1, sizeof(*h));
    int devs[256];
    size_t es = (size_t)hn_dtype_size(c->dtype);
    hn_status_t st = HN_OK;
    if (h == NULL || n > 256)
        return HN_ERR_NOMEM;
    h->n = n;
    h->c = *c;
    h->comms = hn_calloc((size_t)n, sizeof(ncclComm_t));
    h->rs = hn_calloc((size_t)n, sizeof(raw_rank));
    if (h->comms == NULL || h->rs == NULL) {
        st = HN_ERR_NOMEM;
        goto fail;
    }
    for (int i = 0; i < n; i++)
        devs[i] = i;
    if (ncclCommInitAll(h->comms, n, devs) != ncclSuccess) {
        HN_ERROR("raw nccl: ncclCommInitAll failed");
        st = HN_ERR_DEVICE;
        goto fail;
    }
    h->barrier.n = n;
    for (int i = 0; i < n && st == HN_OK; i++) {
        raw_rank *r = &h->rs[i];
        hn_tensor t;
        struct hn_dstream ds;
        r->c = &h->c;
        r->rank = i;
        r->n = n;
        r->comm = h->comms[i];
        r->barrier = &h->barrier;
        r->times = hn_calloc(1, sizeof(double));
        r->send_count = c->kind == HN_COLL_REDUCE_SCATTER ? c->count * (size_t)n : c->count;
        r->recv_count = c->kind == HN_COLL_ALLGATHER ? c->count * (size_t)n : c->count;
        if (r->times == NULL) {
            st = HN_ERR_NOMEM;
            break;
        }
        if ((st = HN_CUDA_STATUS(cudaSetDevice(i))) != HN_OK ||
            (st = HN_CUDA_STATUS(cudaStreamCreateWithFlags(&r->s, cudaStreamNonBlocking))) != HN_OK ||
            (st = HN_CUDA_STATUS(cudaEventCreate(&r->mark[0]))) != HN_OK ||
            (st = HN_CUDA_STATUS(cudaEventCreate(&r->mark[1]))) != HN_OK ||
            (st = HN_CUDA_STATUS(cudaMalloc(&r->send, r->send_count * es))) != HN_OK ||
            (st = HN_CUDA_STATUS(cudaMalloc(&r->recv, r->recv_count * es))) != HN_OK)
            break;
        /* every element of rank i's input is i + 1: results are exact */
        memset(&t, 0, sizeof(t));
        t.data = r->send;
        t.dtype = c->dtype;
        t.ndim = 1;
        t.shape[0] = (int64_t)r->send_count;
        t.stride[0] = 1;
        ds.s = r->s;
        ds.dev = i;
        ds.ctx = NULL;
        if ((st = hn_compute_cuda.fill(&ds, &t, i + 1, NULL)) == HN_OK)
            st = HN_CUDA_STATUS(cudaStreamSynchronize(r->s));
    }
    if (st != HN_OK)
        goto fail;
    *out = h;
    return HN_OK;
fail:
    hn_nccl_raw_close(h, NULL);
    return st;
}

void hn_nccl_raw_close(hn_nccl_raw *h, long *wrong)
{
    size_t es;
    if (h == NULL)
        return;
    es = (size_t)hn_dtype_size(h->c.dtype);
    if (wrong != NULL && h->rs != NULL) {
        /* rank 0's output: every element up to 64 MiB, a 1/97 sample above */
        raw_rank *r = &h->rs[0];
        char *host = hn_malloc(r->recv_count * es + 1);
        *wrong = -1;
        if (host != NULL && HN_CUDA_STATUS(cudaSetDevice(0)) == HN_OK &&
            HN_CUDA_STATUS(cudaMemcpy(host, r->recv, r->recv_count * es, cudaMemcpyDeviceToHost)) == HN_OK) {
            size_t step = r->recv_count * es > (64u << 20) ? 97 : 1;
            int n = h->n;
            *wrong = 0;
            for (size_t e = 0; e < r->recv_count; e += step) {
                double want = h->c.kind == HN_COLL_ALLGATHER ? (double)(e / h->c.count + 1) : n * (n + 1) / 2.0;
                *wrong += hn_load(h->c.dtype, host, (int64_t)e) != want;
            }
        }
        hn_free(host);
    }
    /* every rank's graph before any communicator: a graph that captured
     * NCCL calls holds a reference on its communicator, and
     * ncclCommDestroy waits until every such reference is given back
     * (destroying the communicators first waited forever) */
    for (int i = 0; i < h->n && h->rs != NULL; i++)
        if (h->rs[i].graph != NULL) {
            cudaSetDevice(i);
            cudaGraphExecDestroy(h->rs[i].graph);
            h->rs[i].graph = NULL;
        }
    for (int i = 0; i < h->n; i++) {
        cudaSetDevice(i);
        if (h->comms != NULL && h->comms[i] != NULL)
            ncclCommDestroy(h->comms[i]);
        if (h->rs != NULL) {
            cudaFree(h->rs[i].send);
            cudaFree(h->rs[i].recv);
            if (h->rs[i].s != NULL)
                cudaStreamDestroy(h->rs[i].s);
            for (int k = 0; k < 2; k++)
                if (h->rs[i].mark[k] != NULL)
                    cudaEventDestroy(h->rs[i].mark[k]);
            hn_free(h->rs[i].times);
        }
    }
    hn_free(h->comms);
    hn_free(h->rs);
    hn_free(h);
}

void hn_nccl_version(char *buf, size_t n)
{
    int v = 0;
    if (ncclGetVersion(&v) != ncclSuccess || v <= 0) {
        snprintf(buf, n, "-");
        return;
    }
    /* NCCL_VERSION_CODE: major * 10000 + minor * 100 + patch since 2.9 */
    snprintf(buf, n, "%d.%d.%d", v / 10000, v / 100 % 100, v % 100);
}
