/* The `hirnode` command: run, check, dump and info.
 * Exit codes: 0 ok, 1 check failed or runtime error, 2 bad usage or bad program. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../src/sched/tools.h"
#include "hirnode/runtime.h"

enum { EXIT_OK = 0, EXIT_FAIL = 1, EXIT_USAGE = 2 };

int hn_cli_bench(int argc, char **argv); /* bench.c */
int hn_cli_trace(int argc, char **argv); /* trace.c */

static const char usage[] =
    "usage: hirnode <command> [options]\n"
    "\n"
    "commands:\n"
    "  run FILE      run a program on every rank\n"
    "  check FILE    parse and verify a program (a dry run of every rank)\n"
    "  dump FILE     print the program in canonical text\n"
    "  dump --lowered FILE [--gpus N] [--streams S] [-D NAME=VAL]\n"
    "                print it with its pipelined statements and stream-parallel\n"
    "                loops lowered for that configuration (default 8 ranks)\n"
    "  info          version, backends, devices, effective settings\n"
    "  bench collectives [options]   busbw of collectives beside raw NCCL\n"
    "  bench overlap [options]       pipelined GEMMs: every strategy and auto\n"
    "  bench issue [options]         the cost of issuing one instruction beside a plain launch loop\n"
    "                (hirnode bench collectives|overlap --help for their options)\n"
    "  trace summary FILE            busy time, overlap figure, critical path of a trace\n"
    "  trace svg FILE -o OUT.svg     the timeline of a trace as a picture\n"
    "\n"
    "run options:\n"
    "  --gpus N          ranks, one per device (default 1)\n"
    "  --backend B       auto, cuda or host (default: $HIRNODE_BACKEND or auto)\n"
    "  --streams S       value of nstreams (default 3)\n"
    "  -D NAME=VAL       override a parameter (repeatable)\n"
    "  --iters K         runs to time (default 1); the median is printed\n"
    "  --seed X          seed of the generated inputs\n"
    "  --check           compare the outputs with the reference block\n"
    "  --load DIR        read global inputs from DIR/<input>.npy\n"
    "  --save DIR        write gathered outputs to DIR/<output>.npy\n"
    "  --delay US        host backend: random delay up to US microseconds\n"
    "                    before each piece of stream work\n"
    "  --timeout S       seconds any wait may last (default 60)\n"
    "  --fault SPEC      inject faults: RANK:LINE[:OCCURRENCE]:KIND[:MS],... (docs/RELIABILITY.md)\n"
    "  --trace FILE      record every run: Chrome trace-event JSON (Perfetto)\n"
    "\n"
    "check options: --gpus N (default 8), --streams S, -D NAME=VAL\n"
    "environment: HIRNODE_LOG=error|warn|info|debug|trace and the settings\n"
    "listed by `hirnode info`\n";

typedef struct opts {
    hn_runtime_config cfg;
    const char *file;
    int check, iters, ngpus_set, lowered;
    uint64_t seed;
    const char *load_dir, *save_dir;
    const char *fault; /* --fault SPEC */
    const char *trace;
    const char *names[64];
    int64_t values[64];
    int ndefs;
} opts;

static int bad_usage(const char *fmt, const char *arg)
{
    fprintf(stderr, "hirnode: ");
    fprintf(stderr, fmt, arg);
    fprintf(stderr, "\n(see hirnode --help)\n");
    return EXIT_USAGE;
}

static int parse_int(const char *s, long long lo, long long hi, long long *out)
{
    char *end;
    long long v;
    if (s == NULL || *s == '\0')
        return 0;
    v = strtoll(s, &end, 0);
    if (*end != '\0' || v < lo || v > hi)
        return 0;
    *out = v;
    return 1;
}

static int parse_opts(int argc, char **argv, opts *o, int allow_run_opts)
{
    for (int i = 2; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        long long n;
        if (strcmp(a, "--gpus") == 0) {
            if (!parse_int(v, 1, 256, &n))
                return bad_usage("--gpus needs a number from 1 to 256, not '%s'", v ? v : "");
            o->cfg.ndev = (int)n;
            o->ngpus_set = 1;
            i++;
        } else if (strcmp(a, "--streams") == 0) {
            if (!parse_int(v, 1, HN_MAX_STREAMS, &n))
                return bad_usage("--streams needs a number from 1 to 16, not '%s'", v ? v : "");
            o->cfg.nstreams = (int)n;
            i++;
        } else if (strcmp(a, "-D") == 0 || strncmp(a, "-D", 2) == 0) {
            const char *def = strcmp(a, "-D") == 0 ? v : a + 2;
            const char *eq = def ? strchr(def, '=') : NULL;
            if (eq == NULL || eq == def || !parse_int(eq + 1, INT64_MIN, INT64_MAX, &n))
                return bad_usage("-D needs NAME=INTEGER, not '%s'", def ? def : "");
            if (o->ndefs == 64)
                return bad_usage("too many -D options%s", "");
            o->names[o->ndefs] = strndup(def, (size_t)(eq - def));
            o->values[o->ndefs++] = n;
            if (strcmp(a, "-D") == 0)
                i++;
        } else if (allow_run_opts && strcmp(a, "--backend") == 0 && v) {
            o->cfg.backend = v;
            i++;
        } else if (allow_run_opts && strcmp(a, "--iters") == 0) {
            if (!parse_int(v, 1, 1000000, &n))
                return bad_usage("--iters needs a positive number, not '%s'", v ? v : "");
            o->iters = (int)n;
            i++;
        } else if (allow_run_opts && strcmp(a, "--seed") == 0) {
            if (!parse_int(v, 0, INT64_MAX, &n))
                return bad_usage("--seed needs a number, not '%s'", v ? v : "");
            o->seed = (uint64_t)n;
            i++;
        } else if (allow_run_opts && strcmp(a, "--delay") == 0) {
            char *end;
            double d = v ? strtod(v, &end) : -1;
            if (v == NULL || *end != '\0' || d < 0)
                return bad_usage("--delay needs microseconds, not '%s'", v ? v : "");
            o->cfg.host_delay_us = d;
            i++;
        } else if (allow_run_opts && strcmp(a, "--timeout") == 0) {
            char *end;
            double d = v ? strtod(v, &end) : -1;
            if (v == NULL || *end != '\0' || d <= 0)
                return bad_usage("--timeout needs seconds, not '%s'", v ? v : "");
            o->cfg.timeout_s = d;
            i++;
        } else if (strcmp(argv[1], "dump") == 0 && strcmp(a, "--lowered") == 0) {
            o->lowered = 1;
        } else if (allow_run_opts && strcmp(a, "--check") == 0) {
            o->check = 1;
        } else if (allow_run_opts && strcmp(a, "--load") == 0 && v) {
            o->load_dir = v;
            i++;
        } else if (allow_run_opts && strcmp(a, "--save") == 0 && v) {
            o->save_dir = v;
            i++;
        } else if (allow_run_opts && strcmp(a, "--fault") == 0 && v) {
            o->fault = v;
            i++;
        } else if (allow_run_opts && strcmp(a, "--trace") == 0) {
            if (v == NULL || *v == '\0')
                return bad_usage("--trace needs a file%s", "");
            o->trace = v;
            i++;
        } else if (a[0] == '-') {
            return bad_usage("unknown option '%s'", a);
        } else if (o->file == NULL) {
            o->file = a;
        } else {
            return bad_usage("unexpected argument '%s'", a);
        }
    }
    if (o->file == NULL)
        return bad_usage("%s needs a program file", argv[1]);
    return EXIT_OK;
}

static void free_opts(opts *o)
{
    for (int i = 0; i < o->ndefs; i++)
        free((char *)o->names[i]);
}

static hn_program *load(const char *file)
{
    hn_program *p = NULL;
    char *diag = NULL;
    if (hn_program_load(file, &p, &diag) != HN_OK) {
        fputs(diag != NULL && *diag ? diag : "hirnode: cannot load the program\n", stderr);
        p = NULL;
    }
    hn_string_free(diag);
    return p;
}

/* The program lowered for the configuration of `o` (a copy of p when it
 * has nothing to lower); NULL after printing why. Plans into notes. */
static hn_program *lowered(const opts *o, hn_program *p, int64_t **params_out, hn_strbuf *notes, int *rc)
{
    int64_t *params = calloc((size_t)p->nparams + 1, sizeof(int64_t));
    hn_program *lp = NULL;
    hn_strbuf diag;
    hn_status_t st;
    hn_sb_init(&diag);
    st = params == NULL ? HN_ERR_NOMEM
                        : hn_params_resolve(p, o->cfg.ndev, o->cfg.nstreams, o->ndefs, o->names, o->values, params,
                                            &diag);
    if (st == HN_OK)
        st = hn_sched_lower(p, o->cfg.ndev, o->cfg.nstreams, params, &lp, &diag, notes);
    if (diag.data != NULL)
        fputs(diag.data, stderr);
    hn_sb_free(&diag);
    *rc = st == HN_OK ? EXIT_OK : st == HN_ERR_NOMEM || st == HN_ERR_RUNTIME ? EXIT_FAIL : EXIT_USAGE;
    if (st != HN_OK) {
        free(params);
        return NULL;
    }
    *params_out = params;
    return lp;
}

static int cmd_dump(int argc, char **argv)
{
    opts o;
    hn_program *p, *lp = NULL;
    int64_t *params = NULL;
    hn_strbuf notes;
    char *text;
    int rc;
    memset(&o, 0, sizeof(o));
    hn_runtime_config_default(&o.cfg);
    o.cfg.ndev = 8;
    if ((rc = parse_opts(argc, argv, &o, 0)) != EXIT_OK) {
        free_opts(&o);
        return rc;
    }
    if ((p = load(o.file)) == NULL) {
        free_opts(&o);
        return EXIT_USAGE;
    }
    hn_sb_init(&notes);
    if (o.lowered && (lp = lowered(&o, p, &params, &notes, &rc)) == NULL) {
        hn_sb_free(&notes);
        hn_program_destroy(p);
        free_opts(&o);
        return rc;
    }
    if (o.lowered) {
        /* comments: the parser reads the program back without them */
        printf("# %s lowered for %d ranks, nstreams = %d", o.file, o.cfg.ndev, o.cfg.nstreams);
        for (int i = 0; i < p->nparams; i++)
            printf("%s %s = %lld", i ? "," : ";", p->names[p->params[i].var], (long long)params[i]);
        printf("\n");
        for (char *line = notes.data; line != NULL && *line;) {
            char *nl = strchr(line, '\n');
            printf("# %.*s\n", nl ? (int)(nl - line) : (int)strlen(line), line);
            line = nl ? nl + 1 : NULL;
        }
    }
    text = hn_program_print(lp != NULL ? lp : p);
    if (text != NULL)
        fputs(text, stdout);
    hn_string_free(text);
    hn_sb_free(&notes);
    hn_program_destroy(lp);
    hn_program_destroy(p);
    free(params);
    free_opts(&o);
    return text != NULL ? EXIT_OK : EXIT_FAIL;
}

static int cmd_check(int argc, char **argv)
{
    opts o;
    hn_program *p;
    int64_t *params;
    hn_strbuf diag;
    hn_status_t st;
    int rc;
    memset(&o, 0, sizeof(o));
    hn_runtime_config_default(&o.cfg);
    o.cfg.ndev = 8;
    if ((rc = parse_opts(argc, argv, &o, 0)) != EXIT_OK) {
        free_opts(&o);
        return rc;
    }
    if ((p = load(o.file)) == NULL) {
        free_opts(&o);
        return EXIT_USAGE;
    }
    hn_sb_init(&diag);
    params = calloc((size_t)p->nparams + 1, sizeof(int64_t));
    st = params == NULL ? HN_ERR_NOMEM
                        : hn_params_resolve(p, o.cfg.ndev, o.cfg.nstreams, o.ndefs, o.names, o.values,
                                            params, &diag);
    if (st == HN_OK && p->has_sched) { /* what runs is the lowered program */
        hn_program *lp = NULL;
        st = hn_sched_lower(p, o.cfg.ndev, o.cfg.nstreams, params, &lp, &diag, NULL);
        if (st == HN_OK) {
            hn_program_destroy(p);
            p = lp;
        }
    }
    if (st == HN_OK)
        st = hn_verify_run(p, o.cfg.ndev, o.cfg.nstreams, params, &diag, NULL);
    if (diag.data != NULL)
        fputs(diag.data, stderr);
    if (st == HN_OK)
        printf("%s: ok (%d ranks)\n", o.file, o.cfg.ndev);
    hn_sb_free(&diag);
    free(params);
    hn_program_destroy(p);
    free_opts(&o);
    return st == HN_OK ? EXIT_OK : EXIT_USAGE;
}

static int cmd_run(int argc, char **argv)
{
    opts o;
    hn_program *p = NULL;
    hn_runtime *rt = NULL;
    hn_check_opts co;
    hn_check_result res;
    hn_strbuf diag;
    hn_status_t st;
    int rc;
    memset(&o, 0, sizeof(o));
    hn_runtime_config_default(&o.cfg);
    o.iters = 1;
    o.seed = o.cfg.seed;
    if ((rc = parse_opts(argc, argv, &o, 1)) != EXIT_OK) {
        free_opts(&o);
        return rc;
    }
    if ((p = load(o.file)) == NULL) {
        free_opts(&o);
        return EXIT_USAGE;
    }
    if ((st = hn_runtime_create(&o.cfg, &rt)) != HN_OK) {
        fprintf(stderr, "hirnode: cannot start %d ranks on the '%s' backend: %s\n", o.cfg.ndev,
                o.cfg.backend ? o.cfg.backend : "auto", hn_status_string(st));
        hn_program_destroy(p);
        free_opts(&o);
        return st == HN_ERR_INVALID ? EXIT_USAGE : EXIT_FAIL;
    }
    hn_sb_init(&diag);
    if (o.fault != NULL && hn_runtime_set_faults(rt, o.fault, &diag) != HN_OK) {
        fputs(diag.data ? diag.data : "hirnode: bad --fault\n", stderr);
        hn_sb_free(&diag);
        hn_runtime_destroy(rt);
        hn_program_destroy(p);
        free_opts(&o);
        return EXIT_USAGE;
    }
    if (o.trace != NULL && hn_runtime_trace_start(rt, o.trace) != HN_OK) {
        fprintf(stderr, "hirnode: cannot write a trace to %s\n", o.trace);
        hn_sb_free(&diag);
        hn_runtime_destroy(rt);
        hn_program_destroy(p);
        free_opts(&o);
        return EXIT_USAGE;
    }
    memset(&co, 0, sizeof(co));
    co.iters = o.iters;
    co.seed = o.seed;
    co.check = o.check;
    co.load_dir = o.load_dir;
    co.save_dir = o.save_dir;
    co.noverrides = o.ndefs;
    co.names = o.names;
    co.values = o.values;
    co.out = stdout;
    st = hn_check_run(rt, p, &co, &res, &diag);
    if (diag.data != NULL)
        fputs(diag.data, stderr);
    if (st == HN_OK) {
        printf("run %s: %d ranks on the %s backend, %d iteration%s, median %.3f ms\n", o.file,
               hn_runtime_size(rt), hn_runtime_backend(rt), o.iters, o.iters == 1 ? "" : "s",
               res.median_s * 1e3);
        if (o.check)
            printf("check: %s (%d comparison%s)\n", res.passed ? "passed" : "FAILED", res.checked,
                   res.checked == 1 ? "" : "s");
        rc = o.check && !res.passed ? EXIT_FAIL : EXIT_OK;
    } else if (st == HN_ERR_VERIFY || st == HN_ERR_INVALID || st == HN_ERR_IO) {
        rc = EXIT_USAGE;
    } else {
        const char *e = hn_runtime_error(rt);
        if (e && *e)
            fprintf(stderr, "%s\n", e);
        else if (diag.data == NULL) /* what failed is said above, when it is known */
            fprintf(stderr, "hirnode: %s\n", hn_status_string(st));
        rc = EXIT_FAIL;
    }
    if (o.trace != NULL) {
        if (hn_runtime_trace_stop(rt) == HN_OK) {
            printf("trace: %s\n", o.trace);
        } else {
            fprintf(stderr, "hirnode: cannot write the trace to %s\n", o.trace);
            rc = rc == EXIT_OK ? EXIT_FAIL : rc;
        }
    }
    hn_sb_free(&diag);
    hn_runtime_destroy(rt);
    hn_program_destroy(p);
    free_opts(&o);
    return rc;
}

static int cmd_info(void)
{
    const hn_device_ops *const *all = hn_device_backends();
    printf("hirnode %s\n", hn_version());
    printf("backends:\n");
    for (int i = 0; all[i] != NULL; i++) {
        int n = all[i]->device_count();
        if (strcmp(all[i]->name, "host") == 0)
            printf("  %-6s CPU emulation, any number of devices\n", all[i]->name);
        else
            printf("  %-6s %d device%s\n", all[i]->name, n, n == 1 ? "" : "s");
    }
    printf("settings:\n");
    for (int i = 0; i < hn_settings_count(); i++) {
        const hn_setting *s = hn_setting_at(i);
        printf("  %-14s = %-6s  (%s) %s\n", s->name, hn_setting_get(s->name), s->env, s->help);
    }
    return EXIT_OK;
}

int main(int argc, char **argv)
{
    if (argc < 2)
        return bad_usage("%s", "no command given");
    if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "help") == 0) {
        fputs(usage, stdout);
        return EXIT_OK;
    }
    if (strcmp(argv[1], "--version") == 0) {
        printf("hirnode %s\n", hn_version());
        return EXIT_OK;
    }
    if (strcmp(argv[1], "run") == 0)
        return cmd_run(argc, argv);
    if (strcmp(argv[1], "check") == 0)
        return cmd_check(argc, argv);
    if (strcmp(argv[1], "dump") == 0)
        return cmd_dump(argc, argv);
    if (strcmp(argv[1], "info") == 0)
        return cmd_info();
    if (strcmp(argv[1], "bench") == 0)
        return hn_cli_bench(argc, argv);
    if (strcmp(argv[1], "trace") == 0)
        return hn_cli_trace(argc, argv);
    return bad_usage("unknown command '%s'", argv[1]);
}
