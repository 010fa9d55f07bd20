/* `hirnode bench issue`: what issuing one instruction costs. A run of a
 * loop of N tiny fills (one kernel each on CUDA), timed per instruction,
 * beside the plain loop of the same kernels through the compute table on
 * the same stream of the same rank threads, timed the same way: host clock
 * around issuing all N and the end of every rank's stream, the slowest
 * rank, the median of the repetitions after a warm-up. Also the same loop
 * launched back to back (hn_runtime_launch, one sync at the end), and as
 * graphs: the program captured once (hn_runtime_capture) and replayed R
 * times back to back, beside a plain graph of the same kernels (the backend
 * capture of the plain loop) replayed the same way: time per instruction
 * (the devices' pace: R replays and one sync, by the host clock), and the
 * host time of one replay call of every rank — on each path a replay can
 * take to the ranks (--replay: the setting replay, or all three), with the
 * host time of that path's handoff alone (every rank reached and answered,
 * nothing launched). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../src/runtime/tools.h"
#include "hirnode/runtime.h"

#include "options.h"

typedef struct issue_opts {
    hn_runtime_config cfg;
    hn_cli_devices devices; /* --devices */
    int n, reps, warmup, markdown;
    const char *replay; /* bells, jobs, caller, all; NULL: the setting's */
} issue_opts;

static const char *const paths[] = {"bells", "jobs", "caller"}; /* hn_replay_path's order */

typedef struct raw_job {
    int n;
    void **buf;       /* per rank: 16 floats */
    hn_dgraph **plain; /* per rank: the plain loop captured */
} raw_job;

#define REPLAYS 20 /* replays per timed repetition */

/* the plain loop: the same fill kernel, straight through the compute
 * table, onto the rank's caller stream */
static hn_status_t plain_loop(hn_rank *r, const raw_job *j)
{
    hn_tensor t;
    hn_status_t st = HN_OK;
    memset(&t, 0, sizeof(t));
    t.dtype = HN_F32;
    t.ndim = 1;
    t.shape[0] = 16;
    t.stride[0] = 1;
    t.data = j->buf[r->local];
    for (int i = 0; i < j->n && st == HN_OK; i++)
        st = r->rt->compute->fill(r->caller, &t, 1.0, NULL);
    return st;
}

static hn_status_t raw_on_rank(hn_rank *r, void *arg)
{
    hn_status_t st = plain_loop(r, arg);
    return st != HN_OK ? st : r->rt->dev->stream_sync(r->caller);
}

/* the plain loop captured as a graph on the rank's caller stream */
static hn_status_t plain_capture_on_rank(hn_rank *r, void *arg)
{
    raw_job *j = arg;
    hn_status_t st, end;
    if ((st = r->rt->dev->capture_begin(r->caller)) != HN_OK)
        return st;
    st = plain_loop(r, j);
    end = r->rt->dev->capture_end(r->caller, &j->plain[r->local]);
    return st != HN_OK ? st : end;
}

static hn_status_t plain_free_on_rank(hn_rank *r, void *arg)
{
    raw_job *j = arg;
    if (j->plain[r->local] != NULL)
        r->rt->dev->graph_destroy(j->plain[r->local]);
    j->plain[r->local] = NULL;
    return HN_OK;
}

static hn_status_t sync_caller_on_rank(hn_rank *r, void *arg)
{
    (void)arg;
    return r->rt->dev->stream_sync(r->caller);
}

static hn_status_t noop_on_rank(hn_rank *r, void *arg)
{
    (void)r;
    (void)arg;
    return HN_OK;
}

/* The host time of a replay's handoff alone on `path`: every rank reached
 * and answered, nothing launched (the caller's path reaches them by a call). */
static double handoff_seconds(hn_runtime *rt, int path)
{
    double t0 = hn_now();
    for (int k = 0; k < REPLAYS; k++) {
        if (rt->nlocal > 1 && path == HN_REPLAY_JOBS) {
            (void)hn_runtime_exec_all(rt, noop_on_rank, NULL);
        } else if (rt->nlocal > 1 && path == HN_REPLAY_BELLS) {
            for (int i = 1; i < rt->nlocal; i++)
                hn_pool_ring(rt, i, noop_on_rank, NULL);
            (void)noop_on_rank(&rt->ranks[0], NULL);
            (void)hn_pool_answers(rt, 1, rt->nlocal);
        } else {
            for (int i = 0; i < rt->nlocal; i++)
                (void)noop_on_rank(&rt->ranks[i], NULL);
        }
    }
    return (hn_now() - t0) / REPLAYS;
}

/* REPLAYS launches of every rank's plain graph from this thread, like a replay */
static hn_status_t plain_replays(hn_runtime *rt, raw_job *j, double *host_s)
{
    hn_status_t st = HN_OK;
    double t0 = hn_now();
    for (int k = 0; k < REPLAYS && st == HN_OK; k++)
        for (int r = 0; r < rt->nlocal && st == HN_OK; r++)
            st = rt->dev->graph_launch(j->plain[r], rt->ranks[r].caller);
    *host_s = (hn_now() - t0) / REPLAYS;
    return st != HN_OK ? st : hn_runtime_exec_all(rt, sync_caller_on_rank, NULL);
}

static int bench_issue(const issue_opts *o)
{
    char text[256];
    hn_program *p = NULL;
    hn_runtime *rt = NULL;
    hn_run_args args = {0, NULL, NULL, 0, NULL};
    double *t_run = calloc((size_t)o->reps, sizeof(double)), *t_raw = calloc((size_t)o->reps, sizeof(double));
    double *t_launch = calloc((size_t)o->reps, sizeof(double));
    double *t_replay = calloc((size_t)o->reps * 3, sizeof(double)), *t_plain = calloc((size_t)o->reps, sizeof(double));
    double *h_replay = calloc((size_t)o->reps * 3, sizeof(double)), *h_plain = calloc((size_t)o->reps, sizeof(double));
    double *h_hand = calloc((size_t)o->reps * 3, sizeof(double));
    int first, last;
    void *buf[256];
    hn_dgraph *plain[256];
    hn_graph *graph = NULL;
    raw_job rj;
    hn_status_t st;
    char *why = NULL;
    int rc = 1;
    snprintf(text, sizeof(text), "param N = %d\nT = alloc f32[16]\nfor i in 0 .. N {\n  fill T <- 1.0\n}\n", o->n);
    memset(plain, 0, sizeof(plain));
    memset(&rj, 0, sizeof(rj));
    if (t_run == NULL || t_raw == NULL || t_launch == NULL || t_replay == NULL || t_plain == NULL ||
        h_replay == NULL || h_plain == NULL || h_hand == NULL ||
        hn_program_parse(text, strlen(text), "issue.hir", &p, NULL) != HN_OK)
        goto done;
    if ((st = hn_runtime_create_ex(&o->cfg, &rt, &why)) != HN_OK) {
        fprintf(stderr, "bench: cannot start %d rank%s: %s\n", o->cfg.ndev, o->cfg.ndev == 1 ? "" : "s", why != NULL ? why : hn_status_string(st));
        hn_string_free(why);
        goto done;
    }
    for (int r = 0; r < o->cfg.ndev; r++)
        if (hn_runtime_alloc(rt, r, 16 * sizeof(float), &buf[r]) != HN_OK)
            goto done;
    first = last = rt->replay;
    if (o->replay != NULL && strcmp(o->replay, "all") == 0) {
        first = 0;
        last = 2;
    } else if (o->replay != NULL) {
        for (int i = 0; i < 3; i++)
            if (strcmp(o->replay, paths[i]) == 0)
                first = last = i;
    }
    rj.n = o->n;
    rj.buf = buf;
    rj.plain = plain;
    if ((st = hn_runtime_capture(rt, p, &args, NULL, &graph)) != HN_OK ||
        (st = hn_runtime_exec_all(rt, plain_capture_on_rank, &rj)) != HN_OK)
        goto failed;
    fprintf(stderr, "bench issue: %d rank%s on the %s backend, %d instructions per run, %d repetitions\n",
            o->cfg.ndev, o->cfg.ndev == 1 ? "" : "s", hn_runtime_backend(rt), o->n, o->reps);
    for (int k = -o->warmup; k < o->reps; k++) {
        double t0 = hn_now(), t1, t2, t3;
        if ((st = hn_runtime_run(rt, p, &args)) != HN_OK)
            goto failed;
        t1 = hn_now();
        if ((st = hn_runtime_exec_all(rt, raw_on_rank, &rj)) != HN_OK)
            goto failed;
        t2 = hn_now();
        if ((st = hn_runtime_launch(rt, p, &args, NULL)) != HN_OK || (st = hn_runtime_launch(rt, p, &args, NULL)) != HN_OK ||
            (st = hn_runtime_sync(rt)) != HN_OK)
            goto failed;
        t3 = hn_now();
        if (k >= 0) {
            t_run[k] = t1 - t0;
            t_raw[k] = t2 - t1;
            t_launch[k] = (t3 - t2) / 2;
        }
        for (int path = first; path <= last; path++) {
            rt->replay = path;
            t0 = hn_now();
            for (int i = 0; i < REPLAYS && st == HN_OK; i++)
                st = hn_runtime_replay(rt, graph, NULL);
            t1 = hn_now();
            if (st != HN_OK || (st = hn_runtime_sync(rt)) != HN_OK)
                goto failed;
            t2 = hn_now();
            if (k >= 0) {
                t_replay[path * o->reps + k] = (t2 - t0) / REPLAYS;
                h_replay[path * o->reps + k] = (t1 - t0) / REPLAYS;
                h_hand[path * o->reps + k] = handoff_seconds(rt, path);
            }
        }
        t2 = hn_now();
        if ((st = plain_replays(rt, &rj, &h_plain[k >= 0 ? k : 0])) != HN_OK)
            goto failed;
        if (k >= 0)
            t_plain[k] = (hn_now() - t2) / REPLAYS;
    }
    {
        double run = hn_median(t_run, o->reps) / o->n * 1e6, raw = hn_median(t_raw, o->reps) / o->n * 1e6;
        double launch = hn_median(t_launch, o->reps) / o->n * 1e6;
        const char *fmt = o->markdown ? "| %d | %s | %d | %.3f | %.3f | %.3f | %.3f |\n"
                                      : "%5d  %-5s  %6d  %12.3f  %12.3f  %12.3f  %8.3f\n";
        if (o->markdown)
            printf("| ranks | backend | instructions | hirnode run µs/instr | hirnode launch µs/instr | plain loop µs/kernel "
                   "| run / plain |\n|---:|---|---:|---:|---:|---:|---:|\n");
        else
            printf("ranks  back   instrs  run us/instr  launch us/in  plain us/krn  run/plain\n");
        printf(fmt, o->cfg.ndev, hn_runtime_backend(rt), o->n, run, launch, raw, run / raw);
    }
    {
        double pl = hn_median(t_plain, o->reps) / o->n * 1e6, hp = hn_median(h_plain, o->reps) * 1e6;
        const char *fmt = o->markdown ? "| %d | %s | %d | %s | %.3f | %.3f | %.3f | %.2f | %.2f | %.2f |\n"
                                      : "%5d  %-5s  %6d  %-6s  %12.3f  %12.3f  %9.3f  %14.2f  %10.2f  %13.2f\n";
        if (o->markdown)
            printf("\n| ranks | backend | instructions | replay path | replay µs/instr | plain graph µs/kernel | "
                   "replay / plain | replay call host µs | handoff host µs | plain graph launches host µs |\n"
                   "|---:|---|---:|---|---:|---:|---:|---:|---:|---:|\n");
        else
            printf("ranks  back   instrs  path    replay us/in  plain g us/k  rep/plain  replay host us  "
                   "handoff us  plain host us\n");
        for (int path = first; path <= last; path++) {
            double replay = hn_median(t_replay + path * o->reps, o->reps) / o->n * 1e6;
            double hr = hn_median(h_replay + path * o->reps, o->reps) * 1e6;
            double hh = hn_median(h_hand + path * o->reps, o->reps) * 1e6;
            printf(fmt, o->cfg.ndev, hn_runtime_backend(rt), o->n, paths[path], replay, pl, replay / pl, hr, hh, hp);
        }
    }
    rc = 0;
    goto done;
failed:
    fprintf(stderr, "bench issue: %s\n%s\n", hn_status_string(st), hn_runtime_error(rt));
done:
    if (rt != NULL) {
        (void)hn_runtime_exec_all(rt, plain_free_on_rank, &rj);
        hn_runtime_graph_destroy(rt, graph);
        for (int r = 0; r < o->cfg.ndev; r++)
            hn_runtime_free(rt, r, buf[r]);
        hn_runtime_destroy(rt);
    }
    hn_program_destroy(p);
    free(t_run);
    free(t_raw);
    free(t_launch);
    free(t_replay);
    free(t_plain);
    free(h_replay);
    free(h_plain);
    free(h_hand);
    return rc;
}

int hn_cli_bench_issue(int argc, char **argv);

int hn_cli_bench_issue(int argc, char **argv)
{
    issue_opts o;
    const hn_option table[] = {
        HN_INT("--gpus", "N", &o.cfg.ndev, 1, 256, "ranks, one per device (default 1)"),
        HN_CHOICE("--backend", "auto|cuda|host", &o.cfg.backend, "the devices (default: $HIRNODE_BACKEND, else auto)"),
        HN_CALL("--devices", "LIST", hn_cli_take_devices, &o.devices,
                "the device ordinal of each rank, e.g. 0,0: two ranks on GPU 0"),
        HN_INT("--n", "INSTRUCTIONS", &o.n, 1, 10000000, "instructions per run (default 1000)"),
        HN_INT("--reps", "R", &o.reps, 1, 100000, "timed repetitions, the median is printed (default 20)"),
        HN_INT("--warmup", "W", &o.warmup, 0, 100000, "repetitions before timing (default 3)"),
        HN_FLAG("--markdown", &o.markdown, "the tables in Markdown"),
        HN_CHOICE("--replay", "bells|jobs|caller|all", &o.replay,
                  "how replays reach the ranks (default: $HIRNODE_REPLAY, else bells); all: each in turn"),
    };
    int nargs = 0, rc;
    hn_command c = {"hirnode bench issue", "", table, HN_ARRAY_LEN(table), NULL, 0, &nargs, NULL};
    memset(&o, 0, sizeof(o));
    hn_runtime_config_default(&o.cfg);
    o.n = 1000;
    o.reps = 20;
    o.warmup = 3;
    if ((rc = hn_cli_parse(&c, argc, argv, 3)) >= 0 || (rc = hn_cli_check_settings(&c)) >= 0)
        return rc;
    if (!hn_cli_use_devices(c.name, &o.devices, &o.cfg))
        return HN_EXIT_USAGE;
    return bench_issue(&o);
}
