/* Tests of src/trace/trace.c through the public calls: the exact spans
 * of a small program, p2p lane tracks, failed runs, start/stop errors, and
 * the trace of every example at 1, 2, 4 and 8 ranks — strict JSON, a
 * process per rank, named tracks, spans in stream order, as many
 * communications as the dry run issues, every match key on all its ends. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/json.h"
#include "hirnode/runtime.h"
#include "runtime/check.h"
#include "exec/fault_inject.h"
#include "sched/lower.h"
#include "ir/params.h"
#include "exec/verify_run.h"
#include "trace/trace.h"
#include "../test.h"

static char *temp_path(const char *tag)
{
    static char path[4][128];
    static int k;
    char *p = path[k++ % 4];
    snprintf(p, sizeof(path[0]), "/tmp/hn_trace_test_%d_%s.json", (int)getpid(), tag);
    return p;
}


/* Reads a trace back; the file must be strict JSON first of all. */
static int load(const char *path, hn_trace_data *t)
{
    size_t len = 0;
    char *text = hn_test_read_file(path, &len);
    hn_json *j = NULL;
    hn_strbuf err;
    int ok;
    if (text == NULL)
        return 0;
    hn_sb_init(&err);
    ok = hn_json_parse(text, len, &j, &err) == HN_OK;
    if (!ok)
        fprintf(stderr, "\n  %s: not JSON: %s\n", path, err.data);
    hn_json_free(j);
    ok = ok && hn_trace_load(text, len, t, &err) == HN_OK;
    if (!ok && err.data != NULL)
        fprintf(stderr, "\n  %s: %s\n", path, err.data);
    hn_sb_free(&err);
    free(text);
    return ok;
}

static const hn_span *find(const hn_trace_data *t, int rank, int track, int run, int nth)
{
    for (int i = 0; i < t->nspans; i++) {
        const hn_span *s = &t->spans[i];
        if (s->rank == rank && s->track == track && s->run == run && nth-- == 0)
            return s;
    }
    return NULL;
}

#define EXPECT(s, k, nm, line)                                                                           \
    do {                                                                                                 \
        CU_ASSERT_PTR_NOT_NULL_FATAL(s);                                                                 \
        CU_ASSERT_EQUAL((s)->kind, k);                                                                   \
        CU_ASSERT_STRING_EQUAL((s)->name, nm);                                                           \
        CU_ASSERT_STRING_EQUAL((s)->src, line);                                                          \
    } while (0)

/* Two ranks, two runs of: stream 1 waits for the caller and fills X; the
 * caller waits for stream 1, copies, and reduces over both ranks. */
static void test_exact_spans(void)
{
    const char *text = "param N = 64\n"
                       "output Y : f32[N] replicated\n"
                       "s0 = current_stream\n"
                       "X = alloc f32[N]\n"
                       "set_stream stream(1)\n"
                       "wait_stream s0\n"
                       "fill X <- 2\n"
                       "set_stream s0\n"
                       "wait_stream stream(1)\n"
                       "copy Y <- X\n"
                       "allreduce Y <- Y op sum\n";
    hn_program *p = hn_test_parse(text, NULL);
    int nr = hn_test_max_ranks() < 2 ? 1 : 2;
    hn_runtime *rt = hn_test_runtime(NULL, nr, 20, 30, 0);
    const char *path = temp_path("exact");
    void *y[2];
    size_t sz[2] = {256, 256};
    hn_binding b = {"Y", y, sz};
    hn_run_args args = {0, NULL, NULL, 1, &b};
    hn_trace_data t;
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    CU_ASSERT_PTR_NOT_NULL_FATAL(rt);
    for (int r = 0; r < nr; r++)
        CU_ASSERT_EQUAL(hn_runtime_alloc(rt, r, 256, &y[r]), HN_OK);
    CU_ASSERT_EQUAL(hn_runtime_run(rt, p, &args), HN_OK); /* before the trace: not in it */
    CU_ASSERT_EQUAL_FATAL(hn_runtime_trace_start(rt, path), HN_OK);
    {
        char *said;
        hn_test_capture_begin();
        CU_ASSERT_EQUAL(hn_runtime_trace_start(rt, path), HN_ERR_INVALID); /* one at a time */
        said = hn_test_capture_end();
        CU_ASSERT_STRING_EQUAL(said, ""); /* said once: to the caller, not logged too */
        CU_ASSERT_PTR_NOT_NULL(strstr(hn_runtime_error(rt), "a trace is running already (to "));
        free(said);
    }
    CU_ASSERT_EQUAL(hn_runtime_run(rt, p, &args), HN_OK);
    CU_ASSERT_EQUAL(hn_runtime_run(rt, p, &args), HN_OK);
    CU_ASSERT_EQUAL_FATAL(hn_runtime_trace_stop(rt), HN_OK);
    CU_ASSERT_EQUAL(hn_runtime_trace_stop(rt), HN_ERR_INVALID);
    CU_ASSERT_EQUAL(hn_runtime_run(rt, p, &args), HN_OK); /* after: not either */
    CU_ASSERT_TRUE_FATAL(load(path, &t));
    CU_ASSERT_EQUAL(t.nranks, nr);
    CU_ASSERT_EQUAL(t.nruns, 2);
    for (int r = 0; r < nr; r++)
        for (int run = 0; run < 2; run++) {
            const hn_span *w1 = find(&t, r, HN_TRACK_STREAM0 + 1, run, 0), *f = find(&t, r, HN_TRACK_STREAM0 + 1, run, 1);
            const hn_span *w0 = find(&t, r, HN_TRACK_CALLER, run, 0), *c = find(&t, r, HN_TRACK_CALLER, run, 1);
            const hn_span *a = find(&t, r, HN_TRACK_CALLER, run, 2);
            int base = run * 5, issues = 0, runs = 0;
            EXPECT(w1, HN_SPAN_WAIT, "wait_stream", "t.hir:6:1");
            EXPECT(f, HN_SPAN_COMPUTE, "fill", "t.hir:7:1");
            EXPECT(w0, HN_SPAN_WAIT, "wait_stream", "t.hir:9:1");
            EXPECT(c, HN_SPAN_COMPUTE, "copy", "t.hir:10:1");
            EXPECT(a, HN_SPAN_COMM, "allreduce", "t.hir:11:1");
            CU_ASSERT_PTR_NULL(find(&t, r, HN_TRACK_STREAM0 + 1, run, 2));
            CU_ASSERT_PTR_NULL(find(&t, r, HN_TRACK_CALLER, run, 3));
            /* issue order, stream order, and what waits for what */
            CU_ASSERT(w1->id == base && f->id == base + 1 && w0->id == base + 2 && c->id == base + 3 &&
                      a->id == base + 4);
            CU_ASSERT(w1->end <= f->begin && w0->end <= c->begin && c->end <= a->begin);
            CU_ASSERT_EQUAL(w1->dep, -1); /* nothing was on the caller's stream yet */
            CU_ASSERT_EQUAL(w0->dep, f->id);
            CU_ASSERT(w0->end >= f->end); /* the wait ended after what it waited for */
            CU_ASSERT_STRING_EQUAL(f->text, "fill X <- 2");
            CU_ASSERT_EQUAL_FATAL(a->nkeys, 1);
            CU_ASSERT_STRING_EQUAL(t.key_names[t.keys[a->key0]], nr == 2 ? "c:default:0,1:0" : "c:default:0:0");
            /* the host: the run, and the issue of the five traced instructions inside it */
            for (int i = 0; i < t.nspans; i++) {
                const hn_span *s = &t.spans[i];
                if (s->rank != r || s->run != run || s->track != HN_TRACK_HOST)
                    continue;
                runs += s->kind == HN_SPAN_RUN;
                issues += s->kind == HN_SPAN_ISSUE;
            }
            CU_ASSERT_EQUAL(runs, 1);
            CU_ASSERT_EQUAL(issues, 5);
        }
    CU_ASSERT_STRING_EQUAL(hn_trace_track_name(&t, 0, HN_TRACK_HOST), "host: rank thread (issue)");
    CU_ASSERT_STRING_EQUAL(hn_trace_track_name(&t, 0, HN_TRACK_CALLER), "caller stream");
    CU_ASSERT_STRING_EQUAL(hn_trace_track_name(&t, 0, HN_TRACK_STREAM0 + 1), "stream 1");
    hn_trace_data_free(&t);
    /* bytes and team are written with the communication */
    {
        char *raw = hn_test_read_file(path, NULL);
        CU_ASSERT_PTR_NOT_NULL_FATAL(raw);
        CU_ASSERT_PTR_NOT_NULL(strstr(raw, nr == 2 ? "\"bytes\":256,\"seq\":0,\"team\":[0,1]" : "\"bytes\":256,\"seq\":0,\"team\":[0]"));
        free(raw);
    }
    for (int r = 0; r < nr; r++)
        hn_runtime_free(rt, r, y[r]);
    hn_runtime_destroy(rt);
    hn_program_destroy(p);
    remove(path);
}

/* Copies on the p2p communicator's lanes get tracks of their own. */
static void test_lanes(void)
{
    const char *text = "param N = 4096\ninput X : f32[world * N] replicated\noutput Y : f32[N] replicated\n"
                       "for k in 0 .. 2 {\n  reduce_scatter Y <- X op sum via p2p\n}\n";
    hn_program *p = hn_test_parse(text, NULL);
    int nr = hn_test_max_ranks() < 4 ? hn_test_max_ranks() : 4;
    const char *path = temp_path("lanes");
    hn_runtime *rt;
    void *x[4], *y[4];
    size_t xs[4], ys[4];
    hn_binding b[2] = {{"X", x, xs}, {"Y", y, ys}};
    hn_run_args args = {0, NULL, NULL, 2, b};
    hn_trace_data t;
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    if (nr < 2) {
        hn_program_destroy(p);
        return;
    }
    /* 16 KiB steps in pieces of at least 1 KiB over two lanes */
    setenv("HIRNODE_P2P_PIECE_KIB", "1", 1);
    setenv("HIRNODE_P2P_LANES", "2", 1);
    rt = hn_test_runtime(NULL, nr, 0, 30, 0);
    unsetenv("HIRNODE_P2P_PIECE_KIB");
    unsetenv("HIRNODE_P2P_LANES");
    CU_ASSERT_PTR_NOT_NULL_FATAL(rt);
    for (int r = 0; r < nr; r++) {
        xs[r] = (size_t)nr * 4096 * 4;
        ys[r] = 4096 * 4;
        CU_ASSERT_EQUAL(hn_runtime_alloc(rt, r, xs[r], &x[r]), HN_OK);
        CU_ASSERT_EQUAL(hn_runtime_alloc(rt, r, ys[r], &y[r]), HN_OK);
    }
    CU_ASSERT_EQUAL_FATAL(hn_runtime_trace_start(rt, path), HN_OK);
    CU_ASSERT_EQUAL(hn_runtime_run(rt, p, &args), HN_OK);
    CU_ASSERT_EQUAL(hn_runtime_trace_stop(rt), HN_OK);
    CU_ASSERT_TRUE_FATAL(load(path, &t));
    for (int r = 0; r < nr; r++)
        for (int lane = 0; lane < 2; lane++) {
            int n = 0;
            int64_t last_end = INT64_MIN, last_id = -1;
            CU_ASSERT_STRING_EQUAL(hn_trace_track_name(&t, r, HN_TRACK_LANE0 + lane), lane ? "p2p lane 1" : "p2p lane 0");
            for (int i = 0; i < t.nspans; i++) {
                const hn_span *s = &t.spans[i];
                if (s->rank != r || s->track != HN_TRACK_LANE0 + lane)
                    continue;
                CU_ASSERT_EQUAL(s->kind, HN_SPAN_COMM);
                CU_ASSERT_STRING_EQUAL(s->name, "reduce_scatter");
                CU_ASSERT(s->begin >= last_end && s->id > last_id); /* in stream order */
                last_end = s->end;
                last_id = s->id;
                n++;
            }
            /* each of n - 1 steps of both reductions: 4 pieces, two on each lane */
            CU_ASSERT_EQUAL(n, 2 * (nr - 1) * 2);
        }
    hn_trace_data_free(&t);
    for (int r = 0; r < nr; r++) {
        hn_runtime_free(rt, r, x[r]);
        hn_runtime_free(rt, r, y[r]);
    }
    hn_runtime_destroy(rt);
    hn_program_destroy(p);
    remove(path);
}

/* A run that fails (rank 0 stops issuing at the group: an injected fault;
 * its peers time out) keeps its host spans and the device spans that ended
 * before the failure, not those that never did; the trace goes on with the
 * next run; destroy writes a trace still running. */
static void test_failed_run_and_destroy(void)
{
    const char *good = "output Y : f32[16] replicated\nfill Y <- 1\nt = alloc f32[1024]\nu = alloc f32[1024]\n"
                       "group {\n send t to (rank + 1) % world\n recv u from (rank - 1) % world\n}\n";
    hn_program *q = hn_test_parse(good, NULL), *p = q;
    int nr = hn_test_max_ranks() < 3 ? hn_test_max_ranks() : 3;
    hn_runtime *rt;
    const char *path = temp_path("fail");
    void *y[3];
    size_t sz[3] = {64, 64, 64};
    hn_binding b = {"Y", y, sz};
    hn_run_args args = {0, NULL, NULL, 1, &b};
    hn_trace_data t;
    int fills[2] = {0, 0}, sends[2] = {0, 0}, comms[2] = {0, 0};
    CU_ASSERT_PTR_NOT_NULL_FATAL(q);
    if (nr < 2 || strcmp(hn_test_backend, "host") != 0) { /* see runtime_test's failing run */
        hn_program_destroy(q);
        return;
    }
    rt = hn_test_runtime(NULL, nr, 0, 1, 0);
    for (int r = 0; r < nr; r++)
        hn_runtime_alloc(rt, r, 64, &y[r]);
    {
        char *said;
        hn_test_capture_begin();
        CU_ASSERT_EQUAL(hn_runtime_trace_start(rt, "/nonexistent-dir/x.json"), HN_ERR_IO);
        said = hn_test_capture_end();
        CU_ASSERT_STRING_EQUAL(said, ""); /* said once: to the caller, not logged too */
        CU_ASSERT_STRING_EQUAL(hn_runtime_error(rt),
                               "cannot write the trace to /nonexistent-dir/x.json: No such file or directory");
        free(said);
    }
    CU_ASSERT_EQUAL(hn_runtime_trace_start(NULL, path), HN_ERR_INVALID);
    CU_ASSERT_EQUAL_FATAL(hn_runtime_trace_start(rt, path), HN_OK);
    {
        hn_strbuf err;
        hn_sb_init(&err);
        CU_ASSERT_EQUAL(hn_runtime_set_faults(rt, "0:5:stop", &err), HN_OK);
        CU_ASSERT_EQUAL(hn_runtime_run(rt, p, &args), HN_ERR_TIMEOUT);
        CU_ASSERT_EQUAL(hn_runtime_set_faults(rt, NULL, &err), HN_OK);
        hn_sb_free(&err);
    }
    CU_ASSERT_EQUAL(hn_runtime_run(rt, q, &args), HN_OK);
    for (int r = 0; r < nr; r++)
        hn_runtime_free(rt, r, y[r]);
    hn_runtime_destroy(rt); /* writes the trace */
    CU_ASSERT_TRUE_FATAL(load(path, &t));
    CU_ASSERT_EQUAL(t.nruns, 2);
    for (int i = 0; i < t.nspans; i++) {
        fills[t.spans[i].run] += t.spans[i].kind == HN_SPAN_COMPUTE;
        comms[t.spans[i].run] += t.spans[i].kind == HN_SPAN_COMM;
        sends[t.spans[i].run] += t.spans[i].kind == HN_SPAN_ISSUE && strcmp(t.spans[i].name, "group") == 0;
    }
    CU_ASSERT_EQUAL(fills[0], nr);     /* done before the group hung */
    CU_ASSERT_EQUAL(comms[0], 0);      /* never done */
    CU_ASSERT_EQUAL(sends[0], nr - 1); /* but issued, by all but the stopped rank */
    CU_ASSERT_EQUAL(fills[1], nr);
    CU_ASSERT_EQUAL(comms[1], nr);
    hn_trace_data_free(&t);
    {
        char *raw = hn_test_read_file(path, NULL);
        CU_ASSERT_PTR_NOT_NULL_FATAL(raw);
        CU_ASSERT_PTR_NOT_NULL(strstr(raw, "\"ok\":false"));
        CU_ASSERT_PTR_NOT_NULL(strstr(raw, "\"ok\":true"));
        CU_ASSERT_PTR_NOT_NULL(strstr(raw, "\"complete\":true"));
        free(raw);
    }
    hn_program_destroy(q);
    remove(path);
}

/* How many communications rank r issues in a run: the dry run's log
 * (a collective each, a post of sends and receives each). */
static int dry_comms(const hn_comm_log *l)
{
    int n = 0;
    for (int i = 0; i < l->n; i++) {
        int fresh = 1;
        if (!l->recs[i].is_p2p) {
            n++;
            continue;
        }
        for (int k = 0; k < i; k++)
            if (l->recs[k].is_p2p && l->recs[k].group == l->recs[i].group)
                fresh = 0;
        n += fresh;
    }
    return n;
}

/* Members of a match key: a collective's team, or a message's two ends. */
static int key_members(const char *key)
{
    int n = 1;
    if (key[0] == 'm')
        return 2;
    key = strchr(key + 2, ':') + 1;
    for (; *key != ':'; key++)
        n += *key == ',';
    return n;
}

static void check_example_trace(const hn_program *src, const char *path, int world, int nstreams, int runs)
{
    /* a program with pipelined statements runs lowered: its spans are the
     * lowered program's instructions (the same lowering: it is a pure
     * function of the program and the configuration) */
    const hn_program *p = src;
    hn_program *lowered = NULL;
    hn_trace_data t;
    hn_comm_log *logs = calloc((size_t)world, sizeof(*logs));
    int64_t *params = calloc((size_t)p->nparams + 1, sizeof(int64_t));
    int *key_count;
    hn_strbuf diag;
    hn_sb_init(&diag);
    CU_ASSERT_TRUE_FATAL(load(path, &t));
    CU_ASSERT_EQUAL(hn_params_resolve(p, world, nstreams, 0, NULL, NULL, params, &diag), HN_OK);
    if (src->has_sched) {
        CU_ASSERT_EQUAL_FATAL(hn_sched_lower(src, world, 1, nstreams, params, NULL, &lowered, &diag, NULL), HN_OK);
        p = lowered;
    }
    CU_ASSERT_EQUAL_FATAL(hn_verify_run(p, world, nstreams, params, &diag, logs), HN_OK);
    CU_ASSERT_EQUAL(t.nranks, world);
    CU_ASSERT_EQUAL(t.nruns, runs);
    CU_ASSERT_STRING_EQUAL(t.program, p->filename);
    key_count = calloc((size_t)t.nkey_names + 1, sizeof(int));
    for (int r = 0; r < world; r++) {
        CU_ASSERT_STRING_EQUAL(hn_trace_track_name(&t, r, HN_TRACK_HOST), "host: rank thread (issue)");
        CU_ASSERT_STRING_EQUAL(hn_trace_track_name(&t, r, HN_TRACK_CALLER), "caller stream");
        for (int run = 0; run < runs; run++) {
            int comms = 0, nrun = 0;
            const hn_span *rs = NULL;
            for (int i = 0; i < t.nspans; i++) {
                const hn_span *s = &t.spans[i];
                if (s->rank != r || s->run != run)
                    continue;
                if (s->kind == HN_SPAN_RUN) {
                    nrun++;
                    rs = s;
                }
                comms += s->kind == HN_SPAN_COMM && s->track < HN_TRACK_LANE0;
            }
            CU_ASSERT_EQUAL(nrun, 1);
            CU_ASSERT_EQUAL(comms, dry_comms(&logs[r]));
            /* every issue inside its run */
            for (int i = 0; i < t.nspans && rs != NULL; i++) {
                const hn_span *s = &t.spans[i];
                if (s->rank == r && s->run == run && s->kind == HN_SPAN_ISSUE)
                    CU_ASSERT(s->begin >= rs->begin && s->end <= rs->end);
            }
        }
    }
    for (int i = 0; i < t.nspans; i++) {
        const hn_span *s = &t.spans[i], *q = i > 0 ? &t.spans[i - 1] : NULL;
        char where[600];
        /* named tracks; instructions as written */
        CU_ASSERT_STRING_NOT_EQUAL(hn_trace_track_name(&t, s->rank, s->track), "?");
        if (s->kind == HN_SPAN_RUN)
            continue;
        CU_ASSERT_FATAL(s->instr >= 0 && s->instr < p->ninstrs);
        CU_ASSERT_STRING_EQUAL(s->name, hn_op_table[p->instrs[s->instr]->op].keyword);
        snprintf(where, sizeof(where), "%s:%d:%d", p->filename, p->instrs[s->instr]->line, p->instrs[s->instr]->col);
        CU_ASSERT_STRING_EQUAL(s->src, where);
        CU_ASSERT(s->text[0] != '\0');
        /* generated code, groups too, is named by its statement, once */
        if (p->instrs[s->instr]->origin >= 0 && p->instrs[s->instr]->origin < p->norigins)
            CU_ASSERT_STRING_EQUAL(s->text, p->origins[p->instrs[s->instr]->origin]);
        if (!hn_span_on_device(s->kind))
            continue;
        /* device tracks: in stream order, issue order and time alike */
        if (q != NULL && q->rank == s->rank && q->track == s->track && q->run == s->run) {
            CU_ASSERT(q->id < s->id);
            CU_ASSERT(q->end <= s->begin);
        }
        if (s->kind == HN_SPAN_WAIT && s->dep >= 0) { /* it waits for an earlier span of its rank */
            int found = 0;
            for (int k = 0; k < t.nspans; k++)
                found |= t.spans[k].rank == s->rank && t.spans[k].id == s->dep && hn_span_on_device(t.spans[k].kind) &&
                         s->dep < s->id;
            CU_ASSERT_TRUE(found);
        }
        for (int k = 0; k < s->nkeys; k++)
            key_count[t.keys[s->key0 + k]]++;
    }
    /* every communication met its other ends: as many spans carry a key
     * as it has members, run after run */
    for (int k = 0; k < t.nkey_names; k++) {
        if (key_count[k] != key_members(t.key_names[k]) * runs)
            fprintf(stderr, "\n  %s at %d ranks: key %s on %d spans\n", p->filename, world, t.key_names[k],
                    key_count[k]);
        CU_ASSERT_EQUAL(key_count[k], key_members(t.key_names[k]) * runs);
    }
    free(key_count);
    hn_comm_logs_free(logs, world);
    free(params);
    hn_sb_free(&diag);
    hn_trace_data_free(&t);
    hn_prog_free(lowered);
}

static void trace_example(const char *file, hn_program *p, void *arg)
{
    (void)file;
    (void)arg;
    for (int n = 1; n <= hn_test_max_ranks(); n *= 2) {
        hn_runtime *rt = hn_test_runtime(NULL, n, n == 4 ? 50 : 0, 30, 0);
        const char *path = temp_path("example");
        hn_check_opts o;
        hn_check_result res;
        hn_strbuf diag;
        CU_ASSERT_PTR_NOT_NULL_FATAL(rt);
        memset(&o, 0, sizeof(o));
        o.iters = 2;
        o.seed = 3;
        hn_sb_init(&diag);
        CU_ASSERT_EQUAL_FATAL(hn_runtime_trace_start(rt, path), HN_OK);
        CU_ASSERT_EQUAL(hn_check_run(rt, p, &o, &res, &diag), HN_OK);
        CU_ASSERT_EQUAL(hn_runtime_trace_stop(rt), HN_OK);
        check_example_trace(p, path, n, rt->cfg.nstreams, 2);
        hn_sb_free(&diag);
        hn_runtime_destroy(rt);
        remove(path);
    }
}

static void test_examples(void) { CU_ASSERT(hn_test_each_program("examples", trace_example, NULL) >= 10); }

void hn_suite_trace(void)
{
    static CU_TestInfo tests[] = {
        {"the exact spans of a small program", test_exact_spans},
        {"p2p lanes get tracks of their own", test_lanes},
        {"a failed run, start errors, destroy writes", test_failed_run_and_destroy},
        {"every example at 1, 2, 4, 8 ranks", test_examples},
        CU_TEST_INFO_NULL,
    };
    hn_test_add_suite("trace/trace", tests);
}
