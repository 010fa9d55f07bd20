/* A server that runs one worker process per rank, as inference servers
 * do: each worker embeds libhirnode as one rank of a world of processes
 * (hn_runtime_config world, rank, rendezvous), binds memory of
 * hn_runtime_alloc (the other workers reach only that), runs the
 * tensor-parallel MLP step eagerly and then from a capture, and checks its
 * shard of the result against a reference computed here. This program
 * only forks the workers and waits for them; the runtime needs no
 * launcher. Build against the installed library:
 *   cc workers.c $(pkg-config --cflags --libs hirnode) -lm -o workers
 *   ./workers [RANKS [STEPS]]    (HIRNODE_BACKEND=host|cuda; default: auto)
 * Every worker makes the same calls in the same order (create, the first
 * run, capture, sync, destroy): what ends a call ends it in every process,
 * and returns the same first error everywhere. */
#define _POSIX_C_SOURCE 200809L
#define _DEFAULT_SOURCE /* mkdtemp */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <hirnode/runtime.h>

#define M 64 /* tokens */
#define D 32 /* model width */
#define F 64 /* hidden width */
#define MAX_RANKS 8

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

static float value(int i, int j, int salt) { return (float)(((i * 7 + j * 3 + salt) % 9) - 4) / 4.0f; }

static float x[M][D], w1[F][D], b1[F], w2[D][F], b2[D], ref[M][D];

/* The whole model and its output: every worker makes the same. */
static void model(void)
{
    static float h[M][F];
    for (int i = 0; i < M; i++)
        for (int j = 0; j < D; j++)
            x[i][j] = value(i, j, 1);
    for (int f = 0; f < F; f++) {
        b1[f] = value(f, 0, 2);
        for (int j = 0; j < D; j++)
            w1[f][j] = value(f, j, 3);
    }
    for (int j = 0; j < D; j++) {
        b2[j] = value(j, 1, 4);
        for (int f = 0; f < F; f++)
            w2[j][f] = value(j, f, 5);
    }
    for (int i = 0; i < M; i++)
        for (int f = 0; f < F; f++) {
            double a = b1[f];
            for (int j = 0; j < D; j++)
                a += (double)x[i][j] * w1[f][j];
            h[i][f] = (float)a;
        }
    for (int i = 0; i < M; i++)
        for (int j = 0; j < D; j++) {
            double a = b2[j];
            for (int f = 0; f < F; f++)
                a += (double)h[i][f] * w2[j][f];
            ref[i][j] = (float)a;
        }
}

static int fail(int rank, const char *what, hn_status_t st, hn_runtime *rt)
{
    fprintf(stderr, "worker %d: %s: %s\n%s\n", rank, what, hn_status_string(st), rt ? hn_runtime_error(rt) : "");
    return 1;
}

/* One rank of the world: its shards, a run, a capture replayed. */
static int worker(int n, int rank, const char *dir, int steps)
{
    hn_runtime_config cfg;
    hn_runtime *rt = NULL;
    hn_program *p = NULL;
    hn_graph *graph = NULL;
    hn_status_t st;
    char *diag = NULL;
    int rows = M / n, hid = F / n, bad = 0;
    void *bx, *bw1, *bb1, *bw2, *bb2, *by;
    size_t sx = sizeof(float) * rows * D, sw = sizeof(float) * hid * D, sb1 = sizeof(float) * hid,
           sb2 = sizeof(float) * D;
    static float w2s[D * F], y[M * D];
    double worst = 0;
    hn_runtime_config_default(&cfg); /* $HIRNODE_BACKEND and the other settings */
    cfg.ndev = 1;                    /* one rank here ... */
    cfg.world = n;                   /* ... of a world of n processes */
    cfg.rank = rank;
    cfg.rendezvous = dir;
    if ((st = hn_runtime_create_ex(&cfg, &rt, &diag)) != HN_OK) {
        fprintf(stderr, "worker %d: %s\n", rank, diag ? diag : hn_status_string(st));
        hn_string_free(diag);
        return 1;
    }
    if ((st = hn_program_parse(step_text, strlen(step_text), "step.hir", &p, &diag)) != HN_OK) {
        fprintf(stderr, "worker %d: %s\n", rank, diag ? diag : hn_status_string(st));
        hn_string_free(diag);
        hn_runtime_destroy(rt);
        return 1;
    }
    model();
    for (int j = 0; j < D; j++)
        for (int f = 0; f < hid; f++)
            w2s[j * hid + f] = w2[j][rank * hid + f];
    if ((st = hn_runtime_alloc(rt, rank, sx, &bx)) != HN_OK || (st = hn_runtime_alloc(rt, rank, sw, &bw1)) != HN_OK ||
        (st = hn_runtime_alloc(rt, rank, sb1, &bb1)) != HN_OK || (st = hn_runtime_alloc(rt, rank, sw, &bw2)) != HN_OK ||
        (st = hn_runtime_alloc(rt, rank, sb2, &bb2)) != HN_OK || (st = hn_runtime_alloc(rt, rank, sx, &by)) != HN_OK ||
        (st = hn_runtime_upload(rt, rank, bx, x[rank * rows], sx)) != HN_OK ||
        (st = hn_runtime_upload(rt, rank, bw1, w1[rank * hid], sw)) != HN_OK ||
        (st = hn_runtime_upload(rt, rank, bb1, &b1[rank * hid], sb1)) != HN_OK ||
        (st = hn_runtime_upload(rt, rank, bw2, w2s, sw)) != HN_OK ||
        (st = hn_runtime_upload(rt, rank, bb2, b2, sb2)) != HN_OK) {
        bad = fail(rank, "buffers", st, rt);
        goto out;
    }
    {
        /* each binding array holds this process's one rank */
        void *px[1] = {bx}, *pw1[1] = {bw1}, *pb1[1] = {bb1}, *pw2[1] = {bw2}, *pb2[1] = {bb2}, *py[1] = {by};
        size_t nx[1] = {sx}, nw[1] = {sw}, nb1[1] = {sb1}, nb2[1] = {sb2};
        hn_binding b[6] = {{"X", px, nx},  {"W1", pw1, nw}, {"b1", pb1, nb1},
                           {"W2", pw2, nw}, {"b2", pb2, nb2}, {"Y", py, nx}};
        hn_run_args args = {0, NULL, NULL, 6, b};
        if ((st = hn_runtime_run(rt, p, &args)) != HN_OK) { /* verifies, prepares, runs: in every process */
            bad = fail(rank, "first step", st, rt);
            goto out;
        }
        for (int i = 0; i < rows * D; i++)
            y[i] = NAN; /* what the check reads below is the replays' */
        if ((st = hn_runtime_upload(rt, rank, by, y, sx)) != HN_OK ||
            (st = hn_runtime_capture(rt, p, &args, NULL, &graph)) != HN_OK) {
            bad = fail(rank, "capture", st, rt);
            goto out;
        }
        for (int s = 0; s < steps; s++) /* replays are this process's own: no exchange */
            if ((st = hn_runtime_replay(rt, graph, NULL)) != HN_OK) {
                bad = fail(rank, "replay", st, rt);
                goto out;
            }
        if ((st = hn_runtime_sync(rt)) != HN_OK || (st = hn_runtime_download(rt, rank, y, by, sx)) != HN_OK) {
            bad = fail(rank, "sync", st, rt);
            goto out;
        }
    }
    for (int i = 0; i < rows; i++)
        for (int j = 0; j < D; j++) {
            double e = fabs((double)y[i * D + j] - ref[rank * rows + i][j]);
            worst = e > worst || e != e ? (e != e ? INFINITY : e) : worst;
        }
    bad = !(worst <= 1e-3);
    printf("worker %d of %d (pid %d): %d replays, max abs err %.3g: %s\n", rank, n, (int)getpid(), steps, worst,
           bad ? "MISMATCH" : "ok");
out:
    if (graph != NULL)
        hn_runtime_graph_destroy(rt, graph);
    hn_program_destroy(p);
    hn_runtime_destroy(rt); /* the world's end: every process destroys */
    return bad;
}

int main(int argc, char **argv)
{
    int n = argc > 1 ? atoi(argv[1]) : 2, steps = argc > 2 ? atoi(argv[2]) : 100, failed = 0;
    char dir[] = "/tmp/hn-workers-XXXXXX";
    pid_t pid[MAX_RANKS];
    if (n < 1 || n > MAX_RANKS || M % n != 0 || F % n != 0 || steps < 1) {
        fprintf(stderr, "usage: workers [RANKS (1, 2, 4, 8) [STEPS >= 1]]\n");
        return 2;
    }
    if (mkdtemp(dir) == NULL) {
        perror("workers: mkdtemp");
        return 1;
    }
    fflush(stdout);
    for (int r = 0; r < n; r++) {
        if ((pid[r] = fork()) == 0) {
            int rc = worker(n, r, dir, steps);
            fflush(stdout); /* _exit leaves stdio alone */
            _exit(rc);
        }
        if (pid[r] < 0) {
            perror("workers: fork");
            n = r; /* the ones started still end: a missing rank is named at their deadline */
            failed = 1;
            break;
        }
    }
    for (int r = 0; r < n; r++) {
        int status = 0;
        while (waitpid(pid[r], &status, 0) < 0)
            ;
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
            fprintf(stderr, "workers: worker %d (pid %d) %s %d\n", r, (int)pid[r],
                    WIFEXITED(status) ? "exited with" : "was killed by signal",
                    WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status));
            failed = 1;
        }
    }
    rmdir(dir); /* the rendezvous left nothing in it */
    printf("check: %s (%d workers)\n", failed ? "FAILED" : "ok", n);
    return failed;
}
