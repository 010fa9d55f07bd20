/* Tests of src/runtime/runtime.c and eval.c through the public API: runs
 * with bindings, stable addresses, stream ordering, error propagation. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "hirnode/runtime.h"
#include "exec/fault_inject.h"
#include "ranks/runtime_int.h"
#include "runtime/backend.h"
#include "runtime/check.h"
#include "../test.h"


static void test_create_destroy(void)
{
    hn_runtime_config cfg;
    hn_runtime *rt = NULL;
    char *said;
    for (int n = 1; n <= hn_test_max_ranks(); n *= 2) {
        rt = hn_test_runtime(NULL, n, 0, 10, 0);
        CU_ASSERT_PTR_NOT_NULL_FATAL(rt);
        CU_ASSERT_EQUAL(hn_runtime_size(rt), n);
        CU_ASSERT_STRING_EQUAL(hn_runtime_backend(rt), hn_test_backend);
        CU_ASSERT_PTR_EQUAL(rt->dev, hn_device_find(hn_test_backend));
        CU_ASSERT_EQUAL(hn_runtime_device_kind(rt), rt->dev->kind);
        hn_runtime_destroy(rt);
    }
    hn_runtime_config_default(&cfg);
    cfg.backend = "nonesuch";
    rt = NULL;
    hn_test_capture_begin(); /* the refusals are logged: checked, not shown */
    CU_ASSERT_EQUAL(hn_runtime_create(&cfg, &rt), HN_ERR_INVALID);
    CU_ASSERT_PTR_NULL(rt);
    cfg.backend = hn_test_backend;
    cfg.ndev = 0;
    CU_ASSERT_EQUAL(hn_runtime_create(&cfg, &rt), HN_ERR_INVALID);
    said = hn_test_capture_end();
    CU_ASSERT_PTR_NOT_NULL(strstr(said, "hirnode error: unknown backend 'nonesuch'"));
    CU_ASSERT_PTR_NOT_NULL(strstr(said, "hirnode error: rank count 0 out of range [1, 256]"));
    free(said);
}

/* The backend a configuration takes: hn_runtime_pick_backend (which the
 * tools ask) agrees with what hn_runtime_create takes, `auto` never takes
 * an emulated backend while another has the devices, and refusals say
 * why. */
static void test_pick_backend(void)
{
    hn_runtime_config cfg;
    hn_runtime *rt = NULL;
    const hn_device_ops *d;
    hn_strbuf why;
    int two[2] = {1, 0};
    hn_runtime_config_default(&cfg);
    hn_sb_init(&why);
    cfg.backend = hn_test_backend;
    cfg.ndev = HN_MIN(2, hn_test_max_ranks()); /* as many devices as the backend has, up to 2 */
    CU_ASSERT_PTR_EQUAL(hn_runtime_pick_backend(&cfg, &why), hn_device_find(hn_test_backend));
    cfg.backend = "host";
    CU_ASSERT_PTR_EQUAL(hn_runtime_pick_backend(&cfg, &why), &hn_device_host);
    CU_ASSERT_PTR_NULL(why.data);
    cfg.backend = "nonesuch";
    CU_ASSERT_PTR_NULL(hn_runtime_pick_backend(&cfg, &why));
    CU_ASSERT_PTR_NOT_NULL_FATAL(why.data);
    CU_ASSERT_PTR_NOT_NULL(strstr(why.data, "unknown backend 'nonesuch' (this build has auto"));
    hn_sb_free(&why);
    for (int k = 0; k < 3; k++) { /* auto (NULL is auto too), with and without ordinals */
        cfg.backend = k == 0 ? NULL : "auto";
        cfg.ndev = k < 2 ? 1 : 2;
        cfg.devices = k == 2 ? two : NULL;
        d = hn_runtime_pick_backend(&cfg, &why);
        if (d == NULL) { /* ordinals past a GPU backend's devices: said */
            CU_ASSERT_PTR_NOT_NULL(why.data);
            hn_sb_free(&why);
            continue;
        }
        for (int i = 0; d->emulated && hn_device_backends()[i] != NULL; i++)
            CU_ASSERT(hn_device_backends()[i]->emulated || hn_device_backends()[i]->device_count() < cfg.ndev);
        CU_ASSERT(d->device_count() >= cfg.ndev);
        if (d == hn_device_find(hn_test_backend)) { /* a runtime takes the same */
            CU_ASSERT_EQUAL_FATAL(hn_runtime_create(&cfg, &rt), HN_OK);
            CU_ASSERT_PTR_EQUAL(rt->dev, d);
            CU_ASSERT_EQUAL(hn_runtime_device_kind(rt), d->kind);
            hn_runtime_destroy(rt);
        }
    }
    hn_sb_free(&why);
}

/* A runtime of n host ranks with world, first rank and rendezvous as
 * given: its status and diag (freed by the caller). */
static hn_status_t create_world(int n, int world, int rank, const char *rendezvous, char **diag)
{
    hn_runtime_config cfg;
    hn_runtime *rt = NULL;
    hn_status_t st;
    hn_runtime_config_default(&cfg);
    cfg.backend = hn_test_backend;
    cfg.ndev = n;
    cfg.world = world;
    cfg.rank = rank;
    cfg.rendezvous = rendezvous;
    st = hn_runtime_create_ex(&cfg, &rt, diag);
    if (st == HN_OK) {
        CU_ASSERT_EQUAL(hn_runtime_size(rt), n);
        CU_ASSERT_EQUAL(hn_runtime_world(rt), world == 0 ? n : world);
        CU_ASSERT_EQUAL(hn_runtime_first_rank(rt), rank);
        hn_runtime_destroy(rt);
    } else {
        CU_ASSERT_PTR_NULL(rt);
    }
    return st;
}

/* A store for hn_runtime_create_store that says yes or no, and keeps
 * what it was given. */
typedef struct test_store {
    int set_ok, get_ok, sets, gets;
    char key[128], value[512];
} test_store;

static int store_set(void *ctx, const char *key, const char *value)
{
    test_store *s = ctx;
    s->sets++;
    snprintf(s->key, sizeof(s->key), "%s", key);
    snprintf(s->value, sizeof(s->value), "%s", value);
    return s->set_ok ? 0 : 1;
}

static int store_get(void *ctx, const char *key, char *value, size_t cap, double timeout_s)
{
    test_store *s = ctx;
    (void)timeout_s;
    s->gets++;
    snprintf(s->key, sizeof(s->key), "%s", key);
    if (!s->get_ok)
        return 1;
    snprintf(value, cap, "%s", s->value);
    return 0;
}

/* Meeting through a caller's store (one process here, so no world is
 * joined): rank 0 makes a directory and publishes it, and removes it when
 * the store refuses; another rank that gets nothing says so; a world in
 * one process, or one with a rendezvous given, leaves the store alone;
 * what is missing is refused. Keys count the meetings of the process. */
static void test_create_store(void)
{
    test_store s = {0};
    hn_world_store store = {store_set, store_get, &s};
    hn_runtime_config cfg;
    hn_runtime *rt = NULL;
    char *diag = NULL;
    int k1, k2;
    hn_runtime_config_default(&cfg);
    cfg.backend = hn_test_backend;
    cfg.ndev = 1;
    cfg.world = 2;
    cfg.rank = 0;
    cfg.rendezvous = NULL;
    cfg.timeout_s = 2;
    CU_ASSERT_EQUAL(hn_runtime_create_store(&cfg, &store, &rt, &diag), HN_ERR_IO);
    CU_ASSERT_PTR_NULL(rt);
    CU_ASSERT_EQUAL(s.sets, 1);
    CU_ASSERT_EQUAL(sscanf(s.key, "hirnode/rendezvous/2/%d", &k1), 1);
    CU_ASSERT_PTR_NOT_NULL(strstr(s.value, "/hirnode-rdv-"));
    CU_ASSERT_NOT_EQUAL(access(s.value, F_OK), 0); /* made, refused, removed */
    CU_ASSERT_PTR_NOT_NULL(diag != NULL ? strstr(diag, "rank 0 of a world of 2: the store refused hirnode/rendezvous/2/")
                                        : NULL);
    hn_string_free(diag);
    cfg.rank = 1;
    CU_ASSERT_EQUAL(hn_runtime_create_store(&cfg, &store, &rt, &diag), HN_ERR_TIMEOUT);
    CU_ASSERT_PTR_NULL(rt);
    CU_ASSERT_EQUAL(s.gets, 1);
    CU_ASSERT_EQUAL(sscanf(s.key, "hirnode/rendezvous/2/%d", &k2), 1);
    CU_ASSERT_EQUAL(k2, k1 + 1);
    CU_ASSERT_PTR_NOT_NULL(diag != NULL ? strstr(diag, "rank 1 of a world of 2: the store gave no rendezvous directory")
                                        : NULL);
    hn_string_free(diag);
    /* no meeting needed: the store is not asked */
    s.set_ok = s.get_ok = 1;
    s.sets = s.gets = 0;
    cfg.world = 1;
    cfg.rank = 0;
    CU_ASSERT_EQUAL_FATAL(hn_runtime_create_store(&cfg, &store, &rt, &diag), HN_OK);
    CU_ASSERT_PTR_NULL(diag);
    CU_ASSERT_EQUAL(hn_runtime_world(rt), 1);
    CU_ASSERT_PTR_NULL(rt->made_rdv);
    hn_runtime_destroy(rt);
    cfg.world = 2;
    cfg.rank = 1;
    cfg.rendezvous = "/nonexistent/hn-rv";
    CU_ASSERT_NOT_EQUAL(hn_runtime_create_store(&cfg, &store, &rt, &diag), HN_OK); /* the directory given: refused there */
    hn_string_free(diag);
    CU_ASSERT_EQUAL(s.sets + s.gets, 0);
    CU_ASSERT_EQUAL(hn_runtime_create_store(&cfg, NULL, &rt, &diag), HN_ERR_INVALID);
    CU_ASSERT_PTR_NOT_NULL(diag != NULL ? strstr(diag, "a store with set and get") : NULL);
    hn_string_free(diag);
}

/* The world and the ranks this runtime drives: all of them in one
 * process; several ranks of a world across processes, and ranks outside
 * the world, are refused with the reason. */
static void test_world(void)
{
    /* (a launcher's store would meet the world: none here) */
    static const char *const vars[] = {"HIRNODE_WORLD", "HIRNODE_RANK", "HIRNODE_RENDEZVOUS", "HIRNODE_STORE",
                                       "MASTER_ADDR", "MASTER_PORT"};
    char *saved[HN_ARRAY_LEN(vars)], *diag = NULL;
    int device0 = 0;
    int n = hn_test_max_ranks() < 2 ? 1 : 2;
    hn_runtime_config cfg;
    hn_runtime *rt;
    void *ptr = NULL, *stream = NULL;
    hn_test_env_save(vars, HN_ARRAY_LEN(vars), saved);
    CU_ASSERT_EQUAL(create_world(n, 0, 0, NULL, &diag), HN_OK);
    CU_ASSERT_EQUAL(create_world(n, n, 0, "/tmp/ignored", &diag), HN_OK);
    CU_ASSERT_PTR_NULL(diag);
    /* across processes: one rank per process, and a rendezvous */
    if (n > 1) {
        CU_ASSERT_EQUAL(create_world(n, n + 2, 1, "/tmp/hn-rv", &diag), HN_ERR_UNSUPPORTED);
        CU_ASSERT_PTR_NOT_NULL_FATAL(diag);
        CU_ASSERT_STRING_EQUAL(diag, "a world across processes takes one rank per process (this one asks for 2)");
        hn_string_free(diag);
    }
    CU_ASSERT_EQUAL(create_world(n, n + 1, 0, NULL, &diag), HN_ERR_INVALID);
    CU_ASSERT_PTR_NOT_NULL_FATAL(diag);
    CU_ASSERT_PTR_NOT_NULL(strstr(diag, "needs a rendezvous directory"));
    hn_string_free(diag);
    /* ranks outside the world, worlds out of range */
    CU_ASSERT_EQUAL(create_world(n, n, 1, NULL, &diag), HN_ERR_INVALID);
    CU_ASSERT_PTR_NOT_NULL(diag != NULL ? strstr(diag, "of a world of") : NULL);
    hn_string_free(diag);
    CU_ASSERT_EQUAL(create_world(n, n + 1, 2, "/tmp/hn-rv", &diag), HN_ERR_INVALID);
    hn_string_free(diag);
    CU_ASSERT_EQUAL(create_world(n, n, -1, NULL, &diag), HN_ERR_INVALID);
    hn_string_free(diag);
    CU_ASSERT_EQUAL(create_world(n, -1, 0, NULL, &diag), HN_ERR_INVALID);
    hn_string_free(diag);
    CU_ASSERT_EQUAL(create_world(n, 257, 0, "/tmp/hn-rv", &diag), HN_ERR_INVALID);
    hn_string_free(diag);
    if (n > 1) {
        CU_ASSERT_EQUAL(create_world(n, 1, 0, NULL, &diag), HN_ERR_INVALID); /* below ndev */
        CU_ASSERT_PTR_NOT_NULL(diag != NULL ? strstr(diag, "cannot hold the 2 ranks") : NULL);
        hn_string_free(diag);
    }
    /* the settings fill the fields; a world from them looks for its
     * rendezvous (there is none here) */
    setenv("HIRNODE_WORLD", "4", 1);
    setenv("HIRNODE_RANK", "3", 1);
    setenv("HIRNODE_RENDEZVOUS", "/tmp/hn-rv", 1);
    hn_runtime_config_default(&cfg);
    CU_ASSERT_EQUAL(cfg.world, 4);
    CU_ASSERT_EQUAL(cfg.rank, 3);
    CU_ASSERT_STRING_EQUAL(cfg.rendezvous != NULL ? cfg.rendezvous : "", "/tmp/hn-rv");
    cfg.backend = hn_test_backend;
    cfg.devices = &device0; /* rank 3 on device 0: any machine has it, so the rendezvous is what is missing */
    rt = NULL;
    CU_ASSERT_EQUAL(hn_runtime_create_ex(&cfg, &rt, &diag), HN_ERR_INVALID);
    CU_ASSERT_PTR_NULL(rt);
    CU_ASSERT_PTR_NOT_NULL(diag != NULL ? strstr(diag, "rendezvous /tmp/hn-rv: not a directory") : NULL);
    hn_string_free(diag);
    hn_test_env_restore(vars, HN_ARRAY_LEN(vars), saved);
    /* the per-rank calls take the ranks driven here only */
    rt = hn_test_runtime(NULL, n, 0, 10, 0);
    CU_ASSERT_PTR_NOT_NULL_FATAL(rt);
    CU_ASSERT_EQUAL(hn_runtime_world(rt), n);
    CU_ASSERT_EQUAL(hn_runtime_first_rank(rt), 0);
    CU_ASSERT_EQUAL(hn_runtime_device(rt, n), -1);
    CU_ASSERT_EQUAL(hn_runtime_device(rt, -1), -1);
    CU_ASSERT_EQUAL(hn_runtime_alloc(rt, n, 64, &ptr), HN_ERR_INVALID);
    CU_ASSERT_PTR_NULL(ptr);
    CU_ASSERT_EQUAL(hn_runtime_stream_create(rt, n, &stream), HN_ERR_INVALID);
    CU_ASSERT_EQUAL(hn_runtime_alloc(rt, n - 1, 64, &ptr), HN_OK);
    hn_runtime_free(rt, n - 1, ptr);
    hn_runtime_destroy(rt);
}

/* An embedding's view: its own buffers, run many times, allreduce + scale. */
static void test_run_with_bindings(void)
{
    const char *text = "param N = 64\n"
                       "input X : f32[N] replicated\n"
                       "output Y : f32[N] replicated\n"
                       "allreduce Y <- X op sum\n"
                       "scale Y <- Y, 0.5\n";
    hn_program *p = hn_test_parse(text, NULL);
    int nr = hn_test_max_ranks() < 4 ? hn_test_max_ranks() : 4;
    hn_runtime *rt = hn_test_runtime(NULL, nr, 5, 10, 0);
    void *x[4], *y[4];
    float host[64];
    size_t sz[4] = {sizeof(host), sizeof(host), sizeof(host), sizeof(host)};
    hn_binding b[2] = {{"X", x, sz}, {"Y", y, sz}};
    const char *names[] = {"N"};
    int64_t values[] = {64};
    hn_run_args args = {1, names, values, 2, b};
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    for (int r = 0; r < nr; r++) {
        CU_ASSERT_EQUAL(hn_runtime_alloc(rt, r, sizeof(host), &x[r]), HN_OK);
        CU_ASSERT_EQUAL(hn_runtime_alloc(rt, r, sizeof(host), &y[r]), HN_OK);
    }
    for (int k = 0; k < 8; k++) {
        for (int r = 0; r < nr; r++) {
            for (int i = 0; i < 64; i++)
                host[i] = (float)(r * i + k);
            hn_runtime_upload(rt, r, x[r], host, sizeof(host));
        }
        CU_ASSERT_EQUAL_FATAL(hn_runtime_run(rt, p, &args), HN_OK);
        for (int r = 0; r < nr; r++) {
            hn_runtime_download(rt, r, host, y[r], sizeof(host));
            for (int i = 0; i < 64; i++)
                CU_ASSERT_EQUAL(host[i], (float)(nr * (nr - 1) / 2 * i + nr * k) * 0.5f);
        }
    }
    /* a missing binding and an unknown parameter are clear errors */
    args.nbindings = 1;
    CU_ASSERT_EQUAL(hn_runtime_run(rt, p, &args), HN_ERR_INVALID);
    CU_ASSERT_PTR_NOT_NULL(strstr(hn_runtime_error(rt), "no binding for output 'Y'"));
    args.nbindings = 2;
    names[0] = "Q";
    CU_ASSERT_EQUAL(hn_runtime_run(rt, p, &args), HN_ERR_INVALID);
    CU_ASSERT_PTR_NOT_NULL(strstr(hn_runtime_error(rt), "no parameter named 'Q'"));
    /* a configuration the verifier rejects */
    names[0] = "N";
    values[0] = -1;
    CU_ASSERT_EQUAL(hn_runtime_run(rt, p, &args), HN_ERR_VERIFY);
    for (int r = 0; r < nr; r++) {
        hn_runtime_free(rt, r, x[r]);
        hn_runtime_free(rt, r, y[r]);
    }
    hn_runtime_destroy(rt);
    hn_program_destroy(p);
}

/* hn_runtime_register in one process checks its arguments and opens
 * nothing (every rank's memory is reached as it is); a run then binds the
 * memory as before. (Across processes: python/tests/test_procs.py on the
 * host backend, which refuses it; examples/python/tp_decode.py on GPUs.) */
static void test_register_in_one_process(void)
{
    const int n = HN_MIN(2, hn_test_max_ranks()), last = n - 1; /* the last rank: another thread's at 2 */
    hn_runtime *rt = hn_test_runtime(NULL, n, 0, 0, 0);
    void *x = NULL;
    char want[96];
    CU_ASSERT_PTR_NOT_NULL_FATAL(rt);
    CU_ASSERT_EQUAL_FATAL(hn_runtime_alloc(rt, last, 256, &x), HN_OK);
    CU_ASSERT_EQUAL(hn_runtime_register(rt, last, x, 256), HN_OK);
    CU_ASSERT_EQUAL(hn_runtime_register(rt, last, x, 256), HN_OK); /* again: nothing more */
    CU_ASSERT_EQUAL(hn_runtime_register(rt, last, NULL, 256), HN_ERR_INVALID);
    snprintf(want, sizeof(want), "hn_runtime_register: rank %d: a NULL pointer or no bytes", last);
    CU_ASSERT_PTR_NOT_NULL(strstr(hn_runtime_error(rt), want));
    CU_ASSERT_EQUAL(hn_runtime_register(rt, last, x, 0), HN_ERR_INVALID);
    CU_ASSERT_EQUAL(hn_runtime_register(rt, n, x, 256), HN_ERR_INVALID);
    snprintf(want, sizeof(want), "hn_runtime_register: rank %d is not driven here", n);
    CU_ASSERT_PTR_NOT_NULL(strstr(hn_runtime_error(rt), want));
    CU_ASSERT_EQUAL(hn_runtime_register(rt, -1, x, 256), HN_ERR_INVALID);
    CU_ASSERT_EQUAL(hn_runtime_register(NULL, 0, x, 256), HN_ERR_INVALID);
    hn_runtime_free(rt, last, x);
    hn_runtime_destroy(rt);
}

/* The same alloc returns the same address run after run. */
static void test_stable_addresses(void)
{
    const char *text = "param N = 16\noutput Y : f32[N] replicated\n"
                       "for i in 0 .. 3 {\n  t = alloc f32[N]\n  fill t <- i\n  add Y <- Y, t\n  free t\n}\n";
    hn_program *p = hn_test_parse(text, NULL);
    int nr = hn_test_max_ranks() < 2 ? 1 : 2;
    hn_runtime *rt = hn_test_runtime(NULL, nr, 0, 10, 0);
    void *y[2], *first[2][3];
    size_t sz[2] = {64, 64};
    hn_binding b = {"Y", y, sz};
    hn_run_args args = {0, NULL, NULL, 1, &b};
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    for (int r = 0; r < nr; r++)
        hn_runtime_alloc(rt, r, 64, &y[r]);
    for (int k = 0; k < 4; k++) {
        CU_ASSERT_EQUAL_FATAL(hn_runtime_run(rt, p, &args), HN_OK);
        for (int r = 0; r < nr; r++) {
            hn_rank *rk = &rt->ranks[r];
            CU_ASSERT_EQUAL(rk->nblocks, 3); /* one block per occurrence */
            for (int i = 0; i < rk->nblocks && i < 3; i++) {
                if (k == 0)
                    first[r][i] = rk->blocks[i].ptr;
                CU_ASSERT_PTR_EQUAL(rk->blocks[i].ptr, first[r][i]);
            }
        }
    }
    for (int r = 0; r < nr; r++)
        hn_runtime_free(rt, r, y[r]);
    hn_runtime_destroy(rt);
    hn_program_destroy(p);
}

/* Work on stream 1 after wait_stream sees what the caller's stream wrote;
 * with random delays a missing wait would show as a wrong value. */
static void test_wait_stream_orders(void)
{
    const char *text = "param N = 4096\noutput Y : f32[N] replicated\n"
                       "t = alloc f32[N]\n"
                       "s0 = current_stream\n"
                       "for k in 0 .. 8 {\n"
                       "  set_stream s0\n  fill t <- k\n"
                       "  set_stream stream(k % nstreams)\n  wait_stream s0\n"
                       "  add Y <- Y, t\n"
                       "  set_stream s0\n  wait_stream stream(k % nstreams)\n"
                       "}\n";
    hn_program *p = hn_test_parse(text, NULL);
    int nr = hn_test_max_ranks() < 2 ? 1 : 2;
    hn_runtime *rt = hn_test_runtime(NULL, nr, 200, 10, 0);
    void *y[2];
    float host[4096];
    size_t sz[2] = {sizeof(host), sizeof(host)};
    hn_binding b = {"Y", y, sz};
    hn_run_args args = {0, NULL, NULL, 1, &b};
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    for (int r = 0; r < nr; r++) {
        hn_runtime_alloc(rt, r, sizeof(host), &y[r]);
        memset(host, 0, sizeof(host));
        hn_runtime_upload(rt, r, y[r], host, sizeof(host));
    }
    CU_ASSERT_EQUAL_FATAL(hn_runtime_run(rt, p, &args), HN_OK);
    for (int r = 0; r < nr; r++) {
        hn_runtime_download(rt, r, host, y[r], sizeof(host));
        CU_ASSERT_EQUAL(host[0], 28.0f);
        CU_ASSERT_EQUAL(host[4095], 28.0f);
        hn_runtime_free(rt, r, y[r]);
    }
    hn_runtime_destroy(rt);
    hn_program_destroy(p);
}

/* Sends that block until received, posted before the receives on every
 * rank: the verifier cannot see it, the run times out on a named rank and
 * instruction, and the runtime still works afterwards. */
static void test_failing_run(void)
{
    /* On CUDA 64 MiB, beyond what NCCL buffers; the host communicator
     * never buffers, so 1 MiB there (under TSan every byte costs) */
    const char *size = strcmp(hn_test_backend, "cuda") == 0 ? "param E = 16 * 1024 * 1024\n"
                                                             : "param E = 256 * 1024\n";
    const char *cycle = "t = alloc f32[E]\nu = alloc f32[E]\n"
                        "send t to (rank + 1) % world\nrecv u from (rank - 1) % world\n";
    const char *ring = "t = alloc f32[E]\nu = alloc f32[E]\n"
                       "group {\n send t to (rank + 1) % world\n recv u from (rank - 1) % world\n}\n";
    char cycle_text[512], ring_text[512];
    hn_program *p, *q;
    int nr = hn_test_max_ranks() < 3 ? hn_test_max_ranks() : 3;
    hn_runtime *rt = hn_test_runtime(NULL, nr, 0, 3, 0);
    hn_run_args args = {0, NULL, NULL, 0, NULL};
    hn_strbuf err;
    double t0;
    snprintf(cycle_text, sizeof(cycle_text), "%s%s", size, cycle);
    snprintf(ring_text, sizeof(ring_text), "%s%s", size, ring);
    p = hn_test_parse(cycle_text, NULL);
    q = hn_test_parse(ring_text, NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    CU_ASSERT_PTR_NOT_NULL_FATAL(q);
    if (nr < 2) {
        /* one rank sends to itself: nothing to deadlock */
        hn_runtime_destroy(rt);
        hn_program_destroy(p);
        hn_program_destroy(q);
        return;
    }
    /* a lone send/recv cycle is refused before anything runs, whatever
     * the communicator (NCCL at 2 GPUs faulted on it rather than hang) */
    CU_ASSERT_EQUAL(hn_runtime_run(rt, p, &args), HN_ERR_VERIFY);
    CU_ASSERT_PTR_NOT_NULL(strstr(hn_runtime_error(rt), "would hang"));
    /* rank 0 stops issuing at the group: its peers time out naming it,
     * the first failure names file, line, rank and instruction */
    hn_sb_init(&err);
    CU_ASSERT_EQUAL(hn_runtime_set_faults(rt, "0:4:stop", &err), HN_OK);
    t0 = hn_now();
    CU_ASSERT_EQUAL(hn_runtime_run(rt, q, &args), HN_ERR_TIMEOUT);
    CU_ASSERT(hn_now() - t0 < 30);
    CU_ASSERT_PTR_NOT_NULL(strstr(hn_runtime_error(rt), "t.hir:4:1: error: rank "));
    CU_ASSERT_PTR_NOT_NULL(strstr(hn_runtime_error(rt), ": group { ... }: "));
    CU_ASSERT_PTR_NOT_NULL(strstr(hn_runtime_error(rt), "rank 0"));
    /* the runtime stays usable */
    CU_ASSERT_EQUAL(hn_runtime_set_faults(rt, NULL, &err), HN_OK);
    CU_ASSERT_EQUAL(hn_runtime_run(rt, q, &args), HN_OK);
    CU_ASSERT_STRING_EQUAL(hn_runtime_error(rt), "");
    hn_sb_free(&err);
    hn_runtime_destroy(rt);
    hn_program_destroy(p);
    hn_program_destroy(q);
}

/* Pool streams are made before the run, exactly those the dry run saw
 * (on CUDA each holds a cuBLASLt workspace: no allocation mid-run). */
static void test_streams_made_before_run(void)
{
    const char *text = "output Y : i64[8] replicated\ns0 = current_stream\nset_stream stream(5)\n"
                       "iota Y <- rank, 1\nset_stream s0\nwait_stream stream(2)\nwait_stream stream(5)\n";
    hn_program *p = hn_test_parse(text, NULL);
    hn_runtime *rt = hn_test_runtime(NULL, 1, 0, 10, 0);
    void *y[1];
    size_t sz[1] = {64};
    hn_binding b = {"Y", y, sz};
    hn_run_args args = {0, NULL, NULL, 1, &b};
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    CU_ASSERT_EQUAL(hn_runtime_alloc(rt, 0, 64, &y[0]), HN_OK);
    CU_ASSERT_EQUAL(hn_runtime_run(rt, p, &args), HN_OK);
    for (int k = 0; k < HN_MAX_STREAMS; k++)
        CU_ASSERT_EQUAL(rt->ranks[0].streams[k] != NULL, k == 2 || k == 5);
    hn_runtime_free(rt, 0, y[0]);
    hn_runtime_destroy(rt);
    hn_program_destroy(p);
}

/* A program parsed after another was destroyed may get its address (glibc
 * hands the block straight back): the runtime's caches must not take it
 * for the verified one. */
static void test_new_program_at_old_address(void)
{
    const char *good = "t = alloc f32[4]\nu = alloc f32[4]\n"
                       "group {\n send t to (rank + 1) % world\n recv u from (rank - 1) % world\n}\n";
    const char *bad = "t = alloc f32[4]\nu = alloc f32[4]\n"
                      "group {\n send t to rank\n recv u from (rank - 1) % world\n}\n";
    hn_runtime *rt;
    hn_run_args args = {0, NULL, NULL, 0, NULL};
    hn_program *p, *q;
    uint64_t uid;
    if (hn_test_max_ranks() < 2)
        return; /* one rank sends to itself either way */
    rt = hn_test_runtime(NULL, 2, 0, 10, 0);
    p = hn_test_parse(good, NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(rt);
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    uid = p->uid;
    CU_ASSERT_EQUAL(hn_runtime_run(rt, p, &args), HN_OK);
    hn_program_destroy(p);
    q = hn_test_parse(bad, NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(q);
    CU_ASSERT_NOT_EQUAL(q->uid, uid);
    CU_ASSERT_EQUAL(hn_runtime_run(rt, q, &args), HN_ERR_VERIFY);
    CU_ASSERT_PTR_NOT_NULL(strstr(hn_runtime_error(rt), "never receives it"));
    hn_program_destroy(q);
    hn_runtime_destroy(rt);
}

/* Launches on the caller's streams, back to back with no host sync, on two
 * streams per rank in turn, with random stream delays: each launch reads
 * its own input and writes its own output through a buffer all launches
 * share, so launches that overlapped would mix them up. */
#define LAUNCHES 12
#define LN 256
static const char *launch_text =
    "param N = 256\n"
    "input  X : f32[N] replicated\n"
    "output Y : f32[N] replicated\n"
    "T = alloc f32[N]\n"
    "copy T <- X\n"
    "s0 = current_stream\n"
    "set_stream stream(1)\n"
    "wait_stream s0\n"
    "scale T <- T, 2.0\n"
    "allreduce T <- T op sum\n"
    "set_stream s0\n"
    "wait_stream stream(1)\n"
    "copy Y <- T\n";

static void test_launches(void)
{
    hn_program *p = hn_test_parse(launch_text, NULL);
    int nr = hn_test_max_ranks() < 4 ? hn_test_max_ranks() : 4;
    hn_runtime *rt = hn_test_runtime(NULL, nr, strcmp(hn_test_backend, "host") == 0 ? 50 : 0, 20, 0);
    void *x[LAUNCHES][8], *y[LAUNCHES][8], *streams[2][8];
    float host[LN], got[LN];
    int wrong = 0, prepared;
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    CU_ASSERT_PTR_NOT_NULL_FATAL(rt);
    for (int r = 0; r < nr; r++)
        for (int k = 0; k < 2; k++)
            CU_ASSERT_EQUAL_FATAL(hn_runtime_stream_create(rt, r, &streams[k][r]), HN_OK);
    for (int l = 0; l < LAUNCHES; l++)
        for (int r = 0; r < nr; r++) {
            for (int i = 0; i < LN; i++)
                host[i] = (float)(l * 1000 + r * 10 + i % 7);
            CU_ASSERT_EQUAL_FATAL(hn_runtime_alloc(rt, r, sizeof(host), &x[l][r]), HN_OK);
            CU_ASSERT_EQUAL_FATAL(hn_runtime_alloc(rt, r, sizeof(host), &y[l][r]), HN_OK);
            CU_ASSERT_EQUAL(hn_runtime_upload(rt, r, x[l][r], host, sizeof(host)), HN_OK);
        }
    for (int l = 0; l < LAUNCHES; l++) {
        size_t sz[8] = {sizeof(host), sizeof(host), sizeof(host), sizeof(host),
                        sizeof(host), sizeof(host), sizeof(host), sizeof(host)};
        hn_binding b[2] = {{"X", x[l], sz}, {"Y", y[l], sz}};
        hn_run_args args = {0, NULL, NULL, 2, b};
        /* the first prepares the configuration; the others only issue */
        CU_ASSERT_EQUAL(hn_runtime_launch(rt, p, &args, l == 3 ? NULL : streams[l % 2]), HN_OK);
        if (l == 0)
            prepared = rt->preparations;
    }
    CU_ASSERT_EQUAL(rt->inflight, LAUNCHES); /* none collected yet */
    CU_ASSERT_EQUAL(rt->preparations, prepared);
    CU_ASSERT_EQUAL(hn_runtime_sync(rt), HN_OK);
    CU_ASSERT_EQUAL(hn_runtime_query(rt), HN_OK);
    for (int l = 0; l < LAUNCHES; l++)
        for (int r = 0; r < nr; r++) {
            CU_ASSERT_EQUAL(hn_runtime_download(rt, r, got, y[l][r], sizeof(got)), HN_OK);
            for (int i = 0; i < LN; i++) {
                float want = 0;
                for (int q = 0; q < nr; q++)
                    want += 2.0f * (float)(l * 1000 + q * 10 + i % 7);
                wrong += got[i] != want;
            }
        }
    CU_ASSERT_EQUAL(wrong, 0);
    for (int l = 0; l < LAUNCHES; l++)
        for (int r = 0; r < nr; r++) {
            hn_runtime_free(rt, r, x[l][r]);
            hn_runtime_free(rt, r, y[l][r]);
        }
    for (int r = 0; r < nr; r++)
        hn_runtime_stream_destroy(rt, r, streams[1][r]);
    hn_runtime_forget(rt, p);
    hn_runtime_destroy(rt); /* and the streams left */
    hn_program_destroy(p);
}

/* A launch that fails asynchronously is reported by the next call that
 * collects the launches; nothing new is issued; then the runtime works. */
static void test_launch_failure(void)
{
    hn_program *p = hn_test_parse(launch_text, NULL);
    int nr = hn_test_max_ranks() < 2 ? hn_test_max_ranks() : 2;
    hn_runtime *rt = hn_test_runtime(NULL, nr, 0, 10, 0);
    void *x[8], *y[8];
    size_t sz[8] = {LN * 4, LN * 4, LN * 4, LN * 4, LN * 4, LN * 4, LN * 4, LN * 4};
    hn_binding b[2] = {{"X", x, sz}, {"Y", y, sz}};
    hn_run_args args = {0, NULL, NULL, 2, b};
    hn_strbuf err;
    hn_status_t st;
    if (strcmp(hn_test_backend, "host") != 0) { /* an async fault on CUDA is a host function: fine, but slow to set up */
        hn_runtime_destroy(rt);
        hn_program_destroy(p);
        return;
    }
    hn_sb_init(&err);
    for (int r = 0; r < nr; r++) {
        CU_ASSERT_EQUAL_FATAL(hn_runtime_alloc(rt, r, LN * 4, &x[r]), HN_OK);
        CU_ASSERT_EQUAL_FATAL(hn_runtime_alloc(rt, r, LN * 4, &y[r]), HN_OK);
    }
    CU_ASSERT_EQUAL(hn_runtime_set_faults(rt, "0:9:async", &err), HN_OK);
    /* the fault runs on the stream; it may stop the launch while its ranks
     * still issue, or be found by the next launch, or by the sync */
    st = hn_runtime_launch(rt, p, &args, NULL);
    if (st == HN_OK)
        st = hn_runtime_launch(rt, p, &args, NULL);
    if (st == HN_OK)
        st = hn_runtime_sync(rt);
    CU_ASSERT_EQUAL(st, HN_ERR_DEVICE);
    CU_ASSERT_PTR_NOT_NULL(strstr(hn_runtime_error(rt), "t.hir:9:1: error: rank 0: scale T <- T, 2.0: "
                                                       "an asynchronous device error (injected)"));
    CU_ASSERT_EQUAL(rt->inflight, 0);
    CU_ASSERT_EQUAL(hn_runtime_set_faults(rt, NULL, &err), HN_OK);
    CU_ASSERT_EQUAL(hn_runtime_launch(rt, p, &args, NULL), HN_OK);
    CU_ASSERT_EQUAL(hn_runtime_sync(rt), HN_OK);
    CU_ASSERT_STRING_EQUAL(hn_runtime_error(rt), "");
    for (int r = 0; r < nr; r++) {
        hn_runtime_free(rt, r, x[r]);
        hn_runtime_free(rt, r, y[r]);
    }
    hn_sb_free(&err);
    hn_runtime_destroy(rt);
    hn_program_destroy(p);
}

/* A free (which returns nothing) after a launch that fails: the block is
 * given back all the same, the failure kept for the next sync, which
 * reports it once; a launch in between returns it without issuing. */
static void test_free_after_failed_launch(void)
{
    hn_program *p = hn_test_parse(launch_text, NULL);
    hn_runtime *rt = hn_test_runtime(NULL, 1, 0, 10, 0);
    void *x[1], *y[1], *extra;
    size_t sz[1] = {LN * 4}, free0 = 0, free1 = 0, total = 0;
    hn_binding b[2] = {{"X", x, sz}, {"Y", y, sz}};
    hn_run_args args = {0, NULL, NULL, 2, b};
    hn_strbuf err;
    if (strcmp(hn_test_backend, "host") != 0) { /* the fault's set-up is the host's (as above) */
        hn_runtime_destroy(rt);
        hn_program_destroy(p);
        return;
    }
    hn_sb_init(&err);
    CU_ASSERT_EQUAL_FATAL(hn_runtime_alloc(rt, 0, LN * 4, &x[0]), HN_OK);
    CU_ASSERT_EQUAL_FATAL(hn_runtime_alloc(rt, 0, LN * 4, &y[0]), HN_OK);
    CU_ASSERT_EQUAL(hn_runtime_launch(rt, p, &args, NULL), HN_OK); /* its buffers made and kept */
    CU_ASSERT_EQUAL(hn_runtime_sync(rt), HN_OK);
    CU_ASSERT_EQUAL(hn_runtime_mem_info(rt, 0, &free0, &total), HN_OK);
    CU_ASSERT_EQUAL_FATAL(hn_runtime_alloc(rt, 0, 1 << 20, &extra), HN_OK);
    CU_ASSERT_EQUAL(hn_runtime_set_faults(rt, "0:9:async", &err), HN_OK);
    if (hn_runtime_launch(rt, p, &args, NULL) == HN_OK) {
        hn_runtime_free(rt, 0, extra); /* collects the failed launch */
        CU_ASSERT_EQUAL(hn_runtime_launch(rt, p, &args, NULL), HN_ERR_DEVICE); /* nothing issued */
        CU_ASSERT_PTR_NOT_NULL(strstr(hn_runtime_error(rt), "an asynchronous device error (injected)"));
        CU_ASSERT_EQUAL(rt->inflight, 0);
        CU_ASSERT_EQUAL(hn_runtime_sync(rt), HN_OK); /* said once */
    } else { /* the fault stopped the launch while it issued */
        hn_runtime_free(rt, 0, extra);
    }
    CU_ASSERT_EQUAL(hn_runtime_mem_info(rt, 0, &free1, &total), HN_OK);
    CU_ASSERT_EQUAL(free1, free0); /* the block given back */
    CU_ASSERT_EQUAL(hn_runtime_set_faults(rt, NULL, &err), HN_OK);
    CU_ASSERT_EQUAL(hn_runtime_launch(rt, p, &args, NULL), HN_OK);
    CU_ASSERT_EQUAL(hn_runtime_sync(rt), HN_OK);
    hn_runtime_free(rt, 0, x[0]);
    hn_runtime_free(rt, 0, y[0]);
    hn_sb_free(&err);
    hn_runtime_destroy(rt);
    hn_program_destroy(p);
}

/* A server switching between a few batch sizes pays each dry run once. */
static void test_prepared_configurations(void)
{
    const char *text = "param N = 8\noutput Y : f32[N] replicated\nfill Y <- 1.0\n";
    hn_program *p = hn_test_parse(text, NULL);
    hn_runtime *rt = hn_test_runtime(NULL, 1, 0, 10, 0);
    void *y[1];
    size_t sz[1] = {32 * 4};
    hn_binding b = {"Y", y, sz};
    const char *names[] = {"N"};
    int64_t sizes[] = {8, 16, 8, 32, 16, 8};
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    CU_ASSERT_EQUAL_FATAL(hn_runtime_alloc(rt, 0, 32 * 4, &y[0]), HN_OK);
    for (int i = 0; i < HN_ARRAY_LEN(sizes); i++) {
        hn_run_args args = {1, names, &sizes[i], 1, &b};
        CU_ASSERT_EQUAL(hn_runtime_run(rt, p, &args), HN_OK);
    }
    CU_ASSERT_EQUAL(rt->preparations, 3);
    /* more configurations than it remembers: the oldest is prepared again */
    for (int64_t n = 1; n <= HN_VERIFIED_CONFIGS + 1; n++) {
        hn_run_args args = {1, names, &n, 1, &b};
        CU_ASSERT_EQUAL(hn_runtime_run(rt, p, &args), HN_OK);
    }
    /* 8 and 16 were prepared already, and still there when their turn comes (32 went first) */
    CU_ASSERT_EQUAL(rt->preparations, 3 + HN_VERIFIED_CONFIGS + 1 - 2);
    hn_runtime_free(rt, 0, y[0]);
    hn_runtime_destroy(rt);
    hn_program_destroy(p);
}

/* Buffers cached for one program are given back when another program's
 * preparation runs out of device memory; the first is prepared anew at its
 * next run. Each program's scratch takes 60 % of the device, so the two
 * never fit at once. */
static void test_memory_given_back(void)
{
    const char *text = "param R = 1\noutput Y : f32[4] replicated\nT = alloc f32[R, 4]\n"
                       "fill T <- %s\ncopy Y <- T[R - 1]\n";
    char a_text[256], b_text[256];
    hn_program *a, *b;
    char *saved = getenv("HIRNODE_HOST_MEM_MIB") ? strdup(getenv("HIRNODE_HOST_MEM_MIB")) : NULL;
    hn_runtime *rt;
    size_t free_b = 0, total_b = 0;
    float out[4];
    void *y[1];
    size_t sz[1] = {sizeof(out)};
    hn_binding bind = {"Y", y, sz};
    const char *names[] = {"R"};
    int64_t n;
    setenv("HIRNODE_HOST_MEM_MIB", "64", 1); /* the host backend's devices: 64 MiB */
    rt = hn_test_runtime(NULL, 1, 0, 30, 0);
    if (saved != NULL) {
        setenv("HIRNODE_HOST_MEM_MIB", saved, 1);
        free(saved);
    } else {
        unsetenv("HIRNODE_HOST_MEM_MIB");
    }
    snprintf(a_text, sizeof(a_text), text, "2.0");
    snprintf(b_text, sizeof(b_text), text, "3.0");
    a = hn_test_parse(a_text, NULL);
    b = hn_test_parse(b_text, NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(rt);
    CU_ASSERT_PTR_NOT_NULL_FATAL(a);
    CU_ASSERT_PTR_NOT_NULL_FATAL(b);
    CU_ASSERT_EQUAL_FATAL(hn_runtime_alloc(rt, 0, sizeof(out), &y[0]), HN_OK);
    CU_ASSERT_EQUAL_FATAL(hn_runtime_mem_info(rt, 0, &free_b, &total_b), HN_OK);
    n = (int64_t)(free_b / 10 * 6 / 16); /* rows of 16 bytes */
    for (int k = 0; k < 3; k++) {
        hn_program *p = k % 2 == 0 ? a : b;
        hn_run_args args = {1, names, &n, 1, &bind};
        CU_ASSERT_EQUAL(hn_runtime_run(rt, p, &args), HN_OK);
        if (hn_runtime_error(rt)[0] != '\0')
            fprintf(stderr, "\n  run %d: %s\n", k, hn_runtime_error(rt));
        CU_ASSERT_EQUAL(hn_runtime_download(rt, 0, out, y[0], sizeof(out)), HN_OK);
        for (int i = 0; i < 4; i++)
            CU_ASSERT_EQUAL(out[i], k % 2 == 0 ? 2.0f : 3.0f);
    }
    CU_ASSERT_EQUAL(rt->preparations, 3); /* a, b, a again */
    {
        /* the caller's allocations too: a's buffers give way */
        void *big = NULL;
        hn_run_args args = {1, names, &n, 1, &bind};
        CU_ASSERT_EQUAL(hn_runtime_alloc(rt, 0, (size_t)n * 16, &big), HN_OK);
        hn_runtime_free(rt, 0, big);
        CU_ASSERT_EQUAL(hn_runtime_run(rt, a, &args), HN_OK);
        CU_ASSERT_EQUAL(rt->preparations, 4);
        /* more than the device: an error that says how much is free */
        CU_ASSERT_EQUAL(hn_runtime_alloc(rt, 0, total_b + 1, &big), HN_ERR_NOMEM);
        CU_ASSERT_PTR_NOT_NULL(strstr(hn_runtime_error(rt), "cannot allocate"));
        CU_ASSERT_PTR_NOT_NULL(strstr(hn_runtime_error(rt), "bytes free"));
    }
    hn_runtime_free(rt, 0, y[0]);
    hn_runtime_destroy(rt);
    hn_program_destroy(a);
    hn_program_destroy(b);
}

/* The --check driver prepares its program once, then allocates the
 * inputs and outputs; when those take the device memory the preparation
 * held (every program's cached buffers give way), its run prepares the
 * program anew. B's scratch takes 45 % of the device, A's 30 %, A's input
 * 30 %: A prepared beside B, its input does not fit until both give way. */
static void test_check_prepares_anew(void)
{
    const char *b_text = "param R = 1\noutput Y : f32[4] replicated\nT = alloc f32[R, 4]\nfill T <- 2.0\n"
                         "copy Y <- T[R - 1]\nreference {\n  fill Y <- 2.0\n}\n";
    const char *a_text = "param R = 1\ninput X : f32[R, 4] replicated\noutput Y : f32[4] replicated\n"
                         "T = alloc f32[R, 4]\ncopy T <- X\ncopy Y <- T[R - 1]\n"
                         "reference {\n  copy Y <- X[R - 1]\n}\n";
    char *saved = getenv("HIRNODE_HOST_MEM_MIB") ? strdup(getenv("HIRNODE_HOST_MEM_MIB")) : NULL;
    hn_program *a = hn_test_parse(a_text, NULL), *b = hn_test_parse(b_text, NULL);
    hn_runtime *rt;
    size_t free_b = 0, total_b = 0;
    const char *names[] = {"R"};
    int64_t rows;
    hn_check_opts o;
    hn_check_result res;
    hn_strbuf diag;
    setenv("HIRNODE_HOST_MEM_MIB", "64", 1); /* the host backend's devices: 64 MiB */
    rt = hn_test_runtime(NULL, 1, 0, 30, 0);
    if (saved != NULL) {
        setenv("HIRNODE_HOST_MEM_MIB", saved, 1);
        free(saved);
    } else {
        unsetenv("HIRNODE_HOST_MEM_MIB");
    }
    CU_ASSERT_PTR_NOT_NULL_FATAL(rt);
    CU_ASSERT_PTR_NOT_NULL_FATAL(a);
    CU_ASSERT_PTR_NOT_NULL_FATAL(b);
    if (!rt->dev->emulated) {
        /* --check builds its inputs and reference on the host: a third of
         * a GPU's memory (tens of GB) would take minutes; the 64 MiB
         * devices of the host backend show the same */
        hn_runtime_destroy(rt);
        hn_program_destroy(a);
        hn_program_destroy(b);
        return;
    }
    CU_ASSERT_EQUAL_FATAL(hn_runtime_mem_info(rt, 0, &free_b, &total_b), HN_OK);
    memset(&o, 0, sizeof(o));
    o.iters = 2;
    o.seed = 1;
    o.check = 1;
    o.noverrides = 1;
    o.names = names;
    o.values = &rows;
    for (int k = 0; k < 2; k++) {
        rows = (int64_t)(free_b / 100 * (k == 0 ? 45 : 30) / 16); /* rows of 16 bytes */
        hn_sb_init(&diag);
        CU_ASSERT_EQUAL(hn_check_run(rt, k == 0 ? b : a, &o, &res, &diag), HN_OK);
        if (diag.data != NULL || hn_runtime_error(rt)[0] != '\0')
            fprintf(stderr, "\n  check %d: %s%s\n", k, diag.data ? diag.data : "", hn_runtime_error(rt));
        CU_ASSERT_TRUE(res.passed);
        CU_ASSERT_EQUAL(res.checked, 1);
        hn_sb_free(&diag);
    }
    CU_ASSERT_EQUAL(rt->preparations, 3); /* B, A, A again */
    hn_runtime_destroy(rt);
    hn_program_destroy(a);
    hn_program_destroy(b);
}

/* A host_sync waits for the current stream only. */
static void test_host_sync(void)
{
    const char *text = "output Y : i64[8] replicated\nset_stream stream(2)\niota Y <- rank, 1\nhost_sync\n";
    hn_program *p = hn_test_parse(text, NULL);
    int nr = hn_test_max_ranks() < 2 ? 1 : 2;
    hn_runtime *rt = hn_test_runtime(NULL, nr, 100, 10, 0);
    void *y[2];
    int64_t host[8];
    size_t sz[2] = {sizeof(host), sizeof(host)};
    hn_binding b = {"Y", y, sz};
    hn_run_args args = {0, NULL, NULL, 1, &b};
    for (int r = 0; r < nr; r++)
        hn_runtime_alloc(rt, r, sizeof(host), &y[r]);
    CU_ASSERT_EQUAL(hn_runtime_run(rt, p, &args), HN_OK);
    for (int r = 0; r < nr; r++) {
        hn_runtime_download(rt, r, host, y[r], sizeof(host));
        CU_ASSERT_EQUAL(host[7], r + 7);
        hn_runtime_free(rt, r, y[r]);
    }
    hn_runtime_destroy(rt);
    hn_program_destroy(p);
}

void hn_suite_runtime(void)
{
    static CU_TestInfo tests[] = {
        {"create and destroy", test_create_destroy},
        {"the backend a configuration takes, asked without a runtime", test_pick_backend},
        {"the world and the ranks driven here; a world across processes is refused", test_world},
        {"a world met through the caller's store: its directory made, published, refused, removed", test_create_store},
        {"runs with the caller's buffers", test_run_with_bindings},
        {"registering memory in one process checks it and opens nothing", test_register_in_one_process},
        {"stable addresses across runs", test_stable_addresses},
        {"wait_stream orders streams (random delays)", test_wait_stream_orders},
        {"a failing rank ends the run with an error", test_failing_run},
        {"host_sync", test_host_sync},
        {"pool streams are made before the run", test_streams_made_before_run},
        {"a new program at a destroyed one's address is verified anew", test_new_program_at_old_address},
        {"launches on caller streams, back to back, with random delays", test_launches},
        {"a failed launch is reported by the next collecting call", test_launch_failure},
        {"a free after a failed launch gives the block back and keeps the failure", test_free_after_failed_launch},
        {"prepared configurations are remembered", test_prepared_configurations},
        {"another program's buffers are given back when memory runs out", test_memory_given_back},
        {"a --check run whose own buffers take its program's back prepares it anew", test_check_prepares_anew},
        CU_TEST_INFO_NULL,
    };
    hn_test_add_suite("runtime/runtime", tests);
}
