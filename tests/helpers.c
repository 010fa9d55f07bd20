/* Test helpers shared by the suites. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hirnode/runtime.h"
#include "test.h"

void hn_test_add_suite(const char *name, CU_TestInfo *tests)
{
    CU_SuiteInfo suites[] = {{name, NULL, NULL, NULL, NULL, tests}, CU_SUITE_INFO_NULL};
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
    f->sink = (hn_fault_sink){faults_report, f, &f->abort, timeout_s};
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
