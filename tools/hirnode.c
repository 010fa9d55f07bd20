/* The `hirnode` command: run, check, dump, info and tune.
 * Exit codes: 0 ok, 1 check failed or runtime error, 2 bad usage or bad program. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../src/runtime/tools.h"
#include "hirnode/runtime.h"

#include "launch.h"
#include "options.h"

int hn_cli_bench(int argc, char **argv); /* bench.c */
int hn_cli_trace(int argc, char **argv); /* trace.c */
int hn_cli_soak(int argc, char **argv);  /* soak.c */
int hn_cli_tune(int argc, char **argv);  /* tune.c */

/* The ranks of run, check and dump --lowered when --gpus does not say:
 * the host backend emulates any number, and 8 shows what one GPU cannot. */
#define DEFAULT_RANKS 8

static const char usage[] =
    "usage: hirnode <command> [options]\n"
    "\n"
    "commands:\n"
    "  run FILE                 run a program on every rank (8 unless --gpus says)\n"
    "  check FILE               parse and verify a program (a dry run of every rank)\n"
    "  dump FILE                print the program in canonical text\n"
    "  dump --lowered FILE      print it with its pipelined statements and stream-parallel\n"
    "                           loops lowered for a configuration\n"
    "  info                     version, backends, devices, the machine profile, effective settings\n"
    "                           (exit 2 when a HIRNODE_* variable is bad)\n"
    "  tune                     measure this machine for the cost model: writes its profile\n"
    "  bench collectives        busbw of collectives beside raw NCCL\n"
    "  bench overlap            pipelined GEMMs: every strategy and auto\n"
    "  bench issue              the cost of issuing one instruction beside a plain launch loop\n"
    "  trace summary FILE       busy time, overlap figure, critical path of a trace\n"
    "  trace svg FILE -o OUT    the timeline of a trace as a picture\n"
    "  soak                     launches and replays of a serving step: memory must stay flat\n"
    "\n"
    "hirnode COMMAND --help lists a command's options.\n"
    "Exit codes: 0 ok, 1 check failed or runtime error, 2 bad usage or bad program.\n"
    "Environment: HIRNODE_LOG=error|warn|info|debug|trace and the settings listed by\n"
    "`hirnode info`.\n";

typedef struct opts {
    hn_runtime_config cfg;
    const char *file;
    int check, iters, lowered;
    int64_t seed; /* --seed; -1: the configuration's (HIRNODE_SEED) */
    const char *load_dir, *save_dir;
    const char *fault; /* --fault SPEC */
    const char *trace;
    const char *names[64];
    int64_t values[64];
    int ndefs;
    hn_cli_devices devices; /* --devices */
} opts;

/* -D NAME=VAL: one parameter override more */
static int take_define(const char *value, void *dest, hn_strbuf *err)
{
    opts *o = dest;
    const char *eq = strchr(value, '=');
    hn_strbuf what;
    int64_t v;
    hn_status_t st;
    if (eq == NULL || eq == value) {
        hn_sb_printf(err, "-D: expected NAME=INTEGER, not '%s'", value);
        return 0;
    }
    if (o->ndefs == HN_ARRAY_LEN(o->names)) {
        hn_sb_printf(err, "-D: more than %d overrides", HN_ARRAY_LEN(o->names));
        return 0;
    }
    hn_sb_init(&what);
    hn_sb_printf(&what, "-D %.*s", (int)(eq - value), value);
    st = hn_parse_int64(what.data != NULL ? what.data : "-D", eq + 1, INT64_MIN, INT64_MAX, &v, err);
    hn_sb_free(&what);
    if (st != HN_OK)
        return 0;
    if ((o->names[o->ndefs] = hn_strndup(value, (size_t)(eq - value))) == NULL) {
        hn_sb_append(err, "-D: out of memory");
        return 0;
    }
    o->values[o->ndefs++] = v;
    return 1;
}

/* The options run, check and dump --lowered share: the configuration. */
#define CONFIG_OPTIONS(o)                                                                                      \
    HN_INT("--gpus", "N", &(o)->cfg.ndev, 1, 256, "ranks, one per device (default 8)"),                        \
        HN_INT("--streams", "S", &(o)->cfg.nstreams, 1, HN_MAX_STREAMS, "value of nstreams (default 3)"),      \
        HN_CALL("-D", "NAME=VAL", take_define, (o), "override a parameter (repeatable)")

static void init_opts(opts *o)
{
    memset(o, 0, sizeof(*o));
    hn_runtime_config_default(&o->cfg);
    o->cfg.ndev = DEFAULT_RANKS;
    o->iters = 1;
    o->seed = -1;
}

/* Parses a command's options and its one program file, and checks the
 * HIRNODE_* settings where the command reads them (run, check, dump
 * --lowered: settings = 1, or o->lowered); -1 to go on. */
static int parse_opts(const char *name, const hn_option *table, int n, int argc, char **argv, opts *o, int settings)
{
    const char *args[1];
    int nargs = 0, rc;
    hn_command c = {name, " FILE", table, n, args, 1, &nargs, NULL};
    if ((rc = hn_cli_parse(&c, argc, argv, 2)) >= 0)
        return rc;
    if (nargs == 0)
        return hn_cli_usage_error(&c, "which program? (%s FILE)", name);
    if ((settings || o->lowered) && (rc = hn_cli_check_settings(&c)) >= 0)
        return rc;
    o->file = args[0];
    return -1;
}

static void free_opts(opts *o)
{
    for (int i = 0; i < o->ndefs; i++)
        hn_free((char *)o->names[i]);
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

/* The first registered backend that is (emulated 1) or is not (0) emulated,
 * whatever its devices; NULL when the build has none. */
static const hn_device_ops *first_backend(int emulated)
{
    const hn_device_ops *const *all = hn_device_backends();
    for (int i = 0; all[i] != NULL; i++)
        if (!all[i]->emulated == !emulated)
            return all[i];
    return NULL;
}

/* The device backend a runtime of this configuration takes (as
 * hn_runtime_create picks it), for the profile its model reads; where a
 * runtime would refuse the configuration (an unknown backend, too few
 * devices), the backend it names, else the emulated one. */
static const hn_device_ops *backend_of(const hn_runtime_config *cfg)
{
    const hn_device_ops *d;
    hn_strbuf why;
    hn_sb_init(&why);
    d = hn_runtime_pick_backend(cfg, &why);
    hn_sb_free(&why);
    if (d == NULL && (d = hn_device_find(cfg->backend)) == NULL)
        d = first_backend(1);
    return d;
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
        st = hn_sched_lower(p, o->cfg.ndev, 1, o->cfg.nstreams, params, hn_profile_for(backend_of(&o->cfg), o->cfg.ndev),
                            &lp, &diag, notes);
    if (diag.data != NULL)
        fputs(diag.data, stderr);
    hn_sb_free(&diag);
    *rc = st == HN_OK ? HN_EXIT_OK : st == HN_ERR_NOMEM || st == HN_ERR_RUNTIME ? HN_EXIT_FAIL : HN_EXIT_USAGE;
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
    const hn_option table[] = {
        HN_FLAG("--lowered", &o.lowered, "print it with its pipelined statements and stream-parallel\n"
                                         "loops lowered for the configuration that --gpus, --streams\n"
                                         "and -D give"),
        CONFIG_OPTIONS(&o),
    };
    init_opts(&o);
    if ((rc = parse_opts("hirnode dump", table, HN_ARRAY_LEN(table), argc, argv, &o, 0)) >= 0) {
        free_opts(&o);
        return rc;
    }
    if ((p = load(o.file)) == NULL) {
        free_opts(&o);
        return HN_EXIT_USAGE;
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
        printf("# %s lowered for %d rank%s, nstreams = %d", o.file, o.cfg.ndev, o.cfg.ndev == 1 ? "" : "s",
               o.cfg.nstreams);
        for (int i = 0; i < p->nparams; i++)
            printf("%s %s = %lld", i ? "," : ";", p->names[p->params[i].var], (long long)params[i]);
        printf("\n");
        if (p->has_sched) {
            char what[700];
            hn_profile_describe(hn_profile_for(backend_of(&o.cfg), o.cfg.ndev), what, sizeof(what));
            printf("# the model's profile: %s\n", what);
        }
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
    return text != NULL ? HN_EXIT_OK : HN_EXIT_FAIL;
}

/* A program without instructions does nothing: said (on stderr), not
 * hidden behind an "ok". 1 when it said so. */
static int warn_empty(const char *file, const hn_program *p)
{
    if (p->body.n > 0)
        return 0;
    fprintf(stderr, "%s: warning: no instructions: the program does nothing\n", file);
    return 1;
}

static int cmd_check(int argc, char **argv)
{
    opts o;
    hn_program *p;
    int64_t *params;
    hn_strbuf diag;
    hn_status_t st;
    int rc;
    const hn_option table[] = {CONFIG_OPTIONS(&o)};
    init_opts(&o);
    if ((rc = parse_opts("hirnode check", table, HN_ARRAY_LEN(table), argc, argv, &o, 1)) >= 0) {
        free_opts(&o);
        return rc;
    }
    if ((p = load(o.file)) == NULL) {
        free_opts(&o);
        return HN_EXIT_USAGE;
    }
    hn_sb_init(&diag);
    params = calloc((size_t)p->nparams + 1, sizeof(int64_t));
    st = params == NULL ? HN_ERR_NOMEM
                        : hn_params_resolve(p, o.cfg.ndev, o.cfg.nstreams, o.ndefs, o.names, o.values,
                                            params, &diag);
    if (st == HN_OK && p->has_sched) { /* what runs is the lowered program */
        hn_program *lp = NULL;
        st = hn_sched_lower(p, o.cfg.ndev, 1, o.cfg.nstreams, params, hn_profile_for(backend_of(&o.cfg), o.cfg.ndev), &lp,
                            &diag, NULL);
        if (st == HN_OK) {
            hn_program_destroy(p);
            p = lp;
        }
    }
    if (st == HN_OK)
        st = hn_verify_run(p, o.cfg.ndev, o.cfg.nstreams, params, &diag, NULL);
    if (diag.data != NULL)
        fputs(diag.data, stderr);
    if (st == HN_OK && !warn_empty(o.file, p))
        printf("%s: ok (%d rank%s)\n", o.file, o.cfg.ndev, o.cfg.ndev == 1 ? "" : "s");
    hn_sb_free(&diag);
    free(params);
    hn_program_destroy(p);
    free_opts(&o);
    return st == HN_OK ? HN_EXIT_OK : HN_EXIT_USAGE;
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
    hn_cli_procs procs = {0};
    int rc;
    const hn_option table[] = {
        CONFIG_OPTIONS(&o),
        HN_PROCS_OPTIONS(&procs),
        HN_CHOICE("--backend", "auto|cuda|host", &o.cfg.backend,
                  "the devices (default: $HIRNODE_BACKEND, else auto: cuda when\n"
                  "the machine has enough GPUs, else host, a CPU emulation)"),
        HN_INT("--iters", "K", &o.iters, 1, 1000000, "runs to time (default 1); the median is printed"),
        HN_INT64("--seed", "X", &o.seed, 0, INT64_MAX, "seed of the generated inputs (default: $HIRNODE_SEED)"),
        HN_FLAG("--check", &o.check,
                "compare the outputs with the reference block: each output's\n"
                "relative L2 error ||out - ref|| / ||ref|| must be at most 1e-5\n"
                "(f32), 2e-3 (f16) or 1.6e-2 (bf16), 0 for integers; the largest\n"
                "absolute and relative element errors are shown beside it"),
        HN_TEXT("--load", "DIR", &o.load_dir, "read global inputs from DIR/<input>.npy"),
        HN_TEXT("--save", "DIR", &o.save_dir, "write gathered outputs to DIR/<output>.npy"),
        HN_DOUBLE("--delay", "US", &o.cfg.host_delay_us, 0, 1e6,
                  "host backend: random delay up to US microseconds\nbefore each piece of stream work"),
        HN_DOUBLE("--timeout", "S", &o.cfg.timeout_s, 0.001, 1e6, "seconds any wait may last (default 60)"),
        HN_TEXT("--fault", "SPEC", &o.fault,
                "inject faults: RANK:LINE[:OCCURRENCE]:KIND[:MS],... (docs/RELIABILITY.md);\n"
                "KIND issue, async, trap, comm, stop, slow[:MS], oom, skip (the rank\n"
                "does not issue that communication: its peers wait for it until\n"
                "the deadline; a graph is captured whole and the rank skips its\n"
                "replays), and with --procs kill, sigstop"),
        HN_TEXT("--trace", "FILE", &o.trace, "record every run: Chrome trace-event JSON (Perfetto)"),
        HN_CALL("--devices", "LIST", hn_cli_take_devices, &o.devices,
                "the device ordinal of each rank, e.g. 0,2,1,3 (default: rank r\non device r; "
                "CUDA_VISIBLE_DEVICES applies)"),
    };
    char *why = NULL;
    init_opts(&o);
    o.cfg.ndev = 0; /* --gpus not given: hn_cli_procs_setup says how many */
    if ((rc = parse_opts("hirnode run", table, HN_ARRAY_LEN(table), argc, argv, &o, 1)) >= 0 ||
        (rc = hn_cli_join_launcher("hirnode run", &procs, &o.cfg, &o.devices)) >= 0 ||
        (rc = hn_cli_procs_setup("hirnode run", &procs, &o.cfg, &o.devices, DEFAULT_RANKS)) >= 0) {
        free_opts(&o);
        return rc;
    }
    if (!hn_cli_use_devices("hirnode run", &o.devices, &o.cfg)) {
        free_opts(&o);
        return HN_EXIT_USAGE;
    }
    if ((p = load(o.file)) == NULL) {
        free_opts(&o);
        return HN_EXIT_USAGE;
    }
    if (o.cfg.world <= o.cfg.ndev) /* the launcher or a process of its own: not each worker again */
        warn_empty(o.file, p);
    if (procs.launcher) { /* a bad program is said once, here; the workers run it */
        hn_program_destroy(p);
        free_opts(&o);
        return hn_cli_launch("hirnode run", &procs, o.cfg.timeout_s, argv);
    }
    if ((st = hn_runtime_create_ex(&o.cfg, &rt, &why)) != HN_OK) {
        /* said here, once, without a source location */
        if (o.cfg.world > o.cfg.ndev)
            fprintf(stderr, "hirnode: rank %d of a world of %d processes cannot start: %s\n", o.cfg.rank, o.cfg.world,
                    why != NULL ? why : hn_status_string(st));
        else
            fprintf(stderr, "hirnode: cannot start %d rank%s: %s\n", o.cfg.ndev, o.cfg.ndev == 1 ? "" : "s", why != NULL ? why : hn_status_string(st));
        hn_string_free(why);
        hn_program_destroy(p);
        free_opts(&o);
        return st == HN_ERR_INVALID ? HN_EXIT_USAGE : HN_EXIT_FAIL;
    }
    hn_sb_init(&diag);
    if (o.fault != NULL && hn_runtime_set_faults(rt, o.fault, &diag) != HN_OK) {
        fputs(diag.data ? diag.data : "hirnode: bad --fault\n", stderr);
        hn_sb_free(&diag);
        hn_runtime_destroy(rt);
        hn_program_destroy(p);
        free_opts(&o);
        return HN_EXIT_USAGE;
    }
    if (o.trace != NULL && hn_runtime_trace_start(rt, o.trace) != HN_OK) {
        fprintf(stderr, "hirnode: %s\n", hn_runtime_error(rt));
        hn_sb_free(&diag);
        hn_runtime_destroy(rt);
        hn_program_destroy(p);
        free_opts(&o);
        return HN_EXIT_USAGE;
    }
    memset(&co, 0, sizeof(co));
    co.iters = o.iters;
    co.seed = o.seed >= 0 ? (uint64_t)o.seed : o.cfg.seed;
    co.check = o.check;
    co.load_dir = o.load_dir;
    co.save_dir = o.save_dir;
    co.noverrides = o.ndefs;
    co.names = o.names;
    co.values = o.values;
    co.out = stdout;
    st = hn_check_run(rt, p, &co, &res, &diag);
    /* a program's static errors are the same in every process (each
     * verifies the whole world): rank 0 says them, once */
    if (diag.data != NULL && !(st == HN_ERR_VERIFY && hn_runtime_first_rank(rt) > 0))
        fputs(diag.data, stderr);
    if (st == HN_OK) {
        printf("run %s: %d rank%s%s on the %s backend, %d iteration%s, median %.3f ms%s\n", o.file,
               hn_runtime_world(rt), hn_runtime_world(rt) == 1 ? "" : "s",
               hn_runtime_world(rt) > hn_runtime_size(rt) ? " (a process each)" : "",
               hn_runtime_backend(rt), o.iters, o.iters == 1 ? "" : "s", res.median_s * 1e3,
               hn_runtime_world(rt) > hn_runtime_size(rt) ? " (rank 0's)" : "");
        if (o.check)
            printf("check: %s (%d comparison%s)\n", res.passed ? "passed" : "FAILED", res.checked,
                   res.checked == 1 ? "" : "s");
        rc = o.check && !res.passed ? HN_EXIT_FAIL : HN_EXIT_OK;
    } else if (st == HN_ERR_VERIFY || st == HN_ERR_INVALID || st == HN_ERR_IO) {
        rc = HN_EXIT_USAGE;
    } else {
        const char *e = hn_runtime_error(rt);
        if (e && *e)
            fprintf(stderr, "%s\n", e);
        else if (diag.data == NULL) /* what failed is said above, when it is known */
            fprintf(stderr, "hirnode: %s\n", hn_status_string(st));
        rc = HN_EXIT_FAIL;
    }
    if (o.trace != NULL) {
        if (hn_runtime_trace_stop(rt) == HN_OK) {
            printf("trace: %s%s\n", o.trace,
                   hn_runtime_world(rt) > hn_runtime_size(rt) ? " (rank 0's; each other rank's in FILE.rankR)" : "");
        } else {
            fprintf(stderr, "hirnode: cannot write the trace to %s\n", o.trace);
            rc = rc == HN_EXIT_OK ? HN_EXIT_FAIL : rc;
        }
    }
    hn_sb_free(&diag);
    hn_runtime_destroy(rt);
    hn_program_destroy(p);
    free_opts(&o);
    return rc;
}

/* Which device each rank would use: the variable that renumbers the GPU
 * backend's ordinals (CUDA_VISIBLE_DEVICES), the ordinals it sees, the
 * mapping of --gpus N ranks (--devices). */
static void print_devices(opts *o, int gpus)
{
    const hn_device_ops *gpu = first_backend(0), *emu = first_backend(1);
    /* a build without a GPU backend (CUDA=0) still says what the variable
     * a GPU build reads is set to */
    const char *env = gpu != NULL && gpu->visible_env != NULL ? gpu->visible_env : "CUDA_VISIBLE_DEVICES";
    const char *visible = getenv(env);
    int count = gpu != NULL ? gpu->device_count() : 0;
    printf("devices:\n");
    if (visible != NULL)
        printf("  %s=%s: ordinals count these GPUs, in this order\n", env, visible);
    else
        printf("  %s not set: ordinals count every GPU the driver sees\n", env);
    if (gpu == NULL)
        printf("  this build has no GPU backend\n");
    else if (count > 0 || emu == NULL)
        printf("  %s sees %d device%s\n", gpu->name, count, count == 1 ? "" : "s");
    else
        printf("  %s sees 0 devices (runs use the %s backend)\n", gpu->name, emu->name);
    printf("  %d rank%s (--gpus%s):", o->cfg.ndev, o->cfg.ndev == 1 ? "" : "s", gpus ? "" : ": every GPU, or 1");
    for (int r = 0; r < o->cfg.ndev; r++) {
        int d = o->cfg.devices != NULL ? o->cfg.devices[r] : r;
        printf(" rank %d -> device %d%s", r, d, count > 0 && d >= count ? " (not present)" : "");
        if (r + 1 < o->cfg.ndev)
            printf(",");
    }
    printf("\n  (hn_runtime_config.devices, or --devices, maps ranks to other ordinals; on the host backend\n"
           "   every rank emulates a device of its own)\n");
}

/* Which profile a runtime of n devices of backend d uses; n 0: on GPUs
 * every GPU, on the host the count of the file HIRNODE_PROFILE names (when
 * it is a host profile), else 8 ranks (run's default). */
static void info_profile(const hn_device_ops *d, int n)
{
    char model[96], cuda[24], what[700];
    const char *named = hn_setting_get("profile");
    hn_profile_device_model(d, model, sizeof(model), cuda, sizeof(cuda));
    if (n <= 0 && !d->emulated)
        n = d->device_count();
    if (n <= 0) {
        hn_cost_profile *p = calloc(1, sizeof(*p));
        hn_strbuf why;
        hn_sb_init(&why);
        n = DEFAULT_RANKS;
        if (p != NULL && named != NULL && *named && hn_profile_read(named, model, 0, p, &why) == HN_OK)
            n = p->count;
        hn_sb_free(&why);
        free(p);
    }
    hn_profile_describe(hn_profile_get(d, model, n), what, sizeof(what));
    printf("  %-6s %d %s of %s: %s\n", d->name, n, d->emulated ? "ranks" : n == 1 ? "GPU" : "GPUs",
           model, what);
}

static int cmd_info(int argc, char **argv)
{
    const hn_device_ops *const *all = hn_device_backends();
    const hn_device_ops *gpu = first_backend(0);
    int nargs = 0, rc, gpus = 0, bad = 0;
    opts o;
    const hn_option table[] = {
        HN_INT("--gpus", "N", &gpus, 1, 256, "the devices and the profile of N ranks (default: every GPU;\n"
                                             "on the host backend 1 for the devices, and for the profile\n"
                                             "the count of the file HIRNODE_PROFILE names)"),
        HN_CALL("--devices", "LIST", hn_cli_take_devices, &o.devices, "... mapped to these ordinals, e.g. 1,0"),
    };
    hn_command c = {"hirnode info", "", table, HN_ARRAY_LEN(table), NULL, 0, &nargs, NULL};
    init_opts(&o);
    if ((rc = hn_cli_parse(&c, argc, argv, 2)) >= 0)
        return rc;
    if ((o.cfg.ndev = gpus) == 0) /* every GPU (or what --devices lists), else one */
        o.cfg.ndev = o.devices.n > 0 ? o.devices.n : gpu != NULL && gpu->device_count() > 0 ? gpu->device_count() : 1;
    if (!hn_cli_use_devices("hirnode info", &o.devices, &o.cfg))
        return HN_EXIT_USAGE;
    printf("hirnode %s\n", hn_version());
    printf("backends:\n");
    for (int i = 0; all[i] != NULL; i++) {
        int n = all[i]->device_count();
        if (all[i]->emulated)
            printf("  %-6s CPU emulation, any number of devices\n", all[i]->name);
        else
            printf("  %-6s %d device%s\n", all[i]->name, n, n == 1 ? "" : "s");
    }
    print_devices(&o, gpus > 0);
    printf("profile (the cost model's; hirnode tune measures one):\n");
    for (int i = 0; all[i] != NULL; i++)
        if (all[i]->emulated || all[i]->device_count() > 0)
            info_profile(all[i], gpus);
    printf("settings:\n");
    for (int i = 0; i < hn_settings_count(); i++) {
        const hn_setting *s = hn_setting_at(i);
        hn_strbuf why;
        hn_sb_init(&why);
        printf("  %-16s = %-6s  (%s) %s\n", s->name, hn_setting_get(s->name), s->env, s->help);
        if (hn_setting_check(s, &why) != HN_OK) {
            printf("  %-16s   bad: %s\n", "", why.data != NULL ? why.data : s->env);
            bad++;
        }
        hn_sb_free(&why);
    }
    if (bad == 0)
        return HN_EXIT_OK;
    /* said on stderr too: a script sees it, and the command fails */
    fprintf(stderr, "hirnode info: %d HIRNODE_* variable%s bad (marked above): a runtime will not start\n", bad,
            bad == 1 ? " is" : "s are");
    return HN_EXIT_USAGE;
}

int main(int argc, char **argv)
{
    static const char *const commands[] = {"run", "check", "dump", "info", "tune", "bench", "trace", "soak", "help"};
    const char *near;
    if (argc < 2) {
        fprintf(stderr, "hirnode: no command given\n%s", usage);
        return HN_EXIT_USAGE;
    }
    if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "help") == 0) {
        fputs(usage, stdout);
        return HN_EXIT_OK;
    }
    if (strcmp(argv[1], "--version") == 0) {
        printf("hirnode %s\n", hn_version());
        return HN_EXIT_OK;
    }
    if (strcmp(argv[1], "run") == 0)
        return cmd_run(argc, argv);
    if (strcmp(argv[1], "check") == 0)
        return cmd_check(argc, argv);
    if (strcmp(argv[1], "dump") == 0)
        return cmd_dump(argc, argv);
    if (strcmp(argv[1], "info") == 0)
        return cmd_info(argc, argv);
    if (strcmp(argv[1], "tune") == 0)
        return hn_cli_tune(argc, argv);
    if (strcmp(argv[1], "bench") == 0)
        return hn_cli_bench(argc, argv);
    if (strcmp(argv[1], "trace") == 0)
        return hn_cli_trace(argc, argv);
    if (strcmp(argv[1], "soak") == 0)
        return hn_cli_soak(argc, argv);
    near = hn_nearest_word(argv[1], strlen(argv[1]), commands, HN_ARRAY_LEN(commands));
    if (near != NULL)
        fprintf(stderr, "hirnode: unknown command '%s' \u2014 did you mean '%s'?\n", argv[1], near);
    else
        fprintf(stderr, "hirnode: unknown command '%s'\n", argv[1]);
    fprintf(stderr, "(hirnode --help lists the commands)\n");
    return HN_EXIT_USAGE;
}
