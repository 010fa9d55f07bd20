/* `hirnode tune`: measures this machine for the cost model (the measuring
 * is src/runtime/tune.c), with a progress bar on stderr, writes the profile
 * file and says what it found: the model's fit and its error on every
 * pipeline measured. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../src/runtime/tools.h"
#include "hirnode/runtime.h"

#include "options.h"

int hn_cli_tune(int argc, char **argv);

typedef struct tune_cli {
    hn_tune_opts t;
    const char *out, *size, *backend, *refit;
    int tty;
    int width; /* of the last line drawn */
} tune_cli;

/* A bar redrawn in place on a terminal; elsewhere one line per step. */
static void progress(void *ctx, int step, int nsteps, const char *what)
{
    tune_cli *c = ctx;
    if (!c->tty) {
        fprintf(stderr, "tune: [%d/%d] %s\n", step, nsteps, what);
        return;
    }
    {
        int filled = nsteps > 0 ? 30 * (step - 1) / nsteps : 0, w;
        char bar[31];
        memset(bar, '#', (size_t)filled);
        memset(bar + filled, '.', (size_t)(30 - filled));
        bar[30] = '\0';
        w = fprintf(stderr, "\rtune [%s] %d/%d %.60s", bar, step, nsteps, what);
        if (w < c->width)
            fprintf(stderr, "%*s", c->width - w, "");
        c->width = w;
        if (step == nsteps)
            fprintf(stderr, "\n");
    }
}

static int take_shapes(const char *value, void *dest, hn_strbuf *err)
{
    hn_tune_opts *t = dest;
    return hn_cli_shapes(value, "--shapes", t->shapes, HN_COST_MAX_SHAPES, &t->nshapes, err);
}

/* mkdir -p of the folder that will hold `path` */
static int make_folders(const char *path)
{
    char dir[512];
    snprintf(dir, sizeof(dir), "%s", path);
    for (char *s = dir + 1; *s != '\0'; s++) {
        if (*s != '/')
            continue;
        *s = '\0';
        if (mkdir(dir, 0777) != 0 && errno != EEXIST)
            return 0;
        *s = '/';
    }
    return 1;
}

/* Written whole or not at all: a temporary file beside it, renamed; and
 * only what reads back (never a profile every runtime would refuse). */
static int write_profile(const char *path, const hn_cost_profile *p)
{
    char tmp[600];
    hn_strbuf sb, why;
    hn_cost_profile *back = malloc(sizeof(*back));
    FILE *f;
    int ok;
    hn_sb_init(&sb);
    hn_sb_init(&why);
    hn_profile_write(p, &sb);
    if (back == NULL || sb.failed || hn_profile_parse(sb.data, sb.len, p->model, p->count, back, &why) != HN_OK) {
        fprintf(stderr, "hirnode tune: internal: the profile does not read back: %s\n",
                why.data != NULL ? why.data : "out of memory");
        errno = EINVAL;
        free(back);
        hn_sb_free(&why);
        hn_sb_free(&sb);
        return 0;
    }
    free(back);
    hn_sb_free(&why);
    snprintf(tmp, sizeof(tmp), "%s.tmp%ld", path, (long)getpid());
    ok = !sb.failed && make_folders(path) && (f = fopen(tmp, "w")) != NULL;
    if (ok) {
        ok = fwrite(sb.data, 1, sb.len, f) == sb.len;
        ok = fclose(f) == 0 && ok;
        ok = ok && rename(tmp, path) == 0;
        if (!ok)
            remove(tmp);
    }
    hn_sb_free(&sb);
    return ok;
}

/* What was found, and the model's error on each pipeline measured. */
static void summary(const hn_cost_profile *p, const char *path)
{
    static const char *const ops[] = {"ag_matmul", "matmul_rs", "matmul_ar"};
    static const char *const traffic[] = {"copy engines", "NCCL", "latency path", "SM reductions"};
    double worst = 0;
    printf("profile: %s\nmachine: %s x%d (%s backend), driver %s, CUDA %s, NCCL %s, %s, hirnode %s\n", path, p->model,
           p->count, p->backend, p->driver, p->cuda, p->nccl, p->date, p->hirnode);
    for (int d = 0; d < HN_COST_NDTYPES; d++)
        printf("GEMM %-4s %.4g TFLOP/s at 1e12 flop, rate ~ flop^%+.4f\n", d == 0 ? "bf16" : d == 1 ? "f16" : "f32",
               p->gemm_tflops_at_1t[d], -p->gemm_gamma[d]);
    printf("a chunk more %.2f us, a stream more %.2f us, local copies %.0f GB/s\n", p->coef.chunk_s * 1e6,
           p->coef.stream_s * 1e6, p->hbm_bytes_per_s / 1e9);
    /* a shape's splits on one line */
    for (int i = 0; i < p->nsplits; i++) {
        const hn_cost_split_point *q = &p->splits[i];
        int first = i == 0 || q->M != q[-1].M || q->K != q[-1].K || q->N != q[-1].N;
        int last = i + 1 == p->nsplits || q->M != q[1].M || q->K != q[1].K || q->N != q[1].N;
        if (first)
            printf("GEMM %lldx%lldx%lld in chunks, time over the whole:", (long long)q->M, (long long)q->K,
                   (long long)q->N);
        printf(" %d on %d stream%s %.3f%s", q->chunks, q->streams, q->streams > 1 ? "s" : "", q->ratio,
               last ? "\n" : ",");
    }
    /* interference: GEMM seconds lost per second of traffic beside it, that
     * is the share of its speed lost while they overlap; at 1 and above,
     * overlapping the two gains nothing over running them in turn */
    printf("while traffic overlaps it, a GEMM loses this share of its speed (100 %%: overlapping gains nothing):");
    for (int k = 0; k < HN_TRAFFIC_COUNT; k++) {
        double i = p->interference[k];
        printf("%s %s ", k > 0 ? "," : "", traffic[k]);
        if (i < 0)
            printf("not measured");
        else if (i <= 1)
            printf("%.0f %%", i * 100);
        else
            printf("100 %% (together %.2f s slower per s of traffic than in turn)", i - 1);
    }
    printf("\nkappa gather %.4g / %.4g, reduce %.4g / %.4g (NCCL / copy engines); tau gather %.2f / %.2f us, reduce "
           "%.2f / %.2f us; sequential %.2f us\n",
           p->coef.kappa[0][0], p->coef.kappa[0][1], p->coef.kappa[1][0], p->coef.kappa[1][1], p->coef.tau_s[0][0] * 1e6,
           p->coef.tau_s[0][1] * 1e6, p->coef.tau_s[1][0] * 1e6, p->coef.tau_s[1][1] * 1e6, p->coef.seq_overhead_s * 1e6);
    printf("%d collective curves, %d pipelines measured%s\n", p->ncurves, p->npipes,
           p->count < 2 ? " (one device: communication from the built-in default)" : "");
    if (p->npipes > 0)
        printf("%-10s %-22s %-26s %10s %10s %8s\n", "op", "M x K x N", "variant", "ms", "model ms", "error");
    for (int i = 0; i < p->npipes; i++) {
        const hn_cost_point *q = &p->pipes[i];
        hn_pipe_shape sh = {q->kind, q->M, q->K, q->N, HN_BF16, q->world, p};
        hn_pipe_plan pl = {q->strategy, q->strategy == HN_STRAT_RING ? q->world : q->chunks,
                           q->strategy == HN_STRAT_SEQUENTIAL ? 1 : 2, q->p2p ? HN_VIA_P2P : HN_VIA_NCCL,
                           q->p2p ? (q->get ? HN_ALGO_PULL : HN_ALGO_PUSH) : HN_ALGO_AUTO, 0, HN_VIA_AUTO,
                           HN_ALGO_AUTO};
        double meas = 2.0 * q->M * q->N * q->K / (q->gemm_tflops * 1e12) / q->ratio, model = hn_pipe_seconds(&sh, &pl);
        char shape[48], variant[48];
        snprintf(shape, sizeof(shape), "%lldx%lldx%lld", (long long)q->M, (long long)q->K, (long long)q->N);
        snprintf(variant, sizeof(variant), "%s %s%s", hn_strategy_name(q->strategy),
                 q->p2p ? "p2p " : "nccl", q->p2p ? (q->get ? "get" : "put") : "");
        printf("%-10s %-22s %-26s %10.4f %10.4f %+7.1f%%\n", ops[q->kind <= HN_PIPE_MM_AR ? q->kind : 0], shape, variant,
               meas * 1e3, model * 1e3, (model / meas - 1) * 100);
        worst = fmax(worst, fabs(model / meas - 1));
    }
    if (p->npipes > 0)
        printf("the model's largest error on these pipelines: %.1f%%\n", worst * 100);
}

/* --refit FILE: the profile read whole, the model fitted to what it
 * holds, written back (or to -o) and summed up; nothing measured. */
static int refit(const tune_cli *c)
{
    hn_cost_profile *p = calloc(1, sizeof(*p));
    hn_strbuf why;
    const char *path = c->out != NULL ? c->out : c->refit;
    int rc = HN_EXIT_OK;
    if (c->t.cfg.ndev > 0 || c->backend != NULL || c->size != NULL || c->t.nshapes > 0) {
        fprintf(stderr, "hirnode tune: --refit measures nothing: it takes no --gpus, --backend, --size or --shapes\n");
        free(p);
        return HN_EXIT_USAGE;
    }
    if (p == NULL) {
        fprintf(stderr, "hirnode tune: out of memory\n");
        return HN_EXIT_FAIL;
    }
    hn_sb_init(&why);
    if (hn_profile_read(c->refit, NULL, 0, p, &why) != HN_OK) {
        fprintf(stderr, "hirnode tune: --refit %s: %s\n", c->refit, why.data != NULL ? why.data : "out of memory");
        rc = HN_EXIT_FAIL;
    } else {
        hn_tune_fit(p);
        if (!write_profile(path, p)) {
            fprintf(stderr, "hirnode tune: cannot write %s: %s\n", path, strerror(errno));
            rc = HN_EXIT_FAIL;
        } else {
            snprintf(p->source, sizeof(p->source), "%s", path);
            summary(p, path);
        }
    }
    hn_sb_free(&why);
    free(p);
    return rc;
}

static const char tune_more[] =
    "Measures GEMM rates, chunk and stream costs, local copies, a GEMM beside other traffic,\n"
    "the collectives' curves and hirnode's pipelines, then fits the cost model to them\n"
    "(docs/SCHEDULER.md \"The machine profile\"). Progress on stderr, the summary on stdout.\n"
    "The default file is read by every runtime of N GPUs of this model; on the host backend\n"
    "a profile is read only where HIRNODE_PROFILE names it. --refit refits a profile's model\n"
    "to the measurements it holds (after a change to the model), measuring nothing.\n";

int hn_cli_tune(int argc, char **argv)
{
    tune_cli c;
    hn_cost_profile *p = NULL;
    const hn_device_ops *d;
    hn_strbuf err;
    char path[512];
    const char *sizes = "auto|gpu|host|tiny";
    int rc, nargs = 0, gpus_given = 0;
    hn_status_t st;
    const hn_option table[] = {
        HN_INT("--gpus", "N", &c.t.cfg.ndev, 1, 256, "devices to measure (default: every GPU, 1 on the host backend)"),
        HN_CHOICE("--backend", "auto|cuda|host", &c.backend, "the devices (default: $HIRNODE_BACKEND, else auto)"),
        HN_TEXT("-o", "FILE", &c.out, "the profile to write (default: the file of this GPU model and count,\n"
                                      "$XDG_CACHE_HOME/hirnode/profile-<model>-x<N>.json)"),
        HN_CALL("--shapes", "MxKxN[,MxKxN...]", take_shapes, &c.t,
                "the pipelines' shapes (default 32768x16384x8192,16384x8192x8192,4096x8192x8192;\n"
                "256x128x64,128x128x128 on the host backend)"),
        HN_CHOICE("--size", sizes, &c.size, "how big the measurements are (default by backend; tiny: the least\n"
                                            "that takes every step, for tests)"),
        HN_TEXT("--refit", "FILE", &c.refit, "measure nothing: fit this hirnode's model to the measurements a\n"
                                             "profile holds, and write it back (or where -o says)"),
    };
    hn_command cmd = {"hirnode tune", "", table, HN_ARRAY_LEN(table), NULL, 0, &nargs, tune_more};
    memset(&c, 0, sizeof(c));
    hn_runtime_config_default(&c.t.cfg);
    c.t.cfg.ndev = 0;
    c.backend = NULL;
    if ((rc = hn_cli_parse(&cmd, argc, argv, 2)) >= 0)
        return rc;
    if (c.refit != NULL)
        return refit(&c);
    gpus_given = c.t.cfg.ndev > 0;
    if (c.backend != NULL)
        c.t.cfg.backend = c.backend;
    if (!gpus_given) { /* every device of the backend a runtime of one rank takes; 1 when emulated */
        hn_strbuf why;
        int n;
        c.t.cfg.ndev = 1;
        hn_sb_init(&why);
        d = hn_runtime_pick_backend(&c.t.cfg, &why);
        hn_sb_free(&why);
        n = d != NULL && !d->emulated ? d->device_count() : 0;
        c.t.cfg.ndev = n > 0 ? n : 1;
    }
    if (c.size != NULL)
        c.t.size = strcmp(c.size, "gpu") == 0    ? HN_TUNE_GPU
                   : strcmp(c.size, "host") == 0 ? HN_TUNE_HOST
                   : strcmp(c.size, "tiny") == 0 ? HN_TUNE_TINY
                                                 : HN_TUNE_AUTO;
    c.tty = isatty(2);
    c.t.progress = progress;
    c.t.progress_ctx = &c;
    if ((p = calloc(1, sizeof(*p))) == NULL) {
        fprintf(stderr, "hirnode tune: out of memory\n");
        return HN_EXIT_FAIL;
    }
    hn_sb_init(&err);
    st = hn_tune(&c.t, p, &err);
    if (st != HN_OK) {
        fprintf(stderr, "%shirnode tune: %s\n", c.width > 0 ? "\n" : "", err.data != NULL ? err.data : hn_status_string(st));
        hn_sb_free(&err);
        free(p);
        return st == HN_ERR_INVALID ? HN_EXIT_USAGE : HN_EXIT_FAIL;
    }
    hn_sb_free(&err);
    if (c.out != NULL)
        snprintf(path, sizeof(path), "%s", c.out);
    else if (!hn_profile_default_path(p->model, p->count, path, sizeof(path))) {
        fprintf(stderr, "hirnode tune: neither XDG_CACHE_HOME nor HOME is set: say where with -o FILE\n");
        free(p);
        return HN_EXIT_USAGE;
    }
    if (!write_profile(path, p)) {
        fprintf(stderr, "hirnode tune: cannot write %s: %s\n", path, strerror(errno));
        free(p);
        return HN_EXIT_FAIL;
    }
    snprintf(p->source, sizeof(p->source), "%s", path);
    summary(p, path);
    if ((d = hn_device_find(p->backend)) != NULL && d->emulated) /* it has no default file */
        printf("the host backend reads it where HIRNODE_PROFILE=%s\n", path);
    free(p);
    return HN_EXIT_OK;
}
