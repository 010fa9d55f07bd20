/* Test helpers shared by the suites. */
#include <stdlib.h>
#include <string.h>

#include "hirnode/runtime.h"
#include "test.h"

void hn_test_add_suite(const char *name, CU_TestInfo *tests)
{
    CU_SuiteInfo suites[] = {{name, NULL, NULL, NULL, NULL, tests}, CU_SUITE_INFO_NULL};
    CU_register_suites(suites);
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
