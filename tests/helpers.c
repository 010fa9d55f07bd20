/* Test helpers shared by the suites. */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "hirnode/runtime.h"
#include "test.h"

/* Before each test: a capture that a fatal assertion left open. */
static void capture_setup(void) { hn_test_capture_release(); }

void hn_test_add_suite(const char *name, CU_TestInfo *tests)
{
    CU_SuiteInfo suites[] = {{name, NULL, NULL, capture_setup, NULL, tests}, CU_SUITE_INFO_NULL};
    CU_register_suites(suites);
}

static void faults_report(void *ctx, int rank, int instr, hn_status_t st, const char *msg)
{
    hn_test_faults *f = ctx;
    (void)instr;
    pthread_mutex_lock(&f->mu);
    if (f->first == HN_OK) {
        f->first = st;
        snprintf(f->err, sizeof(f->err), "rank %d: %s", rank, msg);
    }
    pthread_mutex_unlock(&f->mu);
    __atomic_store_n(&f->abort, 1, __ATOMIC_RELEASE);
}

void hn_test_faults_init(hn_test_faults *f, double timeout_s)
{
    memset(f, 0, sizeof(*f));
    pthread_mutex_init(&f->mu, NULL);
    f->sink = (hn_fault_sink){faults_report, f, &f->abort, timeout_s, NULL};
}

void hn_test_faults_fini(hn_test_faults *f) { pthread_mutex_destroy(&f->mu); }

char *hn_test_read_file(const char *path, size_t *len)
{
    char *data = NULL;
    if (hn_file_read(path, "a test file", (uint64_t)1 << 30, &data, len, NULL) != HN_OK)
        return NULL;
    return data;
}

hn_program *hn_test_parse(const char *text, char **diag)
{
    hn_program *p = NULL;
    char *d = NULL;
    if (hn_program_parse(text, strlen(text), "t.hir", &p, &d) != HN_OK)
        p = NULL;
    if (diag != NULL)
        *diag = d;
    else
        hn_string_free(d);
    return p;
}

hn_runtime *hn_test_runtime(const char *backend, int n, double delay_us, double timeout_s, int graphs)
{
    hn_runtime_config cfg;
    hn_runtime *rt = NULL;
    hn_runtime_config_default(&cfg);
    cfg.ndev = n;
    cfg.backend = backend != NULL ? backend : hn_test_backend;
    cfg.host_delay_us = strcmp(cfg.backend, "host") == 0 ? delay_us : 0;
    cfg.timeout_s = timeout_s;
    cfg.graphs = graphs;
    CU_ASSERT_EQUAL(hn_runtime_create(&cfg, &rt), HN_OK);
    return rt;
}

int hn_test_each_program(const char *dir, void (*fn)(const char *path, hn_program *p, void *arg), void *arg)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    int count = 0;
    CU_ASSERT_PTR_NOT_NULL_FATAL(d);
    while ((e = readdir(d)) != NULL) {
        char path[512];
        hn_program *p = NULL;
        if (strstr(e->d_name, ".hir") == NULL)
            continue;
        snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
        CU_ASSERT_EQUAL_FATAL(hn_program_load(path, &p, NULL), HN_OK);
        fn(path, p, arg);
        hn_program_destroy(p);
        count++;
    }
    closedir(d);
    return count;
}

static FILE *capture_file;
static int capture_saved[2] = {-1, -1};

void hn_test_capture_release(void)
{
    char *left;
    if (capture_file == NULL)
        return;
    left = hn_test_capture_end();
    fputs(left, stderr); /* the context of the failure that left it open */
    free(left);
}

void hn_test_capture_begin(void)
{
    hn_test_capture_release();
    fflush(stdout);
    fflush(stderr);
    capture_file = tmpfile();
    if (capture_file == NULL)
        return; /* then the text shows, and the assertions on it fail */
    for (int i = 0; i < 2; i++) {
        capture_saved[i] = dup(1 + i);
        dup2(fileno(capture_file), 1 + i);
    }
}

char *hn_test_capture_end(void)
{
    char *text = NULL;
    long n;
    fflush(stdout);
    fflush(stderr);
    if (capture_file == NULL)
        return strdup("");
    for (int i = 0; i < 2; i++) {
        dup2(capture_saved[i], 1 + i);
        close(capture_saved[i]);
        capture_saved[i] = -1;
    }
    /* written through the descriptor, not the stream: its end is the size */
    n = (long)lseek(fileno(capture_file), 0, SEEK_END);
    text = malloc((size_t)(n > 0 ? n : 0) + 1);
    if (text != NULL) {
        size_t got = 0;
        if (n > 0 && pread(fileno(capture_file), text, (size_t)n, 0) == n)
            got = (size_t)n;
        text[got] = '\0';
    }
    fclose(capture_file);
    capture_file = NULL;
    return text != NULL ? text : strdup("");
}

void hn_test_env_save(const char *const *vars, int n, char **saved)
{
    for (int i = 0; i < n; i++) {
        saved[i] = getenv(vars[i]) != NULL ? strdup(getenv(vars[i])) : NULL;
        unsetenv(vars[i]);
    }
}

void hn_test_env_restore(const char *const *vars, int n, char **saved)
{
    for (int i = 0; i < n; i++) {
        if (saved[i] != NULL)
            setenv(vars[i], saved[i], 1);
        else
            unsetenv(vars[i]);
        free(saved[i]);
    }
}
