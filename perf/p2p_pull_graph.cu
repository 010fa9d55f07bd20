/* The replayed pull, alone: does a copy that reads a peer GPU's buffer,
 * inside a CUDA graph replayed back to back with another graph, after a
 * kernel that waited for the peer's flag, always end? hirnode's rings saw
 * such a pull stall on two H200s (docs/GPU-VALIDATION.md), so they push
 * inside captures; this program asks the same of CUDA without hirnode.
 *
 *   make CUDA=1 build/p2p_pull_graph
 *   build/p2p_pull_graph [pull|push] [ce|kernel] [REPLAYS] [GRAPHS]
 *
 * Per GPU d and graph g, the captured step (flags relative to the graph's
 * epoch, which every replay raises, as hirnode's are):
 *   copy own data (1 KiB, local); tell the peer it may read it;
 *   wait until the peer says the same; copy 512 bytes from the peer's data
 *   into our own buffer (pull) — or from ours into the peer's (push);
 *   tell the peer we are done with it; wait for the peer's word; raise the
 *   epoch.
 * Each GPU's host thread replays its graphs in the same order (graph 0
 * twice, graph 1 twice, ...), with no host sync between replays. A replay
 * that has not ended after 10 s is reported with the last step each GPU
 * finished (markers in mapped host memory), and the program exits 1; 0
 * when every replay ended and every copy carried the right bytes. */
#include <cuda_runtime.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define SPAN 65536u
#define BYTES 1024
#define GRAPHS_MAX 4
#define CHECK(x)                                                                                                   \
    do {                                                                                                           \
        cudaError_t e_ = (x);                                                                                      \
        if (e_ != cudaSuccess) {                                                                                   \
            fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_));                  \
            exit(2);                                                                                               \
        }                                                                                                          \
    } while (0)

__global__ void fill(unsigned char *p, unsigned seed, const volatile uint32_t *ep)
{
    for (int i = threadIdx.x; i < BYTES; i += blockDim.x)
        p[i] = (unsigned char)(seed * 131u + (unsigned)i * 7u + ep[0] / SPAN);
}

__global__ void flag_write(volatile uint32_t *addr, uint32_t v, const volatile uint32_t *ep)
{
    __threadfence_system();
    *addr = v + ep[0];
}

__global__ void flag_wait(const volatile uint32_t *addr, uint32_t v, const volatile uint32_t *ep)
{
    uint32_t want = v + ep[0];
    while ((int32_t)(*addr - want) < 0)
        __nanosleep(64);
    __threadfence_system();
}

__global__ void copy_words(uint32_t *dst, const volatile uint32_t *src, int n)
{
    for (int i = threadIdx.x; i < n; i += blockDim.x)
        dst[i] = src[i];
}

__global__ void mark(volatile uint32_t *slot, uint32_t v)
{
    __threadfence_system();
    *slot = v;
}

__global__ void add(uint32_t *addr, uint32_t v) { *addr += v; }

typedef struct gpu {
    int dev;
    cudaStream_t s;
    unsigned char *data[GRAPHS_MAX], *buf[GRAPHS_MAX]; /* own data, where copies land */
    uint32_t *flags[GRAPHS_MAX];                        /* [2]: the peer may read; the peer is done */
    uint32_t *ep[GRAPHS_MAX];
    cudaGraphExec_t exec[GRAPHS_MAX];
} gpu;

static gpu g[2];
static uint32_t *marks; /* mapped: [dev * 8 + step] = the replay that finished it */
static int pull = 1, kernel_copy = 0, replays = 2000, graphs = 2;
static volatile int done_replays[2];

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static void capture(int d, int k)
{
    gpu *me = &g[d], *peer = &g[1 - d];
    cudaGraph_t graph;
    uint32_t *m = marks + d * 8;
    CHECK(cudaSetDevice(me->dev));
    CHECK(cudaStreamBeginCapture(me->s, cudaStreamCaptureModeThreadLocal));
    fill<<<1, 256, 0, me->s>>>(me->data[k], (unsigned)(d * 10 + k), me->ep[k]);
    flag_write<<<1, 1, 0, me->s>>>(peer->flags[k] + 0, 1, me->ep[k]);
    flag_wait<<<1, 1, 0, me->s>>>(me->flags[k] + 0, 1, me->ep[k]);
    mark<<<1, 1, 0, me->s>>>(m + 0, (uint32_t)k + 1);
    if (pull) { /* the peer's data into ours */
        if (kernel_copy)
            copy_words<<<1, 128, 0, me->s>>>((uint32_t *)me->buf[k], (const uint32_t *)peer->data[k], BYTES / 8);
        else
            CHECK(cudaMemcpyAsync(me->buf[k], peer->data[k], BYTES / 2, cudaMemcpyDefault, me->s));
    } else { /* ours into the peer's */
        if (kernel_copy)
            copy_words<<<1, 128, 0, me->s>>>((uint32_t *)peer->buf[k], (const uint32_t *)me->data[k], BYTES / 8);
        else
            CHECK(cudaMemcpyAsync(peer->buf[k], me->data[k], BYTES / 2, cudaMemcpyDefault, me->s));
    }
    mark<<<1, 1, 0, me->s>>>(m + 1, (uint32_t)k + 1);
    flag_write<<<1, 1, 0, me->s>>>(peer->flags[k] + 1, 1, me->ep[k]);
    flag_wait<<<1, 1, 0, me->s>>>(me->flags[k] + 1, 1, me->ep[k]);
    add<<<1, 1, 0, me->s>>>(me->ep[k], SPAN);
    mark<<<1, 1, 0, me->s>>>(m + 2, (uint32_t)k + 1);
    CHECK(cudaStreamEndCapture(me->s, &graph));
    CHECK(cudaGraphInstantiate(&me->exec[k], graph, 0));
    CHECK(cudaGraphDestroy(graph));
}

static void *replay_thread(void *arg)
{
    int d = (int)(intptr_t)arg;
    CHECK(cudaSetDevice(g[d].dev));
    for (int i = 0; i < replays; i++) {
        CHECK(cudaGraphLaunch(g[d].exec[(i / 2) % graphs], g[d].s));
        if (i % 64 == 63)
            CHECK(cudaStreamSynchronize(g[d].s)); /* a bounded queue; the host never runs far ahead */
        done_replays[d] = i + 1;
    }
    CHECK(cudaStreamSynchronize(g[d].s));
    return NULL;
}

int main(int argc, char **argv)
{
    pthread_t t[2];
    int n = 0, ok = 1;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "pull") == 0 || strcmp(argv[i], "push") == 0)
            pull = strcmp(argv[i], "pull") == 0;
        else if (strcmp(argv[i], "ce") == 0 || strcmp(argv[i], "kernel") == 0)
            kernel_copy = strcmp(argv[i], "kernel") == 0;
        else if (n++ == 0)
            replays = atoi(argv[i]);
        else
            graphs = atoi(argv[i]);
    }
    if (replays < 2 || graphs < 1 || graphs > GRAPHS_MAX) {
        fprintf(stderr, "usage: %s [pull|push] [ce|kernel] [REPLAYS >= 2] [GRAPHS 1-%d]\n", argv[0], GRAPHS_MAX);
        return 2;
    }
    CHECK(cudaGetDeviceCount(&n));
    if (n < 2) {
        fprintf(stderr, "p2p_pull_graph: needs 2 GPUs, %d here\n", n);
        return 2;
    }
    CHECK(cudaHostAlloc((void **)&marks, 16 * sizeof(uint32_t), cudaHostAllocMapped | cudaHostAllocPortable));
    memset(marks, 0, 16 * sizeof(uint32_t));
    for (int d = 0; d < 2; d++) {
        int can = 0;
        g[d].dev = d;
        CHECK(cudaSetDevice(d));
        CHECK(cudaDeviceCanAccessPeer(&can, d, 1 - d));
        if (!can) {
            fprintf(stderr, "p2p_pull_graph: GPU %d cannot reach GPU %d\n", d, 1 - d);
            return 2;
        }
        CHECK(cudaDeviceEnablePeerAccess(1 - d, 0));
        CHECK(cudaStreamCreateWithFlags(&g[d].s, cudaStreamNonBlocking));
        for (int k = 0; k < graphs; k++) {
            CHECK(cudaMalloc((void **)&g[d].data[k], BYTES));
            CHECK(cudaMalloc((void **)&g[d].buf[k], BYTES));
            CHECK(cudaMalloc((void **)&g[d].flags[k], 2 * sizeof(uint32_t)));
            CHECK(cudaMalloc((void **)&g[d].ep[k], sizeof(uint32_t)));
            CHECK(cudaMemset(g[d].flags[k], 0, 2 * sizeof(uint32_t)));
            CHECK(cudaMemset(g[d].ep[k], 0, sizeof(uint32_t)));
            CHECK(cudaMemset(g[d].buf[k], 0, BYTES));
        }
    }
    for (int d = 0; d < 2; d++)
        for (int k = 0; k < graphs; k++)
            capture(d, k);
    printf("p2p_pull_graph: %s by %s, %d replays of %d graph%s per GPU\n", pull ? "pull" : "push",
           kernel_copy ? "SM kernel" : "copy engine", replays, graphs, graphs == 1 ? "" : "s");
    for (int d = 0; d < 2; d++)
        pthread_create(&t[d], NULL, replay_thread, (void *)(intptr_t)d);
    {
        double last = now();
        int seen = -1;
        for (;;) {
            int progress = done_replays[0] + done_replays[1] + (int)(marks[2] + marks[10]);
            if (done_replays[0] == replays && done_replays[1] == replays &&
                cudaStreamQuery(g[0].s) == cudaSuccess && cudaStreamQuery(g[1].s) == cudaSuccess)
                break;
            if (progress != seen) {
                seen = progress;
                last = now();
            } else if (now() - last > 10) {
                printf("STALL: replays issued %d and %d; last steps finished (graph + 1): GPU 0 waited %u, "
                       "copied %u, ended %u; GPU 1 waited %u, copied %u, ended %u\n",
                       done_replays[0], done_replays[1], marks[0], marks[1], marks[2], marks[8], marks[9],
                       marks[10]);
                fflush(stdout);
                _exit(1);
            }
            usleep(1000);
        }
    }
    for (int d = 0; d < 2; d++)
        pthread_join(t[d], NULL);
    /* the last replay's copy: 512 bytes of the peer's fill for the last graph replayed */
    for (int d = 0; d < 2 && ok; d++) {
        int k = ((replays - 1) / 2) % graphs, from = pull ? 1 - d : d, into = pull ? d : 1 - d;
        unsigned char got[BYTES], want[BYTES];
        uint32_t ep;
        CHECK(cudaSetDevice(from));
        CHECK(cudaMemcpy(&ep, g[from].ep[k], sizeof(ep), cudaMemcpyDeviceToHost));
        CHECK(cudaMemcpy(got, g[into].buf[k], BYTES, cudaMemcpyDefault));
        for (int i = 0; i < BYTES; i++) /* filled when the epoch was one span lower */
            want[i] = (unsigned char)((unsigned)(from * 10 + k) * 131u + (unsigned)i * 7u + (ep - SPAN) / SPAN);
        ok = memcmp(got, want, BYTES / 2) == 0;
    }
    printf("p2p_pull_graph: every replay ended; the copies %s\n", ok ? "right" : "WRONG");
    return ok ? 0 : 1;
}
