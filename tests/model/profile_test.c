/* Tests of src/model/profile.c, the machine profile as a file: written and
 * read back exactly; every prefix of a file, and every kind of malformed,
 * out-of-range, foreign or other-version file refused with its field
 * named; the default file's path; the built-in defaults' labels; the
 * profile a runtime uses — the file HIRNODE_PROFILE names, or the default
 * with one warning naming the file and what is wrong. */
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "model/profile.h"
#include "ranks/runtime_int.h"
#include "../test.h"

/* A profile as `hirnode tune` would write one: the built-in's numbers,
 * measured on 2 H200s, with every optional part filled. */
static hn_cost_profile *sample(void)
{
    hn_cost_profile *p = malloc(sizeof(*p));
    if (p == NULL)
        return NULL;
    *p = *hn_cost_builtin();
    p->builtin = 0;
    p->count = 2;
    snprintf(p->model, sizeof(p->model), "NVIDIA H200");
    snprintf(p->hirnode, sizeof(p->hirnode), "0.1.0");
    p->source[0] = '\0';
    p->coef.chunk_s = 3.25e-6;
    p->coef.stream_s = 1.5e-6;
    p->interference[HN_TRAFFIC_CE] = 0.03125;
    p->interference[HN_TRAFFIC_SM] = 0.5;
    p->gemm[p->ngemm++] = (hn_cost_gemm_point){HN_F32, 1024, 2048, 4096, 51.25};
    p->splits[p->nsplits++] = (hn_cost_split_point){4096, 8192, 8192, 2, 1, 1.015625};
    p->splits[p->nsplits++] = (hn_cost_split_point){4096, 8192, 8192, 4, 2, 1.0390625};
    return p;
}

static char *text_of(const hn_cost_profile *p)
{
    hn_strbuf sb;
    hn_sb_init(&sb);
    hn_profile_write(p, &sb);
    return hn_sb_take(&sb);
}

static void test_round_trip(void)
{
    hn_cost_profile *p = sample(), *q = calloc(1, sizeof(*q));
    char *text, *again;
    hn_strbuf why;
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    CU_ASSERT_PTR_NOT_NULL_FATAL(q);
    text = text_of(p);
    CU_ASSERT_PTR_NOT_NULL_FATAL(text);
    hn_sb_init(&why);
    CU_ASSERT_EQUAL_FATAL(hn_profile_parse(text, strlen(text), "NVIDIA H200", 2, q, &why), HN_OK);
    CU_ASSERT_PTR_NULL(why.data);
    /* every field the model reads, exactly */
    CU_ASSERT_STRING_EQUAL(q->model, p->model);
    CU_ASSERT_EQUAL(q->count, 2);
    CU_ASSERT_STRING_EQUAL(q->backend, "cuda");
    CU_ASSERT_STRING_EQUAL(q->nccl, p->nccl);
    CU_ASSERT_STRING_EQUAL(q->date, p->date);
    CU_ASSERT_FALSE(q->builtin);
    CU_ASSERT_EQUAL(memcmp(q->gemm_tflops_at_1t, p->gemm_tflops_at_1t, sizeof(p->gemm_tflops_at_1t)), 0);
    CU_ASSERT_EQUAL(memcmp(q->gemm_gamma, p->gemm_gamma, sizeof(p->gemm_gamma)), 0);
    CU_ASSERT_EQUAL(q->coef.seq_overhead_s, p->coef.seq_overhead_s);
    CU_ASSERT_EQUAL(q->coef.chunk_s, p->coef.chunk_s);
    CU_ASSERT_EQUAL(q->coef.stream_s, p->coef.stream_s);
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < 2; j++) {
            CU_ASSERT_EQUAL(q->coef.kappa[i][j], p->coef.kappa[i][j]);
            CU_ASSERT(fabs(q->coef.tau_s[i][j] - p->coef.tau_s[i][j]) <= 1e-18);
        }
    CU_ASSERT(fabs(q->hbm_bytes_per_s - p->hbm_bytes_per_s) < 1e-3);
    CU_ASSERT_EQUAL_FATAL(q->ncurves, p->ncurves);
    for (int c = 0; c < p->ncurves; c++) {
        CU_ASSERT_EQUAL(q->curves[c].kind, p->curves[c].kind);
        CU_ASSERT_EQUAL(q->curves[c].engine, p->curves[c].engine);
        CU_ASSERT_EQUAL(q->curves[c].n, p->curves[c].n);
        CU_ASSERT_EQUAL_FATAL(q->curves[c].npoints, p->curves[c].npoints);
        for (int i = 0; i < p->curves[c].npoints; i++) {
            CU_ASSERT_EQUAL(q->curves[c].bytes[i], p->curves[c].bytes[i]);
            CU_ASSERT_EQUAL(q->curves[c].us[i], p->curves[c].us[i]);
        }
    }
    CU_ASSERT_EQUAL(q->ngemm, p->ngemm);
    CU_ASSERT_EQUAL(memcmp(q->gemm, p->gemm, sizeof(p->gemm[0]) * (size_t)p->ngemm), 0);
    CU_ASSERT_EQUAL(q->npipes, p->npipes);
    for (int i = 0; i < p->npipes; i++) {
        CU_ASSERT_EQUAL(q->pipes[i].kind, p->pipes[i].kind);
        CU_ASSERT_EQUAL(q->pipes[i].M, p->pipes[i].M);
        CU_ASSERT_EQUAL(q->pipes[i].strategy, p->pipes[i].strategy);
        CU_ASSERT_EQUAL(q->pipes[i].p2p, p->pipes[i].p2p);
        CU_ASSERT_EQUAL(q->pipes[i].chunks, p->pipes[i].chunks);
        CU_ASSERT_EQUAL(q->pipes[i].ratio, p->pipes[i].ratio);
        CU_ASSERT_EQUAL(q->pipes[i].reference, p->pipes[i].reference);
    }
    CU_ASSERT_EQUAL(q->nsplits, 2);
    CU_ASSERT_EQUAL(memcmp(q->splits, p->splits, sizeof(p->splits[0]) * 2), 0);
    CU_ASSERT_EQUAL(q->nshapes, p->nshapes);
    CU_ASSERT_EQUAL(memcmp(q->shapes, p->shapes, sizeof(p->shapes[0]) * (size_t)p->nshapes), 0);
    CU_ASSERT_EQUAL(q->interference[HN_TRAFFIC_CE], 0.03125);
    CU_ASSERT_EQUAL(q->interference[HN_TRAFFIC_NCCL], -1); /* null: not measured */
    /* and the same text again */
    again = text_of(q);
    CU_ASSERT_STRING_EQUAL(again, text);
    /* any machine when none is asked for */
    CU_ASSERT_EQUAL(hn_profile_parse(text, strlen(text), NULL, 0, q, &why), HN_OK);
    /* the model reads the same from both */
    {
        hn_pipe_shape a = {HN_PIPE_MM_RS, 16384, 8192, 8192, HN_BF16, 2, p}, b = a;
        hn_pipe_plan pa, pb;
        char err[128];
        b.prof = q;
        memset(&pa, 0, sizeof(pa));
        pa.via = HN_VIA_AUTO;
        pb = pa;
        CU_ASSERT_EQUAL(hn_pipe_choose(&a, HN_OPF_SEQUENTIAL | HN_OPF_RING | HN_OPF_COLLECTIVE, &pa, err, 128), HN_OK);
        CU_ASSERT_EQUAL(hn_pipe_choose(&b, HN_OPF_SEQUENTIAL | HN_OPF_RING | HN_OPF_COLLECTIVE, &pb, err, 128), HN_OK);
        CU_ASSERT_EQUAL(pa.seconds, pb.seconds);
        CU_ASSERT_EQUAL(pa.strategy, pb.strategy);
    }
    hn_sb_free(&why);
    hn_string_free(again);
    hn_string_free(text);
    free(p);
    free(q);
}

/* text with `from` replaced by `to` (once) is refused with `st` and a
 * message holding `want` */
static void refused(const char *text, const char *from, const char *to, hn_status_t st, const char *want)
{
    const char *at = strstr(text, from);
    size_t n = strlen(text) + strlen(to) + 1;
    char *t = malloc(n);
    hn_cost_profile *q = malloc(sizeof(*q));
    hn_strbuf why;
    hn_status_t got;
    if (at == NULL)
        fprintf(stderr, "\n  not in the sample: %s\n", from);
    CU_ASSERT_PTR_NOT_NULL_FATAL(at);
    CU_ASSERT_PTR_NOT_NULL_FATAL(t);
    CU_ASSERT_PTR_NOT_NULL_FATAL(q);
    snprintf(t, n, "%.*s%s%s", (int)(at - text), text, to, at + strlen(from));
    memset(q, 0x5a, sizeof(*q));
    q->count = 12345; /* untouched on failure */
    hn_sb_init(&why);
    got = hn_profile_parse(t, strlen(t), "NVIDIA H200", 2, q, &why);
    if (got != st || why.data == NULL || strstr(why.data, want) == NULL)
        fprintf(stderr, "\n  %s -> %s: status %d, \"%s\" (want \"%s\")\n", from, to, (int)got,
                why.data ? why.data : "", want);
    CU_ASSERT_EQUAL(got, st);
    CU_ASSERT_PTR_NOT_NULL(why.data != NULL ? strstr(why.data, want) : NULL);
    CU_ASSERT_EQUAL(q->count, 12345);
    hn_sb_free(&why);
    free(t);
    free(q);
}

static void test_malformed(void)
{
    /* text with `from` replaced by `to`: refused with `st`, the message
     * holding `want` */
    static const struct {
        const char *from, *to;
        hn_status_t st;
        const char *want;
    } cases[] = {
        /* not a profile, or not of this version */
        {"\"format\": \"hirnode-profile\"", "\"format\": \"hirnode-trace\"",
         HN_ERR_PARSE, "format: expected \"hirnode-profile\", not \"hirnode-trace\""},
        {"\"format\": \"hirnode-profile\",", "", HN_ERR_PARSE, "format: missing"},
        {"\"version\": 1", "\"version\": 2", HN_ERR_PARSE, "version 2; this hirnode reads version 1"},
        {"\"version\": 1", "\"version\": \"1\"", HN_ERR_PARSE, "version: expected a number, not a string"},
        {"\"version\": 1", "\"version\": 0.5", HN_ERR_PARSE, "version: expected an integer"},
        /* foreign: another model or count */
        {"\"model\": \"NVIDIA H200\"", "\"model\": \"NVIDIA H100 80GB HBM3\"",
         HN_ERR_INVALID, "measured on NVIDIA H100 80GB HBM3 x2, not on this machine's NVIDIA H200 x2"},
        {"\"count\": 2", "\"count\": 4",
         HN_ERR_INVALID, "measured on NVIDIA H200 x4, not on this machine's NVIDIA H200 x2"},
        /* values out of range, of the wrong type, missing */
        {"\"count\": 2", "\"count\": 0", HN_ERR_PARSE, "machine.count: expected an integer from 1 to 256"},
        {"\"count\": 2", "\"count\": 2.5", HN_ERR_PARSE, "machine.count: expected an integer"},
        {"\"count\": 2", "\"count\": 1e300", HN_ERR_PARSE, "machine.count"},
        {"\"backend\": \"cuda\"", "\"backend\": \"tpu\"", HN_ERR_PARSE, "machine.backend: expected"},
        {"\"backend\": \"cuda\"", "\"backend\": 7", HN_ERR_PARSE, "machine.backend: expected a string, not a number"},
        {"\"model\": \"NVIDIA H200\"", "\"model\": \"NVIDIA\\u0000H200\"", HN_ERR_PARSE, "without NUL"},
        {"\"machine\": {", "\"machine\": [], \"x\": {", HN_ERR_PARSE, "machine: expected an object, not an array"},
        {"\"gemm\": {", "\"mmeg\": {", HN_ERR_PARSE, "gemm: missing"},
        {"\"bf16\": {\"tflops_at_1t\": ", "\"bf16\": {\"tflops_at_1t\": -",
         HN_ERR_PARSE, "gemm.bf16.tflops_at_1t: expected a number from"},
        {"\"gamma\": ", "\"gamma\": 3", HN_ERR_PARSE, "gemm.bf16.gamma"},
        {"\"f32\": {", "\"f64\": {", HN_ERR_PARSE, "gemm.f32: missing"},
        {"{\"dtype\": \"bf16\", \"M\"", "{\"dtype\": \"i32\", \"M\"",
         HN_ERR_PARSE, "gemm.measured[0].dtype: expected bf16, f16 or f32, not \"i32\""},
        {"\"M\": 32768, \"K\": 16384", "\"M\": 0, \"K\": 16384", HN_ERR_PARSE, "gemm.measured[0].M"},
        {"\"seq_overhead_us\": ", "\"seq_overhead_us\": -", HN_ERR_PARSE, "model.seq_overhead_us"},
        {"\"kappa\": {\"gather\": {\"nccl\": ", "\"kappa\": {\"gather\": {\"nccl\": -",
         HN_ERR_PARSE, "model.kappa.gather.nccl"},
        {"\"tau_us\": {\"gather\"", "\"tau_us\": {\"gathers\"", HN_ERR_PARSE, "model.tau_us.gather: missing"},
        {"\"hbm_gbps\": ", "\"hbm_gbps\": -", HN_ERR_PARSE, "model.hbm_gbps"},
        {"\"interference\": {\"copy_engines\": ", "\"interference\": {\"copy_engines\": -",
         HN_ERR_PARSE, "interference.copy_engines"},
        {"\"shapes\": [[32768, 16384, 8192]", "\"shapes\": [[32768, 16384]",
         HN_ERR_PARSE, "shapes[0]: expected [M, K, N]"},
        {"\"shapes\": [[32768, 16384, 8192]", "\"shapes\": [[32768, 0, 8192]",
         HN_ERR_PARSE, "shapes[0][1]: expected an integer from 1 to 1048576"},
        {"\"collectives\": [", "\"collectives\": {}, \"y\": [",
         HN_ERR_PARSE, "collectives: expected an array, not an object"},
        {"{\"kind\": \"allgather\", \"engine\": \"nccl\"", "{\"kind\": \"broadcast\", \"engine\": \"nccl\"",
         HN_ERR_PARSE, "collectives[0].kind: expected allgather, reduce_scatter or allreduce, not \"broadcast\""},
        {"{\"kind\": \"allgather\", \"engine\": \"nccl\"", "{\"kind\": \"allgather\", \"engine\": \"tcp\"",
         HN_ERR_PARSE, "collectives[0].engine: expected nccl, p2p put, p2p get or ll, not \"tcp\""},
        {"\"engine\": \"nccl\", \"ranks\": 2", "\"engine\": \"nccl\", \"ranks\": 1",
         HN_ERR_PARSE, "collectives[0].ranks: expected an integer from 2 to 256"},
        {"\"bytes\": [8192, 16384", "\"bytes\": [16384, 8192",
         HN_ERR_PARSE, "collectives[0].bytes: not increasing at 1"},
        {"\"bytes\": [8192, 16384", "\"bytes\": [16384", HN_ERR_PARSE, "collectives[0]: 17 sizes but 18 times"},
        {"\"us\": [11.04", "\"us\": [0", HN_ERR_PARSE, "collectives[0].us[0]: expected a number from"},
        {"\"bytes\": [8192", "\"bytes\": [\"8192\"", HN_ERR_PARSE, "collectives[0].bytes[0]"},
        {"\"bytes\": [8192, ", "\"bytes\": [], \"x\": [8192, ",
         HN_ERR_PARSE, "collectives[0].bytes: expected 1 to 24 numbers, not 0"},
        {"{\"kind\": \"allgather\", \"engine\": \"p2p put\", \"ranks\": 2",
         "{\"kind\": \"allgather\", \"engine\": \"nccl\", \"ranks\": 2",
         HN_ERR_PARSE, "collectives[1]: a second curve of allgather via nccl on 2 ranks"},
        {"{\"op\": \"ag_matmul\"", "{\"op\": \"matmul\"",
         HN_ERR_PARSE, "pipelines[0].op: expected ag_matmul, matmul_rs or matmul_ar, not \"matmul\""},
        {"\"strategy\": \"sequential\"", "\"strategy\": \"auto\"", HN_ERR_PARSE, "pipelines[0].strategy"},
        {"\"via\": \"nccl\"", "\"via\": \"ll\"",
         HN_ERR_PARSE, "pipelines[0].via: expected nccl, p2p put or p2p get, not \"ll\""},
        {"\"ratio\": ", "\"ratio\": -", HN_ERR_PARSE, "pipelines[0].ratio"},
        {"\"reference\": false", "\"reference\": 0",
         HN_ERR_PARSE, "pipelines[0].reference: expected true or false, not a number"},
        {"\"chunks\": 2, \"streams\": 1", "\"chunks\": 0, \"streams\": 1",
         HN_ERR_PARSE, "splits[0].chunks: expected an integer from 1 to 4096"},
        {"\"chunks\": 2, \"streams\": 1", "\"chunks\": 2, \"streams\": 17",
         HN_ERR_PARSE, "splits[0].streams: expected an integer from 1 to 16"},
        {"\"streams\": 1, \"ratio\": ", "\"streams\": 1, \"ratio\": -", HN_ERR_PARSE, "splits[0].ratio"},
        {"\"splits\": [", "\"splits\": {}, \"z\": [", HN_ERR_PARSE, "splits: expected an array, not an object"},
    };
    hn_cost_profile *p = sample();
    char *text;
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    text = text_of(p);
    CU_ASSERT_PTR_NOT_NULL_FATAL(text);
    for (int i = 0; i < HN_ARRAY_LEN(cases); i++)
        refused(text, cases[i].from, cases[i].to, cases[i].st, cases[i].want);
    /* not JSON, or another document */
    refused(text, "{\n  \"format\"", "[1]\n  \"format\"", HN_ERR_PARSE, "");
    refused(text, "\"version\": 1,", "\"version\": 1,,", HN_ERR_PARSE, "");
    {
        hn_cost_profile *q = malloc(sizeof(*q));
        hn_strbuf why;
        CU_ASSERT_PTR_NOT_NULL_FATAL(q);
        hn_sb_init(&why);
        CU_ASSERT_EQUAL(hn_profile_parse("[1]", 3, NULL, 0, q, &why), HN_ERR_PARSE);
        CU_ASSERT_STRING_EQUAL(why.data, "expected an object");
        hn_sb_free(&why);
        hn_sb_init(&why);
        CU_ASSERT_EQUAL(hn_profile_parse("", 0, NULL, 0, q, &why), HN_ERR_PARSE);
        CU_ASSERT_PTR_NOT_NULL(why.data);
        hn_sb_free(&why);
        /* too many curves */
        {
            hn_cost_profile *many = sample();
            char *t;
            CU_ASSERT_PTR_NOT_NULL_FATAL(many);
            for (int i = many->ncurves; i < HN_COST_MAX_CURVES; i++) {
                many->curves[i] = many->curves[0];
                many->curves[i].n = 100 + i; /* each its own */
            }
            many->ncurves = HN_COST_MAX_CURVES;
            t = text_of(many);
            CU_ASSERT_EQUAL(hn_profile_parse(t, strlen(t), NULL, 0, q, &why), HN_OK); /* 64: the most */
            refused(t, "\"collectives\": [",
                    "\"collectives\": [{\"kind\": \"allgather\", \"engine\": \"ll\", \"ranks\": 3, "
                    "\"bytes\": [1], \"us\": [1]},",
                    HN_ERR_PARSE, "collectives: 65 curves, at most 64");
            hn_string_free(t);
            free(many);
        }
        hn_sb_free(&why);
        free(q);
    }
    /* every prefix of a file: refused, with a message, never read past */
    {
        size_t len = strlen(text);
        hn_cost_profile *q = malloc(sizeof(*q));
        int all = 1;
        CU_ASSERT_PTR_NOT_NULL_FATAL(q);
        /* (the last byte is the newline after the whole; every byte near
         * the ends, every 13th between) */
        for (size_t k = 0; k + 1 < len; k += k < 300 || k + 300 > len ? 1 : 13) {
            hn_strbuf why;
            char *cut = malloc(k + 1);
            CU_ASSERT_PTR_NOT_NULL_FATAL(cut);
            memcpy(cut, text, k); /* no terminator the reader could lean on */
            hn_sb_init(&why);
            all &= hn_profile_parse(cut, k, NULL, 0, q, &why) == HN_ERR_PARSE && why.data != NULL;
            hn_sb_free(&why);
            free(cut);
        }
        CU_ASSERT_TRUE(all);
        free(q);
    }
    hn_string_free(text);
    free(p);
}

static char tmpdir[64];

static void write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    fputs(text, f);
    fclose(f);
}

/* What is written on stderr while fn(arg) runs. */
static char *stderr_of(void (*fn)(void *), void *arg)
{
    char path[128];
    int saved = dup(2), fd;
    char *text;
    snprintf(path, sizeof(path), "%s/stderr", tmpdir);
    fflush(stderr);
    fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    CU_ASSERT_FATAL(fd >= 0 && saved >= 0);
    dup2(fd, 2);
    close(fd);
    fn(arg);
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    text = hn_test_read_file(path, NULL);
    return text != NULL ? text : calloc(1, 1);
}

/* A backend that is not emulated (a GPU backend's table as the lookup
 * reads it: CUDA=0 builds have none of their own). */
static hn_device_ops gpu_like;

typedef struct lookup {
    const hn_device_ops *dev;
    const char *model;
    int count;
    const hn_cost_profile *got;
} lookup;

static void do_lookup(void *arg)
{
    lookup *l = arg;
    l->got = hn_profile_get(l->dev, l->model, l->count);
}

static void test_files_and_lookup(void)
{
    hn_cost_profile *p = sample(), *q = malloc(sizeof(*q));
    char path[128], bad[128], buf[600];
    char *text, *err;
    hn_strbuf why;
    lookup l = {&hn_device_host, "host", 2, NULL};
    const hn_cost_profile *first;
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    CU_ASSERT_PTR_NOT_NULL_FATAL(q);
    snprintf(tmpdir, sizeof(tmpdir), "/tmp/hn-profile-XXXXXX");
    CU_ASSERT_PTR_NOT_NULL_FATAL(mkdtemp(tmpdir));
    /* a host profile of 2 ranks */
    snprintf(p->model, sizeof(p->model), "host");
    snprintf(p->backend, sizeof(p->backend), "host");
    text = text_of(p);
    snprintf(path, sizeof(path), "%s/host-x2.json", tmpdir);
    write_file(path, text);
    hn_sb_init(&why);
    CU_ASSERT_EQUAL(hn_profile_read(path, "host", 2, q, &why), HN_OK);
    CU_ASSERT_STRING_EQUAL(q->source, path);
    hn_profile_describe(q, buf, sizeof(buf));
    CU_ASSERT_PTR_NOT_NULL(strstr(buf, path));
    CU_ASSERT_PTR_NOT_NULL(strstr(buf, "on host x2"));
    /* files that cannot be read */
    CU_ASSERT_EQUAL(hn_profile_read(tmpdir, "host", 2, q, &why), HN_ERR_IO);
    CU_ASSERT_PTR_NOT_NULL(strstr(why.data, "not a regular file"));
    hn_sb_free(&why);
    snprintf(bad, sizeof(bad), "%s/missing.json", tmpdir);
    CU_ASSERT_EQUAL(hn_profile_read(bad, "host", 2, q, &why), HN_ERR_IO);
    CU_ASSERT_PTR_NOT_NULL(strstr(why.data, "cannot read"));
    hn_sb_free(&why);
    snprintf(bad, sizeof(bad), "%s/big.json", tmpdir);
    CU_ASSERT_EQUAL(truncate((write_file(bad, ""), bad), HN_PROFILE_MAX_BYTES + 1), 0);
    CU_ASSERT_EQUAL(hn_profile_read(bad, "host", 2, q, &why), HN_ERR_IO);
    CU_ASSERT_PTR_NOT_NULL(strstr(why.data, "more than"));
    hn_sb_free(&why);
    /* the runtime's lookup: the named file, kept */
    setenv("HIRNODE_PROFILE", path, 1);
    err = stderr_of(do_lookup, &l);
    CU_ASSERT_PTR_NOT_NULL_FATAL(l.got);
    CU_ASSERT_FALSE(l.got->builtin);
    CU_ASSERT_STRING_EQUAL(l.got->source, path);
    CU_ASSERT_STRING_EQUAL(err, ""); /* no warning */
    free(err);
    first = l.got;
    CU_ASSERT_PTR_EQUAL(hn_profile_get(&hn_device_host, "host", 2), first);
    /* a runtime of 2 ranks uses it; of 3, the default, with a warning */
    if (strcmp(hn_test_backend, "host") == 0) {
        hn_runtime *rt = hn_test_runtime("host", 2, 0, 60, 0);
        CU_ASSERT_PTR_NOT_NULL_FATAL(rt);
        CU_ASSERT_PTR_EQUAL(rt->profile, first);
        hn_runtime_destroy(rt);
    }
    l.count = 3;
    err = stderr_of(do_lookup, &l);
    CU_ASSERT_TRUE(l.got->builtin);
    CU_ASSERT_PTR_NOT_NULL(strstr(l.got->source, "built-in default for host"));
    CU_ASSERT_PTR_NOT_NULL(strstr(err, path));
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "measured on host x2, not on this machine's host x3"));
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "using the built-in default for host"));
    free(err);
    /* malformed, truncated, another version: each named, the default used */
    {
        static const struct {
            const char *from, *to, *want;
        } cases[] = {
            {"\"version\": 1", "\"version\": 9", "version 9; this hirnode reads version 1"},
            {"\"collectives\": [", "\"collectives\": [}", "not valid JSON (truncated?): line "},
            {"\"gemm\": {", "\"gemm\": 5, \"z\": {", "gemm: expected an object"},
        };
        for (int i = 0; i < HN_ARRAY_LEN(cases) + 1; i++) {
            char f[160], *t;
            snprintf(f, sizeof(f), "%s/bad%d.json", tmpdir, i);
            if (i < HN_ARRAY_LEN(cases)) {
                const char *at = strstr(text, cases[i].from);
                CU_ASSERT_PTR_NOT_NULL_FATAL(at);
                t = malloc(strlen(text) + 64);
                sprintf(t, "%.*s%s%s", (int)(at - text), text, cases[i].to, at + strlen(cases[i].from));
            } else { /* truncated */
                t = strdup(text);
                t[strlen(t) / 2] = '\0';
            }
            write_file(f, t);
            free(t);
            setenv("HIRNODE_PROFILE", f, 1);
            l.count = 2;
            err = stderr_of(do_lookup, &l);
            CU_ASSERT_TRUE(l.got->builtin);
            CU_ASSERT_PTR_NOT_NULL(strstr(err, f));
            {
                const char *want = i < HN_ARRAY_LEN(cases) ? cases[i].want : "not valid JSON (truncated?): line ";
                if (strstr(err, want) == NULL)
                    fprintf(stderr, "\n  case %d: %s", i, err);
                CU_ASSERT_PTR_NOT_NULL(strstr(err, want));
            }
            CU_ASSERT_PTR_NOT_NULL(strstr(err, "using the built-in default for host"));
            free(err);
        }
    }
    unsetenv("HIRNODE_PROFILE");
    /* on GPUs, without the variable: the default file if it exists */
    {
        char home[128], want[256];
        char *old_home = getenv("HOME") ? strdup(getenv("HOME")) : NULL;
        char *old_xdg = getenv("XDG_CACHE_HOME") ? strdup(getenv("XDG_CACHE_HOME")) : NULL;
        setenv("XDG_CACHE_HOME", tmpdir, 1);
        CU_ASSERT_TRUE(hn_profile_default_path("NVIDIA H100 80GB HBM3", 4, buf, sizeof(buf)));
        snprintf(want, sizeof(want), "%s/hirnode/profile-NVIDIA-H100-80GB-HBM3-x4.json", tmpdir);
        CU_ASSERT_STRING_EQUAL(buf, want);
        CU_ASSERT_FALSE(hn_profile_default_path("NVIDIA H200", 2, buf, 16)); /* does not fit */
        gpu_like = hn_device_host;
        gpu_like.name = "gpu";
        gpu_like.emulated = 0;
        l = (lookup){&gpu_like, "NVIDIA H100 80GB HBM3", 4, NULL};
        err = stderr_of(do_lookup, &l);
        CU_ASSERT_TRUE(l.got->builtin); /* none there yet: silently the default */
        CU_ASSERT_STRING_EQUAL(err, "");
        CU_ASSERT_PTR_NOT_NULL(strstr(l.got->source, "not measured on an H100"));
        free(err);
        snprintf(home, sizeof(home), "%s/hirnode", tmpdir);
        CU_ASSERT_EQUAL(mkdir(home, 0700), 0);
        *p = *hn_cost_builtin();
        p->builtin = 0;
        snprintf(p->model, sizeof(p->model), "NVIDIA H100 80GB HBM3");
        p->count = 4;
        hn_string_free(text);
        text = text_of(p);
        write_file(want, text);
        err = stderr_of(do_lookup, &l);
        CU_ASSERT_FALSE(l.got->builtin);
        CU_ASSERT_STRING_EQUAL(l.got->source, want);
        free(err);
        /* a relative XDG_CACHE_HOME is ignored, then HOME */
        setenv("XDG_CACHE_HOME", "relative", 1);
        setenv("HOME", "/home/someone", 1);
        CU_ASSERT_TRUE(hn_profile_default_path("host", 2, buf, sizeof(buf)));
        CU_ASSERT_STRING_EQUAL(buf, "/home/someone/.cache/hirnode/profile-host-x2.json");
        unsetenv("XDG_CACHE_HOME");
        unsetenv("HOME");
        CU_ASSERT_FALSE(hn_profile_default_path("host", 2, buf, sizeof(buf)));
        remove(want);
        rmdir(home);
        if (old_home != NULL)
            setenv("HOME", old_home, 1);
        if (old_xdg != NULL)
            setenv("XDG_CACHE_HOME", old_xdg, 1);
        free(old_home);
        free(old_xdg);
    }
    /* the built-in defaults' labels */
    hn_profile_builtin_for("NVIDIA H200", 0, q);
    CU_ASSERT_TRUE(q->builtin);
    CU_ASSERT_PTR_NOT_NULL(strstr(q->source, "built-in default for NVIDIA H200 (measured on 2 and 4 H200s)"));
    hn_profile_builtin_for("host", 1, q);
    CU_ASSERT_PTR_NOT_NULL(strstr(q->source, "the CPU emulation picks as a GPU machine does"));
    hn_profile_builtin_for("NVIDIA A100-SXM4-80GB", 0, q);
    CU_ASSERT_PTR_NOT_NULL(strstr(q->source, "none for it"));
    hn_profile_describe(q, buf, sizeof(buf));
    CU_ASSERT_STRING_EQUAL(buf, q->source);
    {
        char model[96], cuda[24];
        hn_profile_device_model(&hn_device_host, model, sizeof(model), cuda, sizeof(cuda));
        CU_ASSERT_STRING_EQUAL(model, "host");
        CU_ASSERT_STRING_EQUAL(cuda, "-");
    }
    for (int i = 0; i < 8; i++) {
        char f[160];
        snprintf(f, sizeof(f), "%s/bad%d.json", tmpdir, i);
        remove(f);
    }
    remove(path);
    remove(bad);
    snprintf(buf, sizeof(buf), "%s/stderr", tmpdir);
    remove(buf);
    CU_ASSERT_EQUAL(rmdir(tmpdir), 0);
    hn_string_free(text);
    free(p);
    free(q);
}

void hn_suite_profile(void)
{
    static CU_TestInfo tests[] = {
        {"written and read back exactly", test_round_trip},
        {"every malformed, truncated, foreign or other-version file refused, its field named", test_malformed},
        {"files, the default's path, the lookup a runtime makes and its warnings", test_files_and_lookup},
        CU_TEST_INFO_NULL,
    };
    hn_test_add_suite("model/profile", tests);
}
