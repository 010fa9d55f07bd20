/* CUnit entry point: registers every suite, runs them, exits non-zero on failure. */
#include <CUnit/Basic.h>
#include <stdio.h>
#include <string.h>

#include "device/device.h"
#include "test.h"

const char *hn_test_backend = "host";

int hn_test_max_ranks(void)
{
    const hn_device_ops *d = hn_device_find(hn_test_backend);
    int n = d != NULL ? d->device_count() : 0;
    return n < 8 ? n : 8;
}

int hn_test_rdv_worker(int argc, char **argv);

/* usage: hn_tests [-v] [--backend host|cuda] [--suite NAME[:TEST-PREFIX][,NAME...] [--test TEST-PREFIX]]
 * (NAME:PREFIX runs the one test of that suite whose name starts so; --test applies to every suite named)
 * (hn_tests --rdv-worker ...: a process the rendezvous suite starts) */
int main(int argc, char **argv)
{
    unsigned failures = 0;
    int verbose = 0;
    const char *only = NULL, *test = NULL;
    if (argc > 1 && strcmp(argv[1], "--rdv-worker") == 0)
        return hn_test_rdv_worker(argc, argv);
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "-v") == 0)
            verbose = 1;
        else if (strcmp(argv[i], "--backend") == 0 && i + 1 < argc)
            hn_test_backend = argv[++i];
        else if (strcmp(argv[i], "--suite") == 0 && i + 1 < argc)
            only = argv[++i];
        else if (strcmp(argv[i], "--test") == 0 && i + 1 < argc)
            test = argv[++i];
    }
    if (hn_test_max_ranks() < 1) {
        fprintf(stderr, "hn_tests: backend '%s' has no devices\n", hn_test_backend);
        return 2;
    }
    printf("hn_tests: runtime suites on the %s backend, up to %d ranks\n", hn_test_backend,
           hn_test_max_ranks());
    if (CU_initialize_registry() != CUE_SUCCESS)
        return 2;
#define HN_SUITE(name) hn_suite_##name();
    HN_SUITES
#undef HN_SUITE
    CU_basic_set_mode(verbose ? CU_BRM_VERBOSE : CU_BRM_NORMAL);
    if (only != NULL) {
        /* several suites, comma-separated, run in the order named */
        char names[1024], *save = NULL;
        snprintf(names, sizeof(names), "%s", only);
        for (char *name = strtok_r(names, ",", &save); name != NULL; name = strtok_r(NULL, ",", &save)) {
            char *colon = strchr(name, ':'); /* SUITE:PREFIX: one test of this suite */
            const char *want = test;
            if (colon != NULL) {
                *colon = '\0';
                want = colon + 1;
            }
            CU_pSuite suite = CU_get_suite(name);
            if (suite == NULL) {
                fprintf(stderr, "hn_tests: no suite '%s'\n", name);
                CU_cleanup_registry();
                return 2;
            }
            if (want != NULL) { /* one test of the suite, by its name's start */
                CU_pTest t = suite->pTest;
                while (t != NULL && strncmp(t->pName, want, strlen(want)) != 0)
                    t = t->pNext;
                if (t == NULL) {
                    fprintf(stderr, "hn_tests: no test of suite '%s' starts with '%s'\n", name, want);
                    CU_cleanup_registry();
                    return 2;
                }
                CU_basic_run_test(suite, t);
            } else {
                CU_basic_run_suite(suite);
            }
            /* each run starts CUnit's counts afresh: keep this one's */
            failures += CU_get_number_of_failures() + CU_get_number_of_tests_failed();
        }
    } else {
        CU_basic_run_tests();
        failures = CU_get_number_of_failures() + CU_get_number_of_tests_failed();
    }
    hn_test_capture_release();
    CU_cleanup_registry();
    return failures ? 1 : 0;
}
