/* Back-to-back runs of the AllGather+linear peer-copy ring
 * (examples/ag_matmul_p2p.hir) with random sizes on one runtime, each
 * checked against the reference: HN_STRESS_RUNS runs (100 by default; the
 * GPU validation asks for 1000). A run that hangs, fails or mismatches
 * fails the test. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hirnode/runtime.h"
#include "runtime/check.h"
#include "../test.h"

static void test_random_sizes(void)
{
    hn_program *p = NULL;
    hn_runtime_config cfg;
    hn_runtime *rt = NULL;
    const char *env = getenv("HN_STRESS_RUNS");
    int runs = env != NULL ? atoi(env) : 100, n = hn_test_max_ranks() < 4 ? hn_test_max_ranks() : 4;
    int passed = 0;
    uint64_t rng = 2026;
    double t0 = hn_now();
    CU_ASSERT_EQUAL_FATAL(hn_program_load("examples/ag_matmul_p2p.hir", &p, NULL), HN_OK);
    hn_runtime_config_default(&cfg);
    cfg.ndev = n;
    cfg.backend = hn_test_backend;
    cfg.timeout_s = 30;
    CU_ASSERT_EQUAL_FATAL(hn_runtime_create(&cfg, &rt), HN_OK);
    for (int k = 0; k < runs; k++) {
        const char *names[] = {"M", "K", "N"};
        /* rows per rank 1..64 (any, also odd), K and N multiples of 8 */
        int64_t values[3] = {(int64_t)(1 + hn_splitmix64(&rng) % 64) * n, (int64_t)(8 * (1 + hn_splitmix64(&rng) % 32)),
                             (int64_t)(8 * (1 + hn_splitmix64(&rng) % 16))};
        hn_check_opts o;
        hn_check_result res;
        hn_strbuf diag;
        hn_status_t st;
        memset(&o, 0, sizeof(o));
        o.iters = 1;
        o.seed = (uint64_t)k + 1;
        o.check = 1;
        o.noverrides = 3;
        o.names = names;
        o.values = values;
        hn_sb_init(&diag);
        st = hn_check_run(rt, p, &o, &res, &diag);
        if (st != HN_OK || !res.passed) {
            fprintf(stderr, "\n  run %d (M=%lld K=%lld N=%lld): %s %s %s\n", k, (long long)values[0],
                    (long long)values[1], (long long)values[2], hn_status_string(st), diag.data ? diag.data : "",
                    hn_runtime_error(rt));
            hn_sb_free(&diag);
            break;
        }
        hn_sb_free(&diag);
        passed++;
    }
    printf("\n  stress: %d of %d runs of the p2p AG+linear ring passed at %d ranks on %s (%.1f s)\n", passed, runs,
           n, hn_test_backend, hn_now() - t0);
    CU_ASSERT_EQUAL(passed, runs);
    hn_runtime_destroy(rt);
    hn_program_destroy(p);
}

/* Back-to-back runs of every pipelined strategy (allgather + matmul,
 * matmul + reduce_scatter, matmul + allreduce; sequential, ring put/get,
 * per-chunk collectives, broadcast; NCCL or p2p) with random sizes, chunks
 * and stream counts, each checked against its reference:
 * HN_STRESS_STRATEGY_RUNS runs (60 by default; the GPU validation asks for
 * 1000). */
typedef struct stress_case {
    const char *form; /* the statement before its options */
    const char *shapes; /* A, B, C declarations, %s for the dtype */
    const char *options;
} stress_case;

static const stress_case strategy_cases[] = {
    {"matmul C <- allgather(A), B", "ag", "strategy=sequential, via=nccl"},
    {"matmul C <- allgather(A), B", "ag", "strategy=ring, via=p2p, protocol=put"},
    {"matmul C <- allgather(A), B", "ag", "strategy=ring, via=p2p, protocol=get"},
    {"matmul C <- allgather(A), B", "ag", "strategy=collective, via=nccl"},
    {"matmul C <- allgather(A), B", "ag", "strategy=collective, via=p2p"},
    {"matmul C <- allgather(A), B", "ag", "strategy=broadcast, via=nccl"},
    {"matmul C <- allgather(A), B", "ag", "strategy=auto"},
    {"reduce_scatter C <- matmul(A, B)", "rs", "strategy=sequential, via=nccl"},
    {"reduce_scatter C <- matmul(A, B)", "rs", "strategy=ring, via=p2p"},
    {"reduce_scatter C <- matmul(A, B)", "rs", "strategy=collective, via=nccl"},
    {"reduce_scatter C <- matmul(A, B)", "rs", "strategy=auto"},
    {"allreduce C <- matmul(A, B)", "ar", "strategy=sequential, via=nccl"},
    {"allreduce C <- matmul(A, B)", "ar", "strategy=collective, via=nccl"},
    {"allreduce C <- matmul(A, B)", "ar", "strategy=collective, via=p2p"},
    {"allreduce C <- matmul(A, B)", "ar", "strategy=auto"},
};

/* graphs: each run three times, the second captured and the third
 * replayed (the setting graphs = 1), with random stream delays on the host
 * backend; the check reads the last replay's output. */
static void every_strategy(int graphs)
{
    const char *env = getenv(graphs ? "HN_STRESS_GRAPH_RUNS" : "HN_STRESS_STRATEGY_RUNS");
    int runs = env != NULL ? atoi(env) : graphs ? 30 : 60, n = hn_test_max_ranks() < 4 ? hn_test_max_ranks() : 4;
    int passed = 0, tried = 0;
    uint64_t rng = 4711;
    hn_runtime *rts[4] = {NULL, NULL, NULL, NULL}; /* 1..4 streams */
    double t0 = hn_now();
    for (int s = 0; s < 4; s++) {
        hn_runtime_config cfg;
        hn_runtime_config_default(&cfg);
        cfg.ndev = n;
        cfg.nstreams = s + 1;
        cfg.backend = hn_test_backend;
        cfg.timeout_s = 30;
        cfg.graphs = graphs;
        cfg.host_delay_us = graphs && strcmp(hn_test_backend, "host") == 0 ? 20 : 0;
        CU_ASSERT_EQUAL_FATAL(hn_runtime_create(&cfg, &rts[s]), HN_OK);
    }
    for (int k = 0; k < runs; k++) {
        const stress_case *c = &strategy_cases[k % HN_ARRAY_LEN(strategy_cases)];
        int streams = (int)(hn_splitmix64(&rng) % 4);
        /* rows: a multiple of world times chunks that divide; K, N any */
        int64_t rows = (int64_t)(1 + hn_splitmix64(&rng) % 8) * 4 * n, K = 8 * (int64_t)(1 + hn_splitmix64(&rng) % 16);
        int64_t N = 8 * (int64_t)(1 + hn_splitmix64(&rng) % 8);
        const char *dt = hn_splitmix64(&rng) % 2 ? "bf16" : "f32";
        char text[1024], chunks[32] = "";
        hn_program *p = NULL;
        hn_check_opts o;
        hn_check_result res;
        hn_strbuf diag;
        hn_status_t st;
        if (strstr(c->options, "collective") != NULL)
            snprintf(chunks, sizeof(chunks), ", chunks=%d", 1 << (hn_splitmix64(&rng) % 3));
        else if (strstr(c->options, "broadcast") != NULL) /* from each rank in turn */
            snprintf(chunks, sizeof(chunks), ", chunks=%d", n << (hn_splitmix64(&rng) % 2));
        if (strcmp(c->shapes, "ag") == 0)
            snprintf(text, sizeof(text),
                     "param M = %lld, K = %lld, N = %lld\ninput A : %s[M / world, K] shard(axis 0)\n"
                     "input B : %s[K, N] replicated\noutput C : %s[M, N] replicated\n%s pipelined(%s%s)\n"
                     "reference {\n  matmul C <- A, B\n}\n",
                     (long long)rows, (long long)K, (long long)N, dt, dt, dt, c->form, c->options, chunks);
        else
            snprintf(text, sizeof(text),
                     "param M = %lld, K = %lld, N = %lld\ninput A : %s[M, K / world] shard(axis 1)\n"
                     "input B : %s[K / world, N] shard(axis 0)\noutput C : %s[M%s, N] %s\n%s pipelined(%s%s)\n"
                     "reference {\n  matmul C <- A, B\n}\n",
                     (long long)rows, (long long)(K * n), (long long)N, dt, dt, dt,
                     strcmp(c->shapes, "rs") == 0 ? " / world" : "", strcmp(c->shapes, "rs") == 0 ? "shard(axis 0)" : "replicated",
                     c->form, c->options, chunks);
        p = hn_test_parse(text, NULL);
        CU_ASSERT_PTR_NOT_NULL_FATAL(p);
        memset(&o, 0, sizeof(o));
        o.iters = graphs ? 3 : 1;
        o.seed = (uint64_t)k + 7;
        o.check = 1;
        hn_sb_init(&diag);
        tried++;
        st = hn_check_run(rts[streams], p, &o, &res, &diag);
        if (st != HN_OK || !res.passed) {
            fprintf(stderr, "\n  strategy run %d at %d streams: %s %s %s\n%s", k, streams + 1, hn_status_string(st),
                    diag.data ? diag.data : "", hn_runtime_error(rts[streams]), text);
            hn_sb_free(&diag);
            hn_runtime_forget(rts[streams], p);
            hn_program_destroy(p);
            break;
        }
        passed++;
        hn_sb_free(&diag);
        hn_runtime_forget(rts[streams], p);
        hn_program_destroy(p);
    }
    printf("\n  stress: %d of %d runs of %d pipelined strategies passed at %d ranks, 1-4 streams, on %s%s (%.1f s)\n",
           passed, runs, HN_ARRAY_LEN(strategy_cases), n, hn_test_backend,
           graphs ? ", each captured and replayed" : "", hn_now() - t0);
    CU_ASSERT_EQUAL(passed, runs);
    CU_ASSERT_EQUAL(tried, runs);
    for (int s = 0; s < 4; s++)
        hn_runtime_destroy(rts[s]);
}

static void test_every_strategy(void) { every_strategy(0); }
static void test_every_strategy_replayed(void) { every_strategy(1); }

void hn_suite_stress(void)
{
    static CU_TestInfo tests[] = {
        {"back-to-back p2p ring runs with random sizes", test_random_sizes},
        {"back-to-back runs of every pipelined strategy, random sizes and streams", test_every_strategy},
        {"every pipelined strategy captured and replayed (graphs = 1)", test_every_strategy_replayed},
        CU_TEST_INFO_NULL,
    };
    hn_test_add_suite("tools/stress", tests);
}
