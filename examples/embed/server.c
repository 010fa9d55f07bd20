/* A server-shaped embedding of libhirnode. It asks the program what its
 * inputs and outputs are at the configuration it serves (hn_program_io:
 * names, dtype, each rank's shape and bytes), allocates every buffer with
 * those bytes on each rank's device, keeps the weights in place and gives
 * each request buffers of its own: the step (a tensor-parallel MLP) is
 * launched for the first request, captured once, then rebound to each
 * later request's buffers (hn_runtime_graph_rebind: no new capture) and
 * replayed; every result is checked against a reference computed here, and
 * a buffer too small is shown to be refused.
 *
 * Memory: where the backend's memory is CUDA device memory
 * (hn_runtime_device_kind: the cuda backend) every buffer comes from
 * cudaMalloc on the rank's device (hn_runtime_device: the ordinal a rank
 * runs on), the runtime taking it on the bytes the bindings say; elsewhere
 * (the host backend, or a library built without CUDA) from
 * hn_runtime_alloc.
 * cudaMalloc is looked up at run time in the CUDA runtime the library
 * loaded (dlsym), so this one source builds where CUDA is absent, without
 * its headers.
 *
 * Build against the installed library (glibc 2.34 and later have dlsym in
 * libc; older ones need -ldl):
 *   cc server.c $(pkg-config --cflags --libs hirnode) -lm -o server
 *   ./server [RANKS [REQUESTS]]   (HIRNODE_BACKEND=host|cuda; default: auto) */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <hirnode/runtime.h>

#define MAX_RANKS 8
#define NIO 6 /* X W1 b1 W2 b2 Y */

static const char *step_text =
    "param M = 64, D = 32, F = 64\n"
    "input  X  : f32[M / world, D]  shard(axis 0)\n"
    "input  W1 : f32[F / world, D]  shard(axis 0)\n"
    "input  b1 : f32[F / world]     shard(axis 0)\n"
    "input  W2 : f32[D, F / world]  shard(axis 1)\n"
    "input  b2 : f32[D]             replicated\n"
    "output Y  : f32[M / world, D]  shard(axis 0)\n"
    "H = alloc f32[M, F / world]\n"
    "linear H <- allgather(X), W1, b1 pipelined()\n"
    "reduce_scatter Y <- linear(H, W2, b2) pipelined()\n";
enum { M = 64, D = 32, F = 64 };

/* ---- device memory: cudaMalloc on the cuda backend, else the runtime's ---- */

typedef int (*cuda_set_device_fn)(int);
typedef int (*cuda_malloc_fn)(void **, size_t);
typedef int (*cuda_free_fn)(void *);

typedef struct allocator {
    hn_runtime *rt;
    cuda_set_device_fn set_device;
    cuda_malloc_fn cmalloc;
    cuda_free_fn cfree;
} allocator;

static void allocator_init(allocator *a, hn_runtime *rt)
{
    memset(a, 0, sizeof(*a));
    a->rt = rt;
    if (hn_runtime_device_kind(rt) != HN_DEVICE_KIND_CUDA) /* host memory: malloc */
        return;
    /* the CUDA runtime the library was linked with is loaded already */
    a->set_device = (cuda_set_device_fn)dlsym(RTLD_DEFAULT, "cudaSetDevice");
    a->cmalloc = (cuda_malloc_fn)dlsym(RTLD_DEFAULT, "cudaMalloc");
    a->cfree = (cuda_free_fn)dlsym(RTLD_DEFAULT, "cudaFree");
    if (a->set_device == NULL || a->cmalloc == NULL || a->cfree == NULL)
        a->cmalloc = NULL;
}

static int dev_alloc(allocator *a, int rank, size_t bytes, void **p)
{
    if (a->cmalloc == NULL)
        return hn_runtime_alloc(a->rt, rank, bytes, p) == HN_OK ? 0 : -1;
    if (a->set_device(hn_runtime_device(a->rt, rank)) != 0 || a->cmalloc(p, bytes) != 0)
        return -1;
    return 0;
}

static void dev_free(allocator *a, int rank, void *p)
{
    if (p == NULL)
        return;
    if (a->cmalloc == NULL) {
        hn_runtime_free(a->rt, rank, p);
    } else if (a->set_device(hn_runtime_device(a->rt, rank)) == 0) {
        a->cfree(p);
    }
}

/* ---- the model and the requests ---- */

/* element i (row-major) of input k's global tensor for request q; small
 * multiples of 1/4: every product and sum here is exact in f32. The
 * weights (k > 0) are the same for every request. */
static float value(int k, long i, int q) { return (float)(((i * 7 + k * 3 + (k == 0 ? q * 5 : 0)) % 9) - 4) / 4.0f; }

/* The buffers of one request on every rank: ptr[k][r], bytes[k][r]. */
typedef struct buffers {
    void *ptr[NIO][MAX_RANKS];
    size_t bytes[NIO][MAX_RANKS];
} buffers;

/* the global flat index of local element i of input k on rank r */
static long global_index(const hn_io_info *io, int n, int r, long i)
{
    long g = 0, stride = 1;
    for (int d = io->ndim - 1; d >= 0; d--) {
        long local = i % io->shape[d], extent = io->shape[d];
        i /= io->shape[d];
        if (d == io->shard_axis) {
            local += (long)r * io->shape[d];
            extent *= n;
        }
        g += local * stride;
        stride *= extent;
    }
    return g;
}

/* uploads input k of request q to every rank (its shard) */
static int upload(hn_runtime *rt, hn_io_info io[][NIO], int n, const buffers *b, int k, int q)
{
    for (int r = 0; r < n; r++) {
        long count = (long)(io[r][k].bytes / sizeof(float));
        float *h = malloc(io[r][k].bytes + 1);
        int bad;
        if (h == NULL)
            return -1;
        for (long i = 0; i < count; i++)
            h[i] = value(k, global_index(&io[r][k], n, r, i), q);
        bad = hn_runtime_upload(rt, r, b->ptr[k][r], h, io[r][k].bytes) != HN_OK;
        free(h);
        if (bad)
            return -1;
    }
    return 0;
}

/* Y of request q, computed here: Y = (X W1^T + b1) W2^T + b2 */
static void reference(int q, float y[M][D])
{
    static float h[M][F];
    for (int i = 0; i < M; i++)
        for (int f = 0; f < F; f++) {
            double a = value(2, f, q);
            for (int j = 0; j < D; j++)
                a += (double)value(0, (long)i * D + j, q) * value(1, (long)f * D + j, q);
            h[i][f] = (float)a;
        }
    for (int i = 0; i < M; i++)
        for (int j = 0; j < D; j++) {
            double a = value(4, j, q);
            for (int f = 0; f < F; f++)
                a += (double)h[i][f] * value(3, (long)j * F + f, q);
            y[i][j] = (float)a;
        }
}

/* Y of b, gathered, against request q's reference: the worst relative error */
static double check(hn_runtime *rt, int n, const buffers *b, int q)
{
    static float y[M][D], want[M][D];
    double worst = 0;
    int rows = M / n;
    reference(q, want);
    for (int r = 0; r < n; r++)
        if (hn_runtime_download(rt, r, y[r * rows], b->ptr[5][r], b->bytes[5][r]) != HN_OK)
            return INFINITY;
    for (int i = 0; i < M; i++)
        for (int j = 0; j < D; j++) {
            double e = isfinite(y[i][j]) ? fabs(y[i][j] - want[i][j]) / fmax(1.0, fabs(want[i][j])) : INFINITY;
            worst = e > worst ? e : worst;
        }
    return worst;
}

/* Y of b set to NaN: what the check reads must have been written since */
static int poison(hn_runtime *rt, int n, const buffers *b)
{
    static float nan_rows[M * D];
    for (int i = 0; i < M * D; i++)
        nan_rows[i] = NAN;
    for (int r = 0; r < n; r++)
        if (hn_runtime_upload(rt, r, b->ptr[5][r], nan_rows, b->bytes[5][r]) != HN_OK)
            return -1;
    return 0;
}

static void bind(const buffers *b, hn_binding *out, hn_io_info io[][NIO])
{
    for (int k = 0; k < NIO; k++)
        out[k] = (hn_binding){io[0][k].name, b->ptr[k], b->bytes[k]};
}

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static int fail(const char *what, hn_status_t st, hn_runtime *rt)
{
    fprintf(stderr, "server: %s: %s\n%s\n", what, hn_status_string(st), rt ? hn_runtime_error(rt) : "");
    return 1;
}

int main(int argc, char **argv)
{
    int n = argc > 1 ? atoi(argv[1]) : 2, requests = argc > 2 ? atoi(argv[2]) : 16, rc = 1, nio = 0;
    hn_program *p = NULL;
    hn_runtime *rt = NULL;
    hn_runtime_config cfg;
    hn_graph *graph = NULL;
    char *diag = NULL;
    static hn_io_info io[MAX_RANKS][NIO];
    static buffers req[2]; /* two requests' buffers, in turn; the weights are shared */
    static double rebind_us[1024];
    int in_place = 0;
    hn_binding b[NIO];
    hn_run_args args = {0, NULL, NULL, NIO, b};
    allocator mem;
    hn_status_t st;
    double worst = 0;
    if (n < 1 || n > MAX_RANKS || M % n != 0 || F % n != 0 || requests < 2 || requests > 1024) {
        fprintf(stderr, "usage: server [RANKS (1-8, dividing %d) [REQUESTS (2-1024)]]\n", M);
        return 2;
    }
    if (hn_program_parse(step_text, strlen(step_text), "step.hir", &p, &diag) != HN_OK) {
        fprintf(stderr, "%s", diag ? diag : "parse error\n");
        hn_string_free(diag);
        return 2;
    }
    hn_runtime_config_default(&cfg);
    cfg.ndev = n;
    if ((st = hn_runtime_create_ex(&cfg, &rt, &diag)) != HN_OK) {
        fprintf(stderr, "server: cannot start the runtime: %s\n", diag ? diag : hn_status_string(st));
        hn_string_free(diag);
        hn_program_destroy(p);
        return 1;
    }
    allocator_init(&mem, rt);
    /* what each rank holds: ask with cap 0 for the count, then for the list */
    for (int r = 0; r < n; r++) {
        if ((st = hn_program_io(p, n, cfg.nstreams, NULL, r, NULL, 0, &nio, &diag)) != HN_OK || nio != NIO ||
            (st = hn_program_io(p, n, cfg.nstreams, NULL, r, io[r], NIO, &nio, &diag)) != HN_OK) {
            fprintf(stderr, "server: io list: %s\n", diag ? diag : "not the step's six tensors");
            hn_string_free(diag);
            goto done;
        }
    }
    printf("server: %d ranks on the %s backend, buffers from %s\n", n, hn_runtime_backend(rt),
           mem.cmalloc != NULL ? "cudaMalloc" : "hn_runtime_alloc");
    for (int r = 0; r < n; r++) {
        printf("  rank %d on device %d:", r, hn_runtime_device(rt, r));
        for (int k = 0; k < NIO; k++) {
            printf(" %s%s [", io[r][k].is_output ? "output " : "", io[r][k].name);
            for (int d = 0; d < io[r][k].ndim; d++)
                printf("%s%lld", d ? ", " : "", (long long)io[r][k].shape[d]);
            printf("] %zu B%s", io[r][k].bytes, k + 1 < NIO ? "," : "\n");
        }
    }
    /* the weights once, each request's X and Y of its own */
    for (int q = 0; q < 2; q++)
        for (int k = 0; k < NIO; k++)
            for (int r = 0; r < n; r++) {
                req[q].bytes[k][r] = io[r][k].bytes;
                if (q == 1 && k > 0 && k < 5)
                    req[1].ptr[k][r] = req[0].ptr[k][r];
                else if (dev_alloc(&mem, r, io[r][k].bytes, &req[q].ptr[k][r]) != 0) {
                    fprintf(stderr, "server: cannot allocate %zu bytes on rank %d\n", io[r][k].bytes, r);
                    goto done;
                }
            }
    for (int k = 0; k < 5; k++)
        if (upload(rt, io, n, &req[0], k, 0) != 0)
            goto done;
    /* request 0: launched (the first launch prepares the step), then captured */
    bind(&req[0], b, io);
    if ((st = hn_runtime_launch(rt, p, &args, NULL)) != HN_OK || (st = hn_runtime_sync(rt)) != HN_OK) {
        fail("launch", st, rt);
        goto done;
    }
    worst = fmax(worst, check(rt, n, &req[0], 0));
    if (poison(rt, n, &req[0]) != 0 || (st = hn_runtime_capture(rt, p, &args, NULL, &graph)) != HN_OK ||
        (st = hn_runtime_replay(rt, graph, NULL)) != HN_OK || (st = hn_runtime_sync(rt)) != HN_OK) {
        fail("capture and replay", st, rt);
        goto done;
    }
    worst = fmax(worst, check(rt, n, &req[0], 0));
    /* requests 1, 2, ...: the graph rebound to the request's buffers, replayed */
    for (int q = 1; q < requests; q++) {
        const buffers *mine = &req[q % 2], *other = &req[(q + 1) % 2];
        double t0;
        if (upload(rt, io, n, mine, 0, q) != 0 || poison(rt, n, mine) != 0 || poison(rt, n, other) != 0)
            goto done;
        bind(mine, b, io);
        t0 = now();
        if ((st = hn_runtime_graph_rebind(rt, graph, &args)) != HN_OK) {
            fail("rebind", st, rt);
            goto done;
        }
        rebind_us[q - 1] = (now() - t0) * 1e6;
        in_place += hn_runtime_graph_in_place(graph);
        if ((st = hn_runtime_replay(rt, graph, NULL)) != HN_OK || (st = hn_runtime_sync(rt)) != HN_OK) {
            fail("replay", st, rt);
            goto done;
        }
        worst = fmax(worst, check(rt, n, mine, q));
        if (!isinf(check(rt, n, other, q))) /* the other request's Y is not written any more */
            worst = INFINITY;
    }
    /* a buffer one element short is refused, naming it; the graph replays on */
    {
        buffers *last = &req[(requests - 1) % 2];
        size_t keep = last->bytes[0][n - 1];
        last->bytes[0][n - 1] = keep - sizeof(float);
        bind(last, b, io);
        st = hn_runtime_graph_rebind(rt, graph, &args);
        printf("a short buffer: %s: %.*s\n", hn_status_string(st), (int)strcspn(hn_runtime_error(rt), "\n"),
               hn_runtime_error(rt));
        last->bytes[0][n - 1] = keep;
        if (st != HN_ERR_INVALID || poison(rt, n, last) != 0 || hn_runtime_replay(rt, graph, NULL) != HN_OK ||
            hn_runtime_sync(rt) != HN_OK)
            worst = INFINITY;
        else
            worst = fmax(worst, check(rt, n, last, requests - 1));
    }
    qsort(rebind_us, (size_t)(requests - 1), sizeof(double), cmp_double);
    printf("server: %d requests; a rebind took %.1f us (median of %d, all ranks; %d moved the graph's pointers "
           "in place, the others captured again)\n", requests, rebind_us[(requests - 1) / 2], requests - 1, in_place);
    printf("check: %s (worst relative error %.3g)\n", worst <= 1e-5 ? "ok" : "MISMATCH", worst);
    rc = worst <= 1e-5 ? 0 : 1;
done:
    if (graph != NULL)
        hn_runtime_graph_destroy(rt, graph);
    for (int q = 0; q < 2; q++)
        for (int k = 0; k < NIO; k++)
            for (int r = 0; r < n; r++)
                if (!(q == 1 && k > 0 && k < 5))
                    dev_free(&mem, r, req[q].ptr[k][r]);
    hn_runtime_forget(rt, p);
    hn_runtime_destroy(rt);
    hn_program_destroy(p);
    return rc;
}
