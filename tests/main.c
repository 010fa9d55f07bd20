/* CUnit entry point: registers every suite, runs them, exits non-zero on failure. */
#include <CUnit/Basic.h>
#include <stdio.h>
#include <string.h>

#include "test.h"

int main(int argc, char **argv)
{
    unsigned failures;
    if (CU_initialize_registry() != CUE_SUCCESS)
        return 2;
#define HN_SUITE(name) hn_suite_##name();
    HN_SUITES
#undef HN_SUITE
    CU_basic_set_mode(argc > 1 && strcmp(argv[1], "-v") == 0 ? CU_BRM_VERBOSE : CU_BRM_NORMAL);
    CU_basic_run_tests();
    failures = CU_get_number_of_failures() + CU_get_number_of_tests_failed();
    CU_cleanup_registry();
    return failures ? 1 : 0;
}
