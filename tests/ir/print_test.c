/* Tests of src/ir/print.c: parse(print(p)) == p for every program in
 * examples/ and tests/programs/, a golden dump, programs from the builder. */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hirnode/runtime.h"
#include "../test.h"

static int round_trip_dir(const char *dir)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    int count = 0;
    if (d == NULL)
        return 0;
    while ((e = readdir(d)) != NULL) {
        char path[512], *text, *printed, *again, *diag = NULL;
        hn_program *p = NULL, *q = NULL;
        if (strstr(e->d_name, ".hir") == NULL || strstr(e->d_name, "bad_") == e->d_name)
            continue;
        snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
        CU_ASSERT_EQUAL_FATAL(hn_program_load(path, &p, &diag), HN_OK);
        printed = hn_program_print(p);
        CU_ASSERT_PTR_NOT_NULL_FATAL(printed);
        if (hn_program_parse(printed, strlen(printed), path, &q, NULL) != HN_OK)
            fprintf(stderr, "\n  %s: the printed text does not parse:\n%s", path, printed);
        CU_ASSERT_PTR_NOT_NULL_FATAL(q);
        if (!hn_prog_equal(p, q))
            fprintf(stderr, "\n  %s: parse(print(p)) != p\n", path);
        CU_ASSERT_TRUE(hn_prog_equal(p, q));
        again = hn_program_print(q);
        CU_ASSERT_STRING_EQUAL(printed, again); /* printing is a fixed point */
        (void)text;
        hn_string_free(printed);
        hn_string_free(again);
        hn_string_free(diag);
        hn_program_destroy(p);
        hn_program_destroy(q);
        count++;
    }
    closedir(d);
    return count;
}

static void test_round_trip_examples(void) { CU_ASSERT(round_trip_dir("examples") >= 10); }
static void test_round_trip_programs(void) { CU_ASSERT(round_trip_dir("tests/programs") >= 1); }

static void test_golden(void)
{
    hn_program *p = NULL;
    char *expected = hn_test_read_file("tests/programs/golden.expected", NULL), *printed;
    CU_ASSERT_PTR_NOT_NULL_FATAL(expected);
    CU_ASSERT_EQUAL_FATAL(hn_program_load("tests/programs/golden.hir", &p, NULL), HN_OK);
    printed = hn_program_print(p);
    if (strcmp(printed, expected) != 0)
        fprintf(stderr, "\n--- got\n%s--- want\n%s", printed, expected);
    CU_ASSERT_STRING_EQUAL(printed, expected);
    hn_string_free(printed);
    hn_program_destroy(p);
    free(expected);
}

/* The builder makes the same program as the text. */
static void test_builder(void)
{
    const char *text = "param N = 8\n"
                       "input A : f32[N] replicated\n"
                       "output B : f32[N] replicated\n"
                       "\n"
                       "for i in 0 .. world {\n"
                       "  allreduce B <- A op max team range(0, world)\n"
                       "}\n";
    hn_program *b = hn_prog_new("built"), *p = hn_test_parse(text, NULL);
    hn_type ty = {HN_F32, 0, NULL};
    hn_instr *loop, *ar;
    int n = hn_prog_var(b, "N", 1), a = hn_prog_var(b, "A", 1), out = hn_prog_var(b, "B", 1);
    char *printed;
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    CU_ASSERT_EQUAL(hn_prog_add_param(b, n, hn_ex_int(8), 1, 1), 0);
    CU_ASSERT_EQUAL(hn_type_push_dim(&ty, hn_ex_var(n)), 0);
    CU_ASSERT_EQUAL(hn_prog_add_io(b, 0, a, &ty, -1, 2, 1), 0);
    ty.dtype = HN_F32;
    CU_ASSERT_EQUAL(hn_type_push_dim(&ty, hn_ex_var(n)), 0);
    CU_ASSERT_EQUAL(hn_prog_add_io(b, 1, out, &ty, -1, 3, 1), 0);
    loop = hn_instr_new(HN_OP_FOR, 5, 1);
    loop->dst = hn_prog_var(b, "i", 1);
    loop->e[0] = hn_ex_int(0);
    loop->e[1] = hn_ex_leaf(HN_EX_WORLD);
    ar = hn_instr_new(HN_OP_ALLREDUCE, 6, 3);
    ar->a.var = out;
    ar->b.var = a;
    ar->redop = HN_RED_MAX;
    ar->team_kind = HN_TEAM_RANGE;
    ar->nteam = 2;
    ar->team = calloc(2, sizeof(hn_expr *));
    ar->team[0] = hn_ex_int(0);
    ar->team[1] = hn_ex_leaf(HN_EX_WORLD);
    CU_ASSERT_EQUAL(hn_block_push(&loop->body, ar), 0);
    CU_ASSERT_EQUAL(hn_block_push(&b->body, loop), 0);
    CU_ASSERT_EQUAL(hn_prog_finish(b), HN_OK);
    CU_ASSERT_TRUE(hn_prog_equal(b, p));
    printed = hn_print_program(b);
    CU_ASSERT_STRING_EQUAL(printed, text);
    hn_free(printed);
    hn_prog_free(b);
    hn_prog_free(p);
}

static void test_expression_parens(void)
{
    /* the printer keeps exactly the parentheses the tree needs */
    static const struct {
        const char *text, *printed;
    } cases[] = {
        {"x = (1 - (2 - 3)) * -(4 + 5) % (6 / (7 * 8)) - (1 < 2 == (3 < 4))\n",
         "x = (1 - (2 - 3)) * -(4 + 5) % (6 / (7 * 8)) - (1 < 2 == 3 < 4)\n"},
        /* floor() is a call: no parentheses inside, none needed around */
        {"x = 2 * floor(((7 + 1) / 3)) - -floor(9 / (2 + 1))\n", "x = 2 * floor((7 + 1) / 3) - -floor(9 / (2 + 1))\n"},
        {"param M = 8\ninput A : f32[floor(M / world), (floor(M / 3))] replicated\n",
         "param M = 8\ninput A : f32[floor(M / world), floor(M / 3)] replicated\n"},
    };
    for (int i = 0; i < HN_ARRAY_LEN(cases); i++) {
        hn_program *p = hn_test_parse(cases[i].text, NULL), *q;
        char *printed;
        CU_ASSERT_PTR_NOT_NULL_FATAL(p);
        printed = hn_print_program(p);
        CU_ASSERT_STRING_EQUAL(printed, cases[i].printed);
        q = hn_test_parse(printed, NULL);
        CU_ASSERT_TRUE(q != NULL && hn_prog_equal(p, q));
        hn_free(printed);
        hn_prog_free(p);
        hn_prog_free(q);
    }
}

void hn_suite_print(void)
{
    static CU_TestInfo tests[] = {
        {"round trip of every example", test_round_trip_examples},
        {"round trip of tests/programs", test_round_trip_programs},
        {"golden dump", test_golden},
        {"builder API", test_builder},
        {"expression parentheses", test_expression_parens},
        CU_TEST_INFO_NULL,
    };
    hn_test_add_suite("ir/print", tests);
}
