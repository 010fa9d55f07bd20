/* Tests of src/runtime/bind.c on the cuda backend: memory the runtime did not
 * allocate — cudaMalloc on each rank's device, a cudaMallocAsync pool —
 * bound, run, launched on the caller's cudaStream_t, captured, replayed and
 * rebound, each result checked; ranks mapped to device ordinals; two ranks
 * on one device refused for NCCL and run through the p2p rings.
 * Registered only when a GPU is present. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hirnode/runtime.h"
#include "../test.h"

#ifdef HN_HAVE_CUDA
#include <cuda_runtime.h>

static const char *text = "param N = 4096\n"
                          "input  A : f32[N] replicated\n"
                          "output Y : f32[N] replicated\n"
                          "copy Y <- A\n"
                          "scale Y <- Y, 0.5\n"
                          "allreduce Y <- Y op sum %s\n";
enum { N = 4096 };

static int gpus(void)
{
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) {
        (void)cudaGetLastError();
        return 0;
    }
    return n;
}

static hn_runtime *runtime(int n, const int *devices, char **diag)
{
    hn_runtime_config cfg;
    hn_runtime *rt = NULL;
    hn_runtime_config_default(&cfg);
    cfg.ndev = n;
    cfg.backend = "cuda";
    cfg.devices = devices;
    cfg.timeout_s = 60;
    return hn_runtime_create_ex(&cfg, &rt, diag) == HN_OK ? rt : NULL;
}

static hn_program *program(const char *via)
{
    char t[512];
    snprintf(t, sizeof(t), text, via);
    return hn_test_parse(t, NULL);
}

/* One set of buffers: A and Y on every rank, external memory */
typedef struct xset {
    int n, pooled;
    void *a[8], *y[8];
    size_t bytes[8];
    hn_binding bind[2];
    hn_run_args args;
} xset;

/* cudaMalloc on the rank's device, or cudaMallocAsync from its default
 * pool on stream streams[r] (ordered before what that stream runs next) */
static void xset_make(hn_runtime *rt, xset *s, int n, int pooled, cudaStream_t *streams, int salt)
{
    float host[N], nan_host[N];
    memset(s, 0, sizeof(*s));
    s->n = n;
    s->pooled = pooled;
    for (int r = 0; r < n; r++) {
        int dev = -1;
        struct cudaPointerAttributes at;
        CU_ASSERT_EQUAL_FATAL(cudaSetDevice(hn_runtime_device(rt, r)), cudaSuccess);
        if (pooled) {
            CU_ASSERT_EQUAL_FATAL(cudaMallocAsync(&s->a[r], N * sizeof(float), streams[r]), cudaSuccess);
            CU_ASSERT_EQUAL_FATAL(cudaMallocAsync(&s->y[r], N * sizeof(float), streams[r]), cudaSuccess);
            CU_ASSERT_EQUAL_FATAL(cudaStreamSynchronize(streams[r]), cudaSuccess);
        } else {
            CU_ASSERT_EQUAL_FATAL(cudaMalloc(&s->a[r], N * sizeof(float)), cudaSuccess);
            CU_ASSERT_EQUAL_FATAL(cudaMalloc(&s->y[r], N * sizeof(float)), cudaSuccess);
        }
        CU_ASSERT_EQUAL(cudaPointerGetAttributes(&at, s->a[r]), cudaSuccess);
        dev = at.device;
        CU_ASSERT_EQUAL(dev, hn_runtime_device(rt, r));
        s->bytes[r] = N * sizeof(float);
        for (int i = 0; i < N; i++) {
            host[i] = (float)((i * 13 + r * 7 + salt) % 97) - 48.0f;
            nan_host[i] = NAN;
        }
        CU_ASSERT_EQUAL(hn_runtime_upload(rt, r, s->a[r], host, sizeof(host)), HN_OK);
        CU_ASSERT_EQUAL(hn_runtime_upload(rt, r, s->y[r], nan_host, sizeof(nan_host)), HN_OK);
    }
    s->bind[0] = (hn_binding){"A", s->a, s->bytes};
    s->bind[1] = (hn_binding){"Y", s->y, s->bytes};
    s->args = (hn_run_args){0, NULL, NULL, 2, s->bind};
}

static void xset_free(hn_runtime *rt, xset *s, cudaStream_t *streams)
{
    for (int r = 0; r < s->n; r++) {
        (void)cudaSetDevice(hn_runtime_device(rt, r));
        if (s->pooled) {
            (void)cudaFreeAsync(s->a[r], streams[r]);
            (void)cudaFreeAsync(s->y[r], streams[r]);
            (void)cudaStreamSynchronize(streams[r]);
        } else {
            (void)cudaFree(s->a[r]);
            (void)cudaFree(s->y[r]);
        }
    }
}

/* Y on every rank is the sum over ranks of A / 2 (salt as made) */
static int xset_right(hn_runtime *rt, const xset *s, int salt)
{
    int right = 1;
    for (int r = 0; r < s->n; r++) {
        float y[N];
        CU_ASSERT_EQUAL(hn_runtime_download(rt, r, y, s->y[r], sizeof(y)), HN_OK);
        for (int i = 0; i < N; i++) {
            float want = 0;
            for (int q = 0; q < s->n; q++)
                want += ((float)((i * 13 + q * 7 + salt) % 97) - 48.0f) * 0.5f;
            right &= y[i] == want;
        }
    }
    return right;
}

static void streams_make(hn_runtime *rt, int n, cudaStream_t *s)
{
    for (int r = 0; r < n; r++) {
        CU_ASSERT_EQUAL_FATAL(cudaSetDevice(hn_runtime_device(rt, r)), cudaSuccess);
        CU_ASSERT_EQUAL_FATAL(cudaStreamCreateWithFlags(&s[r], cudaStreamNonBlocking), cudaSuccess);
    }
}

static void streams_free(hn_runtime *rt, int n, cudaStream_t *s)
{
    for (int r = 0; r < n; r++) {
        (void)cudaSetDevice(hn_runtime_device(rt, r));
        (void)cudaStreamDestroy(s[r]);
    }
}

/* cudaMalloc (pooled = 0) or cudaMallocAsync (1) memory through every call */
static void external(int pooled)
{
    int n = gpus() < 4 ? gpus() : 4;
    hn_program *p = program("");
    hn_runtime *rt = runtime(n, NULL, NULL);
    cudaStream_t streams[8];
    xset s[2];
    hn_graph *g = NULL;
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    CU_ASSERT_PTR_NOT_NULL_FATAL(rt);
    streams_make(rt, n, streams);
    xset_make(rt, &s[0], n, pooled, streams, 1);
    xset_make(rt, &s[1], n, pooled, streams, 2);
    CU_ASSERT_EQUAL(hn_runtime_run(rt, p, &s[0].args), HN_OK);
    CU_ASSERT(xset_right(rt, &s[0], 1));
    CU_ASSERT_EQUAL(hn_runtime_launch(rt, p, &s[1].args, (void *const *)streams), HN_OK);
    CU_ASSERT_EQUAL(hn_runtime_sync(rt), HN_OK);
    CU_ASSERT(xset_right(rt, &s[1], 2));
    xset_free(rt, &s[0], streams);
    xset_make(rt, &s[0], n, pooled, streams, 3);
    CU_ASSERT_EQUAL_FATAL(hn_runtime_capture(rt, p, &s[0].args, (void *const *)streams, &g), HN_OK);
    CU_ASSERT_EQUAL(hn_runtime_replay(rt, g, (void *const *)streams), HN_OK);
    CU_ASSERT_EQUAL(hn_runtime_sync(rt), HN_OK);
    CU_ASSERT(xset_right(rt, &s[0], 3));
    xset_free(rt, &s[1], streams);
    xset_make(rt, &s[1], n, pooled, streams, 4);
    CU_ASSERT_EQUAL(hn_runtime_graph_rebind(rt, g, &s[1].args), HN_OK);
    if (hn_runtime_error(rt)[0] != '\0')
        fprintf(stderr, "rebind: %s\n", hn_runtime_error(rt));
    CU_ASSERT_EQUAL(hn_runtime_replay(rt, g, (void *const *)streams), HN_OK);
    CU_ASSERT_EQUAL(hn_runtime_sync(rt), HN_OK);
    CU_ASSERT(xset_right(rt, &s[1], 4));
    /* a buffer one element short is refused; the graph replays on */
    s[0].bytes[n - 1] -= sizeof(float);
    CU_ASSERT_EQUAL(hn_runtime_graph_rebind(rt, g, &s[0].args), HN_ERR_INVALID);
    CU_ASSERT_PTR_NOT_NULL(strstr(hn_runtime_error(rt), "bytes needed (f32[4096]), 16380 given"));
    CU_ASSERT_EQUAL(hn_runtime_replay(rt, g, NULL), HN_OK);
    CU_ASSERT_EQUAL(hn_runtime_sync(rt), HN_OK);
    hn_runtime_graph_destroy(rt, g);
    xset_free(rt, &s[0], streams);
    xset_free(rt, &s[1], streams);
    streams_free(rt, n, streams);
    hn_runtime_forget(rt, p);
    hn_runtime_destroy(rt);
    hn_program_destroy(p);
}

/* Y poisoned on every rank */
static void xset_poison(hn_runtime *rt, const xset *s)
{
    float nan_host[N];
    for (int i = 0; i < N; i++)
        nan_host[i] = NAN;
    for (int r = 0; r < s->n; r++)
        CU_ASSERT_EQUAL(hn_runtime_upload(rt, r, s->y[r], nan_host, sizeof(nan_host)), HN_OK);
}

/* Rebinds in place through every communicator: the first rebind captures
 * again and learns; the later ones move the pointers in the kernels' and
 * copies' parameters (the latency path's kernel, NCCL's argument buffer,
 * the peer copies), each replay right on the buffers bound; a move to pool
 * memory (another kind) captures again, and so does the move back (ll and
 * nccl). */
static void test_rebind_in_place(void)
{
    const char *vias[] = {"via p2p", "via ll", "via nccl"};
    const int order[] = {1, 2, 1, 0, 2}, salt[] = {5, 6, 7};
    int n = gpus() < 4 ? gpus() : 4;
    for (int v = 0; v < 3 && n >= 2; v++) {
        hn_program *p = program(vias[v]);
        hn_runtime *rt = runtime(n, NULL, NULL);
        xset s[3];
        hn_graph *g = NULL;
        CU_ASSERT_PTR_NOT_NULL_FATAL(p);
        CU_ASSERT_PTR_NOT_NULL_FATAL(rt);
        for (int k = 0; k < 3; k++)
            xset_make(rt, &s[k], n, 0, NULL, salt[k]);
        CU_ASSERT_EQUAL_FATAL(hn_runtime_capture(rt, p, &s[0].args, NULL, &g), HN_OK);
        for (int step = 0; step < (int)(sizeof(order) / sizeof(order[0])); step++) {
            const int k = order[step];
            xset_poison(rt, &s[k]);
            CU_ASSERT_EQUAL_FATAL(hn_runtime_graph_rebind(rt, g, &s[k].args), HN_OK);
            if (hn_runtime_graph_in_place(g) != (step > 0))
                fprintf(stderr, "%s, rebind %d: %s\n", vias[v], step, step > 0 ? "captured again" : "in place");
            CU_ASSERT_EQUAL(hn_runtime_graph_in_place(g), step > 0);
            for (int i = 0; i < 3; i++)
                CU_ASSERT_EQUAL(hn_runtime_replay(rt, g, NULL), HN_OK);
            CU_ASSERT_EQUAL(hn_runtime_sync(rt), HN_OK);
            CU_ASSERT(xset_right(rt, &s[k], salt[k]));
        }
        /* pool memory (cudaMallocAsync): another kind, never in place. It is
         * captured again, which CUDA may refuse to put into the graph (a
         * copy's memory from another place: HN_ERR_UNSUPPORTED, the graph
         * unusable); where it took it, back to cudaMalloc is captured again
         * too, then in place. Not via p2p: a pool's memory is not its
         * peers' to copy into unless the pool grants them. */
        if (v > 0) {
            cudaStream_t streams[8];
            xset pool;
            const int back[] = {0, 2}, in_place[] = {0, 1};
            hn_status_t st;
            streams_make(rt, n, streams);
            xset_make(rt, &pool, n, 1, streams, 9);
            st = hn_runtime_graph_rebind(rt, g, &pool.args);
            CU_ASSERT(st == HN_OK || st == HN_ERR_UNSUPPORTED);
            CU_ASSERT_FALSE(hn_runtime_graph_in_place(g));
            if (st == HN_OK) {
                CU_ASSERT_EQUAL(hn_runtime_replay(rt, g, NULL), HN_OK);
                CU_ASSERT_EQUAL(hn_runtime_sync(rt), HN_OK);
                CU_ASSERT(xset_right(rt, &pool, 9));
            } else {
                CU_ASSERT_EQUAL(hn_runtime_replay(rt, g, NULL), HN_ERR_INVALID); /* unusable, said */
            }
            for (int i = 0; i < 2 && st == HN_OK; i++) {
                const int k = back[i];
                xset_poison(rt, &s[k]);
                CU_ASSERT_EQUAL_FATAL(hn_runtime_graph_rebind(rt, g, &s[k].args), HN_OK);
                CU_ASSERT_EQUAL(hn_runtime_graph_in_place(g), in_place[i]);
                CU_ASSERT_EQUAL(hn_runtime_replay(rt, g, NULL), HN_OK);
                CU_ASSERT_EQUAL(hn_runtime_sync(rt), HN_OK);
                CU_ASSERT(xset_right(rt, &s[k], salt[k]));
            }
            xset_free(rt, &pool, streams);
            streams_free(rt, n, streams);
        }
        hn_runtime_graph_destroy(rt, g);
        for (int k = 0; k < 3; k++)
            xset_free(rt, &s[k], NULL);
        hn_runtime_forget(rt, p);
        hn_runtime_destroy(rt);
        hn_program_destroy(p);
    }
}

/* An embedder may destroy its stream while a launch on it runs (CUDA
 * allows that): the runtime's query, sync and destroy never touch that
 * stream again, and the results are right. */
static void test_stream_gone(void)
{
    int n = gpus() < 4 ? gpus() : 4;
    hn_program *p = program("");
    hn_runtime *rt = runtime(n, NULL, NULL);
    cudaStream_t streams[8];
    xset s;
    hn_status_t st;
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    CU_ASSERT_PTR_NOT_NULL_FATAL(rt);
    streams_make(rt, n, streams);
    xset_make(rt, &s, n, 0, streams, 7);
    for (int k = 0; k < 3; k++)
        CU_ASSERT_EQUAL(hn_runtime_launch(rt, p, &s.args, (void *const *)streams), HN_OK);
    streams_free(rt, n, streams); /* with the launches pending */
    while ((st = hn_runtime_query(rt)) == HN_ERR_BUSY)
        ;
    CU_ASSERT_EQUAL(st, HN_OK);
    CU_ASSERT_EQUAL(hn_runtime_sync(rt), HN_OK);
    CU_ASSERT(xset_right(rt, &s, 7));
    /* new streams, the same again; then the runtime goes with them gone */
    streams_make(rt, n, streams);
    CU_ASSERT_EQUAL(hn_runtime_launch(rt, p, &s.args, (void *const *)streams), HN_OK);
    streams_free(rt, n, streams);
    CU_ASSERT_EQUAL(hn_runtime_sync(rt), HN_OK);
    CU_ASSERT(xset_right(rt, &s, 7));
    xset_free(rt, &s, streams);
    hn_runtime_forget(rt, p);
    hn_runtime_destroy(rt);
    hn_program_destroy(p);
}

static void test_cudamalloc(void) { external(0); }
static void test_cudamallocasync(void) { external(1); }

/* every device's default pool opened to every other device (grant 1), or closed again (0) */
static void pools_open(hn_runtime *rt, int n, int grant)
{
    for (int r = 0; r < n; r++) {
        cudaMemPool_t pool;
        CU_ASSERT_EQUAL_FATAL(cudaDeviceGetDefaultMemPool(&pool, hn_runtime_device(rt, r)), cudaSuccess);
        for (int q = 0; q < n; q++) {
            struct cudaMemAccessDesc d;
            if (q == r)
                continue;
            memset(&d, 0, sizeof(d));
            d.location.type = cudaMemLocationTypeDevice;
            d.location.id = hn_runtime_device(rt, q);
            d.flags = grant ? cudaMemAccessFlagsProtReadWrite : cudaMemAccessFlagsProtNone;
            CU_ASSERT_EQUAL(cudaMemPoolSetAccess(pool, &d, 1), cudaSuccess);
        }
    }
}

/* The peer copies into another device's pool memory (cudaMallocAsync),
 * which that pool does not let the copying device touch: the rings
 * (HIRNODE_P2P_SMALL_KIB=0) are refused by name, the runtime usable after;
 * with the pools opened to the peers, the same run is right. The small
 * allreduce (the default at this size) copies only into the peers' own
 * slots: right with the pools closed. */
static void test_pool_p2p(void)
{
    int n = gpus() < 4 ? gpus() : 4;
    hn_program *p = program("via p2p");
    cudaStream_t streams[8];
    hn_runtime *rt;
    xset s;
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    if (n < 2) {
        hn_program_destroy(p);
        return;
    }
    rt = runtime(n, NULL, NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(rt);
    streams_make(rt, n, streams);
    xset_make(rt, &s, n, 1, streams, 7);
    xset_poison(rt, &s);
    CU_ASSERT_EQUAL(hn_runtime_run(rt, p, &s.args), HN_OK);
    CU_ASSERT(xset_right(rt, &s, 7));
    xset_free(rt, &s, streams);
    streams_free(rt, n, streams);
    hn_runtime_forget(rt, p);
    hn_runtime_destroy(rt);
    setenv("HIRNODE_P2P_SMALL_KIB", "0", 1);
    rt = runtime(n, NULL, NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(rt);
    streams_make(rt, n, streams);
    xset_make(rt, &s, n, 1, streams, 7);
    CU_ASSERT_NOT_EQUAL(hn_runtime_run(rt, p, &s.args), HN_OK);
    CU_ASSERT_PTR_NOT_NULL(strstr(hn_runtime_error(rt), "memory of another device's CUDA memory pool "
                                                        "(cudaMallocAsync)"));
    if (strstr(hn_runtime_error(rt), "memory pool") == NULL)
        fprintf(stderr, "\n  pool memory via p2p: %s\n", hn_runtime_error(rt));
    pools_open(rt, n, 1);
    xset_poison(rt, &s);
    CU_ASSERT_EQUAL(hn_runtime_run(rt, p, &s.args), HN_OK);
    CU_ASSERT(xset_right(rt, &s, 7));
    pools_open(rt, n, 0);
    xset_free(rt, &s, streams);
    streams_free(rt, n, streams);
    hn_runtime_forget(rt, p);
    hn_runtime_destroy(rt);
    unsetenv("HIRNODE_P2P_SMALL_KIB");
    hn_program_destroy(p);
}

/* Ranks on other ordinals (reversed, with two GPUs); two ranks on one
 * device: NCCL refused when the program is prepared, naming them; the p2p
 * rings run. */
static void test_device_map(void)
{
    int n = gpus() >= 2 ? 2 : 1, reversed[2] = {1, 0}, same[2] = {0, 0};
    hn_program *p = program("via nccl"), *q = program("via p2p");
    cudaStream_t streams[2];
    char *diag = NULL;
    hn_runtime *rt;
    xset s;
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    CU_ASSERT_PTR_NOT_NULL_FATAL(q);
    if (n == 2) {
        rt = runtime(2, reversed, &diag);
        CU_ASSERT_PTR_NOT_NULL_FATAL(rt);
        CU_ASSERT_EQUAL(hn_runtime_device(rt, 0), 1);
        CU_ASSERT_EQUAL(hn_runtime_device(rt, 1), 0);
        streams_make(rt, 2, streams);
        xset_make(rt, &s, 2, 0, streams, 5); /* checks each buffer's device */
        CU_ASSERT_EQUAL(hn_runtime_run(rt, p, &s.args), HN_OK);
        CU_ASSERT(xset_right(rt, &s, 5));
        xset_free(rt, &s, streams);
        streams_free(rt, 2, streams);
        hn_runtime_forget(rt, p);
        hn_runtime_destroy(rt);
    }
    { /* an ordinal past the GPUs under backend auto: refused, not emulated */
        hn_runtime_config cfg;
        hn_runtime *none = NULL;
        int past[1] = {gpus()};
        char want[64];
        hn_runtime_config_default(&cfg);
        cfg.backend = "auto";
        cfg.devices = past;
        CU_ASSERT_EQUAL(hn_runtime_create_ex(&cfg, &none, &diag), HN_ERR_INVALID);
        snprintf(want, sizeof(want), "device %d asked", gpus());
        CU_ASSERT_PTR_NOT_NULL(diag != NULL ? strstr(diag, want) : NULL);
        hn_string_free(diag);
        diag = NULL;
    }
    rt = runtime(2, same, &diag);
    CU_ASSERT_PTR_NOT_NULL_FATAL(rt);
    streams_make(rt, 2, streams);
    xset_make(rt, &s, 2, 0, streams, 6);
    CU_ASSERT_EQUAL(hn_runtime_run(rt, p, &s.args), HN_ERR_UNSUPPORTED);
    CU_ASSERT_PTR_NOT_NULL(strstr(hn_runtime_error(rt), "ranks 0 and 1 are both on device 0, and the nccl "
                                                        "communicator cannot have more than 1 rank of a team on "
                                                        "one device"));
    CU_ASSERT_EQUAL(hn_runtime_run(rt, q, &s.args), HN_OK);
    CU_ASSERT(xset_right(rt, &s, 6));
    xset_free(rt, &s, streams);
    streams_free(rt, 2, streams);
    hn_runtime_forget(rt, p);
    hn_runtime_forget(rt, q);
    hn_runtime_destroy(rt);
    hn_program_destroy(p);
    hn_program_destroy(q);
}
#endif

void hn_suite_bind_cuda(void)
{
#ifdef HN_HAVE_CUDA
    static CU_TestInfo tests[] = {
        {"cudaMalloc memory bound, run, launched, captured, rebound", test_cudamalloc},
        {"cudaMallocAsync pool memory bound, run, launched, captured, rebound", test_cudamallocasync},
        {"rebinds after the first move pointers in place, via p2p, ll and nccl", test_rebind_in_place},
        {"ranks on other ordinals; two ranks on one device: NCCL refused, p2p runs", test_device_map},
        {"another device's pool memory: the small allreduce right; the rings' copies refused by name, with the "
         "pools opened right", test_pool_p2p},
        {"the embedder's stream destroyed with launches pending: query, sync, destroy", test_stream_gone},
        CU_TEST_INFO_NULL,
    };
    if (gpus() > 0)
        hn_test_add_suite("runtime/bind_cuda", tests);
#endif
}
