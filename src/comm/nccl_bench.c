/* The baseline of `hirnode bench collectives`: raw NCCL calls on
 * communicators of their own, one thread per device, timed exactly as the
 * runtime's runs are (host clock around a loop of calls and the stream's
 * completion, the slowest rank counts, median of repetitions). */
#include <nccl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "../core/cuda_check.h"
#include "../core/device_cuda.h"
#include "comm.h"

typedef struct raw_rank {
    const hn_bench_case *c;
    int rank, n;
    ncclComm_t comm;
    cudaStream_t s;
    void *send, *recv;
    size_t send_count, recv_count;
    pthread_barrier_t *barrier;
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

static hn_status_t loop(raw_rank *r, int iters)
{
    for (int i = 0; i < iters; i++) {
        ncclResult_t e = one_call(r);
        if (e != ncclSuccess) {
            HN_ERROR("raw nccl %s: %s", hn_coll_name(r->c->kind), ncclGetErrorString(e));
            return HN_ERR_DEVICE;
        }
    }
    return HN_CUDA_STATUS(cudaStreamSynchronize(r->s));
}

static void *raw_main(void *arg)
{
    raw_rank *r = arg;
    if ((r->st = HN_CUDA_STATUS(cudaSetDevice(r->rank))) != HN_OK)
        return NULL;
    pthread_barrier_wait(r->barrier);
    r->st = loop(r, r->c->warmup);
    for (int k = 0; k < r->c->reps; k++) {
        double t0;
        pthread_barrier_wait(r->barrier);
        t0 = hn_now();
        if (r->st == HN_OK)
            r->st = loop(r, r->c->iters);
        r->times[k] = (hn_now() - t0) / r->c->iters;
    }
    return NULL;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

hn_status_t hn_nccl_raw_bench(int n, const hn_bench_case *c, double *median_s, long *wrong)
{
    ncclComm_t *comms = hn_calloc((size_t)n, sizeof(ncclComm_t));
    raw_rank *rs = hn_calloc((size_t)n, sizeof(raw_rank));
    pthread_t *th = hn_calloc((size_t)n, sizeof(pthread_t));
    double *times = hn_calloc((size_t)(n * c->reps) + 1, sizeof(double)), *worst = NULL;
    int *devs = hn_calloc((size_t)n, sizeof(int));
    size_t es = (size_t)hn_dtype_size(c->dtype);
    pthread_barrier_t barrier;
    hn_status_t st = HN_OK;
    char *host = NULL;
    *wrong = 0;
    if (comms == NULL || rs == NULL || th == NULL || times == NULL || devs == NULL) {
        st = HN_ERR_NOMEM;
        goto done;
    }
    for (int i = 0; i < n; i++)
        devs[i] = i;
    if (ncclCommInitAll(comms, n, devs) != ncclSuccess) {
        HN_ERROR("raw nccl: ncclCommInitAll failed");
        st = HN_ERR_DEVICE;
        goto done;
    }
    pthread_barrier_init(&barrier, NULL, (unsigned)n);
    for (int i = 0; i < n && st == HN_OK; i++) {
        raw_rank *r = &rs[i];
        hn_tensor t;
        struct hn_dstream ds;
        r->c = c;
        r->rank = i;
        r->n = n;
        r->comm = comms[i];
        r->barrier = &barrier;
        r->times = times + (size_t)i * (size_t)c->reps;
        r->send_count = c->kind == HN_COLL_REDUCE_SCATTER ? c->count * (size_t)n : c->count;
        r->recv_count = c->kind == HN_COLL_ALLGATHER ? c->count * (size_t)n : c->count;
        if ((st = HN_CUDA_STATUS(cudaSetDevice(i))) != HN_OK ||
            (st = HN_CUDA_STATUS(cudaStreamCreateWithFlags(&r->s, cudaStreamNonBlocking))) != HN_OK ||
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
    for (int i = 0; i < n && st == HN_OK; i++)
        pthread_create(&th[i], NULL, raw_main, &rs[i]);
    for (int i = 0; i < n && st == HN_OK; i++)
        pthread_join(th[i], NULL);
    for (int i = 0; i < n && st == HN_OK; i++)
        st = rs[i].st;
    if (st == HN_OK) {
        /* the slowest rank of each repetition; the median repetition */
        worst = hn_calloc((size_t)c->reps, sizeof(double));
        for (int k = 0; worst != NULL && k < c->reps; k++)
            for (int i = 0; i < n; i++)
                worst[k] = HN_MAX(worst[k], rs[i].times[k]);
        if (worst != NULL) {
            qsort(worst, (size_t)c->reps, sizeof(double), cmp_double);
            *median_s = worst[c->reps / 2];
        }
        /* rank 0's output: every element up to 64 MiB, a 1/97 sample above */
        host = hn_malloc(rs[0].recv_count * es + 1);
        if (host != NULL && HN_CUDA_STATUS(cudaSetDevice(0)) == HN_OK &&
            HN_CUDA_STATUS(cudaMemcpy(host, rs[0].recv, rs[0].recv_count * es, cudaMemcpyDeviceToHost)) == HN_OK) {
            size_t step = rs[0].recv_count * es > (64u << 20) ? 97 : 1;
            for (size_t e = 0; e < rs[0].recv_count; e += step) {
                double want = c->kind == HN_COLL_ALLGATHER ? (double)(e / c->count + 1) : n * (n + 1) / 2.0;
                *wrong += hn_load(c->dtype, host, (int64_t)e) != want;
            }
        }
    }
    for (int i = 0; i < n; i++) {
        cudaSetDevice(i);
        if (comms[i] != NULL)
            ncclCommDestroy(comms[i]);
        {
            cudaFree(rs[i].send);
            cudaFree(rs[i].recv);
            if (rs[i].s != NULL)
                cudaStreamDestroy(rs[i].s);
        }
    }
    pthread_barrier_destroy(&barrier);
done:
    hn_free(host);
    hn_free(worst);
    hn_free(comms);
    hn_free(rs);
    hn_free(th);
    hn_free(times);
    hn_free(devs);
    return st;
}
