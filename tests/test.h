/* Shared test helpers and the list of suites. */
#ifndef HN_TEST_H
#define HN_TEST_H

#include <CUnit/CUnit.h>
#include <pthread.h>

#include "ir/ir.h"
#include "device/device.h"
#include "ir/parse.h"
#include "hirnode/runtime.h"

#define HN_SUITES                                                            \
    HN_SUITE(util)                                                           \
    HN_SUITE(npy)                                                            \
    HN_SUITE(expr)                                                           \
    HN_SUITE(fault)                                                          \
    HN_SUITE(shm)                                                            \
    HN_SUITE(world)                                                          \
    HN_SUITE(rendezvous)                                                     \
    HN_SUITE(store_tcp)                                                      \
    HN_SUITE(net)                                                            \
    HN_SUITE(parse)                                                          \
    HN_SUITE(print)                                                          \
    HN_SUITE(json)                                                           \
    HN_SUITE(verify)                                                         \
    HN_SUITE(device_host)                                                    \
    HN_SUITE(device_registry)                                                \
    HN_SUITE(repoint)                                                        \
    HN_SUITE(compute_host)                                                   \
    HN_SUITE(comm_host)                                                      \
    HN_SUITE(comm_p2p)                                                       \
    HN_SUITE(comm_ll)                                                        \
    HN_SUITE(comm_net)                                                       \
    HN_SUITE(compute_cuda)                                                   \
    HN_SUITE(ll_cuda)                                                        \
    HN_SUITE(runtime)                                                        \
    HN_SUITE(graph)                                                          \
    HN_SUITE(bind)                                                           \
    HN_SUITE(bind_cuda)                                                      \
    HN_SUITE(collectives)                                                    \
    HN_SUITE(trace)                                                          \
    HN_SUITE(trace_read)                                                     \
    HN_SUITE(trace_stats)                                                    \
    HN_SUITE(trace_svg)                                                      \
    HN_SUITE(lower)                                                          \
    HN_SUITE(lowered)                                                        \
    HN_SUITE(memory)                                                         \
    HN_SUITE(cost)                                                           \
    HN_SUITE(settings)                                                       \
    HN_SUITE(profile)                                                        \
    HN_SUITE(tune)                                                           \
    HN_SUITE(options)                                                        \
    HN_SUITE(examples)                                                       \
    HN_SUITE(extreme)                                                        \
    HN_SUITE(faults)                                                         \
    HN_SUITE(fuzz)                                                           \
    HN_SUITE(stress)

#define HN_SUITE(name) void hn_suite_##name(void);
HN_SUITES
#undef HN_SUITE

/* The backend the runtime suites run on (--backend), and how many ranks
 * they may use (its devices, at most 8). */
extern const char *hn_test_backend;
int hn_test_max_ranks(void);

/* Adds a suite with the given tests ({name, fn} pairs, NULL-terminated). */
void hn_test_add_suite(const char *name, CU_TestInfo *tests);

/* Variables vars[0 .. n-1] kept into saved (NULL: unset) and unset;
 * given back as they were (and saved freed) by hn_test_env_restore. */
void hn_test_env_save(const char *const *vars, int n, char **saved);
void hn_test_env_restore(const char *const *vars, int n, char **saved);

/* A whole file, NUL-terminated (caller frees); its length into *len. */
char *hn_test_read_file(const char *path, size_t *len);

/* A fault sink for tests of the device and comm tables: keeps the first
 * failure ("rank R: message") and raises the abort flag like the runtime. */
typedef struct hn_test_faults {
    hn_fault_sink sink;
    int abort;
    hn_status_t first;
    char err[512];
    pthread_mutex_t mu;
} hn_test_faults;

void hn_test_faults_init(hn_test_faults *f, double timeout_s);
void hn_test_faults_fini(hn_test_faults *f);

/* Parses text; NULL and diag in *diag on failure (caller frees diag). */
hn_program *hn_test_parse(const char *text, char **diag);

/* A runtime of n ranks on `backend` (NULL: hn_test_backend) with the
 * settings' defaults but these: random stream delays of up to delay_us
 * (host backend only), a deadline of timeout_s, graphs = 1 when `graphs`.
 * NULL, with a failed assertion, when it cannot be made. */
hn_runtime *hn_test_runtime(const char *backend, int n, double delay_us, double timeout_s, int graphs);

/* Calls fn(path, p, arg) for every .hir program of folder `dir`, in the
 * order the folder lists them, each loaded (a fatal failed assertion when
 * one does not load) and destroyed after; returns how many there were. */
int hn_test_each_program(const char *dir, void (*fn)(const char *path, hn_program *p, void *arg), void *arg);

/* What a call prints that the test expects (an error it provokes, a usage
 * block): between hn_test_capture_begin() and hn_test_capture_end() the
 * process's stdout and stderr (every thread's: the file descriptors) go to
 * a temporary file; _end puts them back and returns what was written,
 * NUL-terminated (caller frees; "" when it cannot be read), so the test can
 * assert it and a passing run shows only what failed. Not nested. */
void hn_test_capture_begin(void);
char *hn_test_capture_end(void);
/* Ends a capture that a fatal assertion left open, writing what it caught
 * to stderr (the suites run it before each test, main at the end). */
void hn_test_capture_release(void);

#endif
