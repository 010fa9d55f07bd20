/* Injected faults through the whole stack (HIRNODE_FAULT, src/base/fault.c,
 * set off by src/exec/eval.c): every kind at sampled instructions of
 * every example at 1, 2, 4 and 8 ranks on the host backend. Each faulted
 * run must end within its deadline with an error naming the rank and the
 * instruction (a slow rank must still pass), the next run on the same
 * runtime must pass --check, a lost device must be refused plainly, and
 * no thread may be left behind. The ASan build of `make test` adds "no
 * leak". Seeded; the sample size is printed. */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hirnode/runtime.h"
#include "runtime/check.h"
#include "exec/fault_inject.h"
#include "../test.h"

#define SAMPLES_PER_CASE 5 /* per example and rank count */
#define STOP_SAMPLES 4     /* in all: each waits out a deadline */
#define TIMEOUT_S 2.0      /* the deadline a stopped rank's peers wait out */
#define RELAXED_S 30.0     /* every other run's: only a stop may trip a deadline, even under TSan on 2 loaded cores */

typedef struct tally {
    int runs, fired, passed_after;
    int by_kind[HN_FAULT_KIND_COUNT];
} tally;

static int thread_count(void)
{
    DIR *d = opendir("/proc/self/task");
    struct dirent *e;
    int n = 0;
    if (d == NULL)
        return -1;
    while ((e = readdir(d)) != NULL)
        n += e->d_name[0] != '.';
    closedir(d);
    return n;
}

/* The body's instructions (not the reference block's: faults skip it). */
static void body_instrs(const hn_block *b, const hn_instr **out, int *n, int cap)
{
    for (int i = 0; i < b->n && *n < cap; i++) {
        out[(*n)++] = b->items[i];
        body_instrs(&b->items[i]->body, out, n, cap);
        body_instrs(&b->items[i]->orelse, out, n, cap);
    }
}

static int applies(hn_fault_kind k, const hn_instr *in)
{
    if (k == HN_FAULT_COMM)
        return (hn_op_table[in->op].flags & HN_OPF_COMM) != 0;
    if (k == HN_FAULT_OOM)
        return in->op == HN_OP_ALLOC;
    return 1;
}


/* The runtime's deadline for its next runs (it is idle between them). */
static void set_deadline(hn_runtime *rt, double seconds)
{
    rt->cfg.timeout_s = seconds;
    rt->sink.timeout_s = seconds;
}

static hn_status_t check_once(hn_runtime *rt, const hn_program *p, hn_check_result *res, hn_strbuf *diag)
{
    hn_check_opts o;
    memset(&o, 0, sizeof(o));
    o.iters = 1;
    o.seed = 3;
    o.check = 1;
    return hn_check_run(rt, p, &o, res, diag);
}

static void one_fault(hn_runtime **rtp, const hn_program *p, const hn_instr *in, int rank, hn_fault_kind k,
                      tally *t)
{
    hn_runtime *rt = *rtp;
    hn_check_result res;
    hn_strbuf diag, err;
    char spec[64], where[64], who[32];
    const char *text;
    int before = __atomic_load_n(&rt->faults_fired, __ATOMIC_RELAXED), fired;
    double t0, took;
    hn_status_t st;
    snprintf(spec, sizeof(spec), "%d:%d:%s%s", rank, in->line, hn_fault_kind_name(k), k == HN_FAULT_SLOW ? ":20" : "");
    snprintf(where, sizeof(where), "%s:%d:", p->filename, in->line);
    snprintf(who, sizeof(who), "rank %d", rank);
    hn_sb_init(&diag);
    hn_sb_init(&err);
    CU_ASSERT_EQUAL_FATAL(hn_runtime_set_faults(rt, spec, &err), HN_OK);
    set_deadline(rt, k == HN_FAULT_STOP ? TIMEOUT_S : RELAXED_S);
    t0 = hn_now();
    st = check_once(rt, p, &res, &diag);
    took = hn_now() - t0;
    fired = __atomic_load_n(&rt->faults_fired, __ATOMIC_RELAXED) - before;
    text = hn_runtime_error(rt);
    t->runs++;
    /* within its deadline: a wait's timeout, then the watchdog's grace */
    CU_ASSERT(took < 2 * (k == HN_FAULT_STOP ? TIMEOUT_S : RELAXED_S) + 10);
    if (fired == 0 || k == HN_FAULT_SLOW) {
        /* not reached on this rank (a branch not taken), or only slow */
        if (st != HN_OK || !res.passed)
            fprintf(stderr, "\n  %s with %s: %s %s%s\n", p->filename, spec, hn_status_string(st), text,
                    diag.data ? diag.data : "");
        CU_ASSERT_EQUAL(st, HN_OK);
        CU_ASSERT_TRUE(res.passed);
    } else {
        int named = strstr(text, who) != NULL && (k == HN_FAULT_STOP || strstr(text, where) != NULL);
        t->fired++;
        t->by_kind[k]++;
        if (st == HN_OK || !named)
            fprintf(stderr, "\n  %s with %s: %s, error '%s'\n", p->filename, spec, hn_status_string(st), text);
        CU_ASSERT_NOT_EQUAL(st, HN_OK);
        CU_ASSERT_TRUE(named);
        if (k == HN_FAULT_TRAP)
            CU_ASSERT_EQUAL(st, HN_ERR_DEVICE_LOST);
    }
    CU_ASSERT_EQUAL(hn_runtime_set_faults(rt, NULL, &err), HN_OK);
    hn_sb_free(&diag);
    hn_sb_init(&diag);
    set_deadline(rt, RELAXED_S);
    st = check_once(rt, p, &res, &diag);
    if (k == HN_FAULT_TRAP && fired > 0) {
        /* a lost device is refused plainly, run after run; then a new runtime */
        CU_ASSERT_EQUAL(st, HN_ERR_DEVICE_LOST);
        CU_ASSERT_PTR_NOT_NULL(strstr(diag.data ? diag.data : "", "refuses further runs"));
        {
            int w = hn_runtime_size(rt);
            hn_runtime_destroy(rt);
            *rtp = hn_test_runtime("host", w, 0, TIMEOUT_S, 0);
        }
    } else {
        if (st != HN_OK || !res.passed)
            fprintf(stderr, "\n  %s after %s: the next run: %s %s\n", p->filename, spec, hn_status_string(st),
                    hn_runtime_error(rt));
        CU_ASSERT_EQUAL(st, HN_OK);
        CU_ASSERT_TRUE(res.passed);
        t->passed_after += st == HN_OK && res.passed;
    }
    hn_sb_free(&diag);
    hn_sb_free(&err);
}

static int by_name(const struct dirent **a, const struct dirent **b) { return strcmp((*a)->d_name, (*b)->d_name); }

static void test_fault_sweep(void)
{
    struct dirent **names = NULL;
    int nfiles = scandir("examples", &names, NULL, by_name), stops = 0, threads0;
    uint64_t rng = 0xfa017;
    tally t;
    hn_log_level_t level = hn_log_level();
    char *saved = getenv("HIRNODE_WATCHDOG_GRACE_S") ? strdup(getenv("HIRNODE_WATCHDOG_GRACE_S")) : NULL;
    memset(&t, 0, sizeof(t));
    setenv("HIRNODE_WATCHDOG_GRACE_S", "1", 1);
    hn_log_set_level(HN_LOG_OFF); /* the failures are expected; the test reads what they say */
    {
        /* a runtime made and destroyed first: a sanitizer may start a
         * thread of its own with the first ones */
        hn_runtime *warm = hn_test_runtime("host", 8, 0, TIMEOUT_S, 0);
        hn_runtime_destroy(warm);
    }
    threads0 = thread_count();
    CU_ASSERT_FATAL(nfiles > 0);
    for (int w = 1; w <= 8; w *= 2) {
        hn_runtime *rt = hn_test_runtime("host", w, 0, TIMEOUT_S, 0);
        CU_ASSERT_PTR_NOT_NULL_FATAL(rt);
        for (int f = 0; f < nfiles; f++) {
            char path[512];
            hn_program *p = NULL;
            const hn_instr *instrs[512];
            int n = 0;
            if (strstr(names[f]->d_name, ".hir") == NULL)
                continue;
            snprintf(path, sizeof(path), "examples/%s", names[f]->d_name);
            CU_ASSERT_EQUAL_FATAL(hn_program_load(path, &p, NULL), HN_OK);
            body_instrs(&p->body, instrs, &n, 512);
            for (int s = 0; s < SAMPLES_PER_CASE && n > 0; s++) {
                const hn_instr *in = instrs[hn_splitmix64(&rng) % (uint64_t)n];
                /* the kinds one process of every rank can take (kill and
                 * sigstop are refused there: test_process_faults_refused) */
                hn_fault_kind k = (hn_fault_kind)(hn_splitmix64(&rng) % HN_FAULT_FIRST_PROCESS_KIND);
                int rank = (int)(hn_splitmix64(&rng) % (uint64_t)w);
                if (k == HN_FAULT_STOP && stops >= STOP_SAMPLES)
                    k = HN_FAULT_ISSUE;
                stops += k == HN_FAULT_STOP;
                if (!applies(k, in))
                    k = HN_FAULT_ASYNC;
                one_fault(&rt, p, in, rank, k, &t);
                CU_ASSERT_PTR_NOT_NULL_FATAL(rt);
            }
            hn_program_destroy(p);
        }
        hn_runtime_destroy(rt);
    }
    for (int f = 0; f < nfiles; f++)
        free(names[f]);
    free(names);
    hn_log_set_level(level);
    /* every rank thread and stream worker was joined */
    CU_ASSERT_EQUAL(thread_count(), threads0);
    if (saved != NULL) {
        setenv("HIRNODE_WATCHDOG_GRACE_S", saved, 1);
        free(saved);
    } else {
        unsetenv("HIRNODE_WATCHDOG_GRACE_S");
    }
    printf("\n  faults: %d faulted runs sampled (seeded), %d set off (", t.runs, t.fired);
    for (int k = 0; k < HN_FAULT_FIRST_PROCESS_KIND; k++)
        printf("%s%s %d", k ? ", " : "", hn_fault_kind_name((hn_fault_kind)k), t.by_kind[k]);
    printf("); the next run passed --check after %d of them\n", t.passed_after);
    CU_ASSERT(t.fired > t.runs / 2);
    for (int k = 0; k < HN_FAULT_FIRST_PROCESS_KIND; k++)
        if (k != HN_FAULT_SLOW)
            CU_ASSERT(t.by_kind[k] > 0);
}

/* With no faults planned, the runtime runs p to a passing --check. */
static void passes_without_faults(hn_runtime *rt, const hn_program *p)
{
    hn_check_result res;
    hn_strbuf err, diag;
    hn_sb_init(&err);
    hn_sb_init(&diag);
    CU_ASSERT_EQUAL(hn_runtime_set_faults(rt, NULL, &err), HN_OK);
    CU_ASSERT_EQUAL(check_once(rt, p, &res, &diag), HN_OK);
    CU_ASSERT_TRUE(res.passed);
    hn_sb_free(&diag);
    hn_sb_free(&err);
}

/* Faults that could never fire: a rank the runtime lacks is refused when
 * the plan is set, a line without an instruction the fault acts on when
 * the program is run (naming the lines that have one); the runtime runs
 * on, and a fault that can fire is accepted. */
static void test_faults_that_cannot_fire(void)
{
    static const char *text = "param N = 8\n"                             /* 1 */
                              "input X : f32[N] replicated\n"             /* 2 */
                              "output Y : f32[N] replicated\n"            /* 3 */
                              "\n"                                        /* 4 */
                              "T = alloc f32[N]\n"                        /* 5 */
                              "copy T <- X; scale T <- T, 2.0\n"          /* 6 */
                              "for i in 0 .. 2 {\n"                       /* 7 */
                              "  allreduce Y <- T\n"                      /* 8 */
                              "}\n"                                       /* 9 */
                              "reference {\n  scale Y <- X, 4.0\n}\n";  /* 10-12 */
    static const struct {
        const char *spec, *msg;
    } refused[] = {
        {"0:99:stop", "t.hir: error: fault '0:99:stop': line 99 holds no instruction of the body (the body's "
                      "instructions are on lines 5-8)\n"},
        {"1:4:issue", "t.hir: error: fault '1:4:issue': line 4 holds no instruction of the body (the body's "
                      "instructions are on lines 5-8)\n"},
        {"0:11:async", "t.hir: error: fault '0:11:async': line 11 holds no instruction of the body (the body's "
                       "instructions are on lines 5-8)\n"},
        {"0:6:comm", "t.hir: error: fault '0:6:comm': line 6 holds no communication (the body communicates on "
                     "lines 8)\n"},
        {"1:8:2:oom", "t.hir: error: fault '1:8:2:oom': line 8 holds no alloc (the body allocates on lines 5)\n"},
    };
    static const char *const accepted[] = {"0:6:2:slow:1", "1:5:slow:1", "1:8:slow:1", "0:7:slow:1"};
    hn_program *p = hn_test_parse(text, NULL);
    hn_runtime *rt = hn_test_runtime("host", 2, 0, TIMEOUT_S, 0);
    hn_check_result res;
    hn_strbuf err, diag;
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    CU_ASSERT_PTR_NOT_NULL_FATAL(rt);
    hn_sb_init(&err);
    CU_ASSERT_EQUAL(hn_runtime_set_faults(rt, "2:6:issue", &err), HN_ERR_INVALID);
    CU_ASSERT_STRING_EQUAL(err.data ? err.data : "",
                           "hirnode: error: fault '2:6:issue': rank 2 does not exist (ranks 0 to 1)\n");
    CU_ASSERT_EQUAL(rt->faults.n, 0); /* the plan before stays */
    for (int k = 0; k < HN_ARRAY_LEN(refused); k++) {
        hn_sb_free(&err);
        hn_sb_init(&err);
        hn_sb_init(&diag);
        CU_ASSERT_EQUAL(hn_runtime_set_faults(rt, refused[k].spec, &err), HN_OK);
        CU_ASSERT_EQUAL(check_once(rt, p, &res, &diag), HN_ERR_INVALID);
        if (diag.data == NULL || strcmp(diag.data, refused[k].msg) != 0)
            fprintf(stderr, "\n  %s: got %s", refused[k].spec, diag.data ? diag.data : "nothing\n");
        CU_ASSERT_STRING_EQUAL(diag.data ? diag.data : "", refused[k].msg);
        CU_ASSERT_EQUAL(rt->faults_fired, 0);
        hn_sb_free(&diag);
    }
    for (int k = 0; k < HN_ARRAY_LEN(accepted); k++) {
        int before = rt->faults_fired;
        hn_sb_init(&diag);
        CU_ASSERT_EQUAL(hn_runtime_set_faults(rt, accepted[k], &err), HN_OK);
        CU_ASSERT_EQUAL(check_once(rt, p, &res, &diag), HN_OK);
        CU_ASSERT_TRUE(res.passed);
        CU_ASSERT(rt->faults_fired > before); /* it fired */
        hn_sb_free(&diag);
    }
    passes_without_faults(rt, p);
    hn_sb_free(&err);
    hn_runtime_destroy(rt);
    hn_program_destroy(p);
}

/* kill and sigstop would take every rank of a world one process holds:
 * refused when the plan is set, and (HIRNODE_FAULT, read when the
 * runtime is made) when a program is prepared; the runtime runs on. */
static void test_process_faults_refused(void)
{
    static const char *text = "param N = 8\n"
                              "input X : f32[N] replicated\n"
                              "output Y : f32[N] replicated\n"
                              "allreduce Y <- X\n"
                              "reference {\n  scale Y <- X, 2.0\n}\n";
    hn_program *p = hn_test_parse(text, NULL);
    hn_runtime *rt = hn_test_runtime("host", 2, 0, TIMEOUT_S, 0);
    hn_check_result res;
    hn_strbuf err, diag;
    char *saved = getenv("HIRNODE_FAULT") != NULL ? strdup(getenv("HIRNODE_FAULT")) : NULL;
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    CU_ASSERT_PTR_NOT_NULL_FATAL(rt);
    hn_sb_init(&err);
    CU_ASSERT_EQUAL(hn_runtime_set_faults(rt, "1:4:kill", &err), HN_ERR_INVALID);
    CU_ASSERT_STRING_EQUAL(err.data ? err.data : "",
                           "hirnode: error: fault '1:4:kill': kill acts on the process of rank 1, and this process "
                           "holds every rank of the world (2): it needs one rank per process (hirnode run --procs "
                           "N)\n");
    CU_ASSERT_EQUAL(rt->faults.n, 0);
    passes_without_faults(rt, p);
    hn_runtime_destroy(rt);
    setenv("HIRNODE_FAULT", "0:4:sigstop", 1);
    rt = hn_test_runtime("host", 2, 0, TIMEOUT_S, 0);
    if (saved != NULL)
        setenv("HIRNODE_FAULT", saved, 1);
    else
        unsetenv("HIRNODE_FAULT");
    free(saved);
    CU_ASSERT_PTR_NOT_NULL_FATAL(rt);
    hn_sb_init(&diag);
    CU_ASSERT_EQUAL(check_once(rt, p, &res, &diag), HN_ERR_INVALID);
    CU_ASSERT_STRING_EQUAL(diag.data ? diag.data : "",
                           "t.hir: error: fault '0:4:sigstop': sigstop acts on the process of rank 0, and this "
                           "process holds every rank of the world (2): it needs one rank per process (hirnode run "
                           "--procs N)\n");
    CU_ASSERT_EQUAL(rt->faults_fired, 0);
    hn_sb_free(&diag);
    passes_without_faults(rt, p);
    hn_sb_free(&err);
    hn_runtime_destroy(rt);
    hn_program_destroy(p);
}

/* A peer that never arrives (the skip fault: rank 1 does not issue the
 * allreduce of line 5), on the latency path and on the p2p rings, eagerly
 * (a run; a launch and its sync) and inside a graph's replay (the capture
 * took the skip, so the replay of rank 1 lacks the collective rank 0's
 * waits for): each must end within the deadline plus a bound, with an
 * error naming a rank and the instruction or graph, and the runtime must
 * then run the program right (eagerly and in a new graph), or say that it
 * is lost (a GPU whose kernels cannot be stopped; never on the host
 * backend). The bound is generous (TSan, 2 loaded cores); the promise is
 * T + 2 s. On CUDA: hn_tests --backend cuda --suite faults. */
#define SKIP_T 2.0
#define SKIP_BOUND 8.0

static const char *skip_text(const char *via)
{
    static char text[512];
    snprintf(text, sizeof(text),
             "param N = 1024\n"                                /* 1 */
             "input  X : f32[N] replicated\n"                  /* 2 */
             "output Y : f32[N] replicated\n"                  /* 3 */
             "copy Y <- X\n"                                   /* 4 */
             "allreduce Y <- Y op sum via %s\n"                /* 5 */
             "scale Y <- Y, 0.5\n"                             /* 6 */
             "reference {\n  copy Y <- X\n}\n", via);
    return text;
}

typedef struct skip_bufs {
    int n;
    void *x[8], *y[8];
    size_t bytes[8];
    hn_binding bind[2];
    hn_run_args a;
} skip_bufs;

static void skip_bufs_make(hn_runtime *rt, skip_bufs *b, int n)
{
    float x[1024];
    for (int i = 0; i < 1024; i++)
        x[i] = (float)(i % 13) - 6.0f;
    b->n = n;
    for (int r = 0; r < n; r++) {
        b->bytes[r] = sizeof(x);
        CU_ASSERT_EQUAL(hn_runtime_alloc(rt, r, sizeof(x), &b->x[r]), HN_OK);
        CU_ASSERT_EQUAL(hn_runtime_alloc(rt, r, sizeof(x), &b->y[r]), HN_OK);
        CU_ASSERT_EQUAL(hn_runtime_upload(rt, r, b->x[r], x, sizeof(x)), HN_OK);
    }
    b->bind[0] = (hn_binding){"X", b->x, b->bytes};
    b->bind[1] = (hn_binding){"Y", b->y, b->bytes};
    b->a = (hn_run_args){0, NULL, NULL, 2, b->bind};
}

/* every rank's Y is X · n · 0.5, exactly (small integers) */
static int skip_right(hn_runtime *rt, const skip_bufs *b)
{
    int ok = 1;
    for (int r = 0; r < b->n; r++) {
        float y[1024];
        CU_ASSERT_EQUAL(hn_runtime_download(rt, r, y, b->y[r], sizeof(y)), HN_OK);
        for (int i = 0; i < 1024; i++)
            ok &= y[i] == ((float)(i % 13) - 6.0f) * (float)b->n * 0.5f;
    }
    return ok;
}

/* The failure st of a call that took `took` seconds: named, in time. */
static void skip_failed(hn_runtime *rt, hn_status_t st, double took, const char *what)
{
    const char *text = hn_runtime_error(rt);
    int named = strstr(text, "rank ") != NULL && (strstr(text, "t.hir:") != NULL || strstr(text, "graph") != NULL);
    printf("\n  %s: %s after %.2f s (deadline %.0f s): '%s'", what, hn_status_string(st), took, SKIP_T, text);
    CU_ASSERT_NOT_EQUAL(st, HN_OK);
    CU_ASSERT_TRUE(named);
    CU_ASSERT(took < SKIP_T + SKIP_BOUND);
}

/* HN_OK, or (a GPU only) that the runtime says it is lost: 1 if usable. */
static int usable_after(hn_runtime *rt, hn_status_t st, const char *what)
{
    if (st == HN_ERR_DEVICE_LOST && strcmp(hn_test_backend, "host") != 0) {
        fprintf(stderr, "\n  %s: the runtime says it is lost: %s\n", what, hn_runtime_error(rt));
        return 0;
    }
    if (st != HN_OK)
        fprintf(stderr, "\n  %s: %s '%s'\n", what, hn_status_string(st), hn_runtime_error(rt));
    CU_ASSERT_EQUAL(st, HN_OK);
    return st == HN_OK;
}

static void skip_case(const char *via, int mode)
{
    static const char *const modes[] = {"a run", "a launch", "a replay"};
    hn_program *p = hn_test_parse(skip_text(via), NULL);
    hn_runtime *rt = hn_test_runtime(NULL, 2, 0, SKIP_T, 0);
    hn_graph *g = NULL;
    hn_strbuf err;
    skip_bufs b;
    char what[96];
    double t0;
    hn_status_t st;
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    CU_ASSERT_PTR_NOT_NULL_FATAL(rt);
    snprintf(what, sizeof(what), "via %s, rank 1 skips the allreduce in %s", via, modes[mode]);
    hn_sb_init(&err);
    skip_bufs_make(rt, &b, 2);
    CU_ASSERT_EQUAL(hn_runtime_run(rt, p, &b.a), HN_OK); /* prepared, teams made: the deadline is the waits' */
    CU_ASSERT_TRUE(skip_right(rt, &b));
    CU_ASSERT_EQUAL_FATAL(hn_runtime_set_faults(rt, "1:5:skip", &err), HN_OK);
    if (mode == 2 && (st = hn_runtime_capture(rt, p, &b.a, NULL, &g)) != HN_OK) /* it takes a skip */
        fprintf(stderr, "\n  %s: the capture: %s '%s'\n", what, hn_status_string(st), hn_runtime_error(rt));
    CU_ASSERT_FATAL(mode != 2 || g != NULL);
    t0 = hn_now();
    if (mode == 0) {
        st = hn_runtime_run(rt, p, &b.a);
    } else {
        st = mode == 1 ? hn_runtime_launch(rt, p, &b.a, NULL) : hn_runtime_replay(rt, g, NULL);
        if (st == HN_OK)
            st = hn_runtime_sync(rt);
    }
    skip_failed(rt, st, hn_now() - t0, what);
    CU_ASSERT_EQUAL(hn_runtime_set_faults(rt, NULL, &err), HN_OK);
    if (g != NULL) { /* the failure made it unusable */
        CU_ASSERT_EQUAL(hn_runtime_replay(rt, g, NULL), HN_ERR_INVALID);
        hn_runtime_graph_destroy(rt, g);
        g = NULL;
    }
    /* the runtime runs the program right afterwards, eagerly and replayed */
    if (usable_after(rt, hn_runtime_run(rt, p, &b.a), what)) {
        CU_ASSERT_TRUE(skip_right(rt, &b));
        CU_ASSERT_EQUAL_FATAL(hn_runtime_capture(rt, p, &b.a, NULL, &g), HN_OK);
        for (int k = 0; k < 3; k++)
            CU_ASSERT_EQUAL(hn_runtime_replay(rt, g, NULL), HN_OK);
        CU_ASSERT_EQUAL(hn_runtime_sync(rt), HN_OK);
        CU_ASSERT_TRUE(skip_right(rt, &b));
        hn_runtime_graph_destroy(rt, g);
    }
    for (int r = 0; r < 2; r++) {
        hn_runtime_free(rt, r, b.x[r]);
        hn_runtime_free(rt, r, b.y[r]);
    }
    hn_sb_free(&err);
    hn_runtime_destroy(rt);
    hn_program_destroy(p);
}

static void peer_never_arrives(const char *via)
{
    hn_log_level_t level = hn_log_level();
    if (hn_test_max_ranks() < 2)
        return;
    hn_log_set_level(HN_LOG_OFF); /* the failures are expected; the test reads what they say */
    for (int mode = 0; mode < 3; mode++)
        skip_case(via, mode);
    hn_log_set_level(level);
}

static void test_ll_peer_never_arrives(void) { peer_never_arrives("ll"); }
static void test_p2p_peer_never_arrives(void) { peer_never_arrives("p2p"); }

void hn_suite_faults(void)
{
    static CU_TestInfo tests[] = {
        {"injected faults end runs by name; the next run passes", test_fault_sweep},
        {"faults on a rank or line that does not exist are refused", test_faults_that_cannot_fire},
        {"kill and sigstop are refused where one process holds every rank", test_process_faults_refused},
        {"an ll peer that never arrives (run, launch, replay) ends by name within the deadline; the runtime runs on",
         test_ll_peer_never_arrives},
        {"... a p2p peer", test_p2p_peer_never_arrives},
        CU_TEST_INFO_NULL,
    };
    if (strcmp(hn_test_backend, "host") != 0)
        tests[0] = (CU_TestInfo)CU_TEST_INFO_NULL;
    hn_test_add_suite("tools/faults", tests);
}
