/* Tests of src/ir/ir.c: scalar expressions. */
#include <string.h>

#include "hirnode/runtime.h"
#include "../test.h"

static int64_t eval_text(const char *text, int64_t rank, int64_t world, int *ok)
{
    char prog[256], *diag = NULL;
    hn_program *p;
    int64_t v = 0;
    snprintf(prog, sizeof(prog), "param P = 7\nx = %s\n", text);
    p = hn_test_parse(prog, &diag);
    *ok = 0;
    if (p != NULL) {
        int64_t vals[16] = {0};
        hn_scalar_env env = {vals, rank, world, 3};
        char err[64];
        vals[p->params[0].var] = 7;
        *ok = hn_expr_eval(p->body.items[0]->e[0], &env, &v, err, sizeof(err)) == HN_OK;
        hn_prog_free(p);
    }
    hn_string_free(diag);
    return v;
}

static void expect(const char *text, int64_t rank, int64_t world, int64_t want)
{
    int ok;
    int64_t got = eval_text(text, rank, world, &ok);
    CU_ASSERT_TRUE(ok);
    if (got != want)
        fprintf(stderr, "\n  %s = %lld, want %lld\n", text, (long long)got, (long long)want);
    CU_ASSERT_EQUAL(got, want);
}

static void test_arithmetic(void)
{
    expect("1 + 2 * 3", 0, 1, 7);
    expect("(1 + 2) * 3", 0, 1, 9);
    expect("10 - 4 - 3", 0, 1, 3);
    expect("100 / 10 / 5", 0, 1, 2);
    expect("P * world + rank", 3, 8, 59);
    expect("-P + 10", 0, 1, 3);
    expect("nstreams", 0, 1, 3);
    expect("min(rank, 4) + max(world, 2)", 6, 8, 12);
}

static void test_floor_division(void)
{
    /* floor semantics: ring formulas need no "+ world" */
    expect("(rank - 1) % world", 0, 8, 7);
    expect("-7 / 2", 0, 1, -4);
    expect("-7 % 2", 0, 1, 1);
    expect("7 % -2", 0, 1, -1);
    expect("7 / -2", 0, 1, -4);
    /* floor(e) is e: it only says that the divisions in it floor on purpose */
    expect("floor(7 / 2)", 0, 1, 3);
    expect("floor(-7 / 2) + 1", 0, 1, -3);
    expect("floor(P)", 0, 1, 7);
    expect("2 * floor(world / 3 + floor(rank / 2))", 5, 8, 8);
}

/* The first division outside floor() that leaves a remainder, found while
 * evaluating: its operands and quotient, in evaluation order. */
static void test_exact(void)
{
    static const struct {
        const char *text;
        int64_t value, x, y, q; /* y = 0: none */
    } cases[] = {
        {"8 / 4 + P / 7", 3, 0, 0, 0},
        {"floor(7 / 2) + 9 / 4", 5, 9, 4, 2},
        {"(P + 1) / 3 + -7 / 2", -2, 8, 3, 2},
        {"floor(P / 2 + floor(5 / 3)) * 2", 8, 0, 0, 0},
        {"-7 / 2", -4, -7, 2, -4},
        {"0 && 7 / 2", 0, 0, 0, 0},
        {"1 || 7 / 2", 1, 0, 0, 0},
        {"world > 1 && 7 / world", 1, 7, 2, 3},
        {"min(P / 2, 10) + max(1, 6 / 4)", 4, 7, 2, 3},
        {"7 / -1 + 6 / -4", -9, 6, -4, -2},
    };
    for (int i = 0; i < HN_ARRAY_LEN(cases); i++) {
        char prog[256], err[64];
        hn_program *p;
        int64_t vals[16] = {0}, v = -99;
        hn_scalar_env env = {vals, 0, 2, 3};
        hn_inexact in = {(const hn_expr *)&env, 1, 1, 1}; /* overwritten */
        snprintf(prog, sizeof(prog), "param P = 7\nx = %s\n", cases[i].text);
        p = hn_test_parse(prog, NULL);
        CU_ASSERT_PTR_NOT_NULL_FATAL(p);
        vals[p->params[0].var] = 7;
        CU_ASSERT_EQUAL(hn_expr_eval_exact(p->body.items[0]->e[0], &env, &v, &in, err, sizeof(err)), HN_OK);
        CU_ASSERT_EQUAL(v, cases[i].value);
        if (cases[i].y == 0) {
            CU_ASSERT_PTR_NULL(in.div);
        } else {
            CU_ASSERT_TRUE(in.div != NULL && in.div->kind == HN_EX_BIN && in.div->op == HN_B_DIV);
            CU_ASSERT_EQUAL(in.x, cases[i].x);
            CU_ASSERT_EQUAL(in.y, cases[i].y);
            CU_ASSERT_EQUAL(in.q, cases[i].q);
        }
        hn_prog_free(p);
    }
}

static void test_logic(void)
{
    expect("rank == 2 && world > 4", 2, 8, 1);
    expect("rank == 2 && world > 4", 2, 4, 0);
    expect("rank < 1 || rank >= 7", 7, 8, 1);
    expect("!(rank != 3)", 3, 8, 1);
    expect("1 < 2 == 1", 0, 1, 1);
    /* short-circuit: the division is never evaluated */
    expect("0 && 1 / 0", 0, 1, 0);
    expect("1 || 1 % 0", 0, 1, 1);
}

static void test_errors(void)
{
    int ok;
    eval_text("1 / (rank - rank)", 0, 1, &ok);
    CU_ASSERT_FALSE(ok);
    eval_text("5 % 0", 0, 1, &ok);
    CU_ASSERT_FALSE(ok);
}

/* An error that names the values, never a wrap: these become sizes. */
static void expect_overflow(const char *text, const char *msg)
{
    char prog[256], *diag = NULL;
    hn_program *p;
    snprintf(prog, sizeof(prog), "x = %s\n", text);
    p = hn_test_parse(prog, &diag);
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    {
        int64_t vals[16] = {0}, v = 0;
        hn_scalar_env env = {vals, 0, 1, 3};
        char err[128] = "";
        CU_ASSERT_EQUAL(hn_expr_eval(p->body.items[0]->e[0], &env, &v, err, sizeof(err)), HN_ERR_RUNTIME);
        if (strcmp(err, msg) != 0)
            fprintf(stderr, "\n  %s: '%s', want '%s'\n", text, err, msg);
        CU_ASSERT_STRING_EQUAL(err, msg);
    }
    hn_prog_free(p);
    hn_string_free(diag);
}

static void test_overflow(void)
{
    expect_overflow("4611686018427387904 * 4", "integer overflow: 4611686018427387904 * 4");
    expect_overflow("9223372036854775807 + 1", "integer overflow: 9223372036854775807 + 1");
    expect_overflow("-9223372036854775807 - 2", "integer overflow: -9223372036854775807 - 2");
    expect_overflow("(-9223372036854775807 - 1) / -1", "integer overflow: -9223372036854775808 / -1");
    expect_overflow("-(-9223372036854775807 - 1)", "integer overflow: -(-9223372036854775808)");
    expect_overflow("4294967296 * 4294967296", "integer overflow: 4294967296 * 4294967296");
    /* the extremes that do fit */
    expect("-9223372036854775807 - 1", 0, 1, INT64_MIN);
    expect("(-9223372036854775807 - 1) % -1", 0, 1, 0);
    expect("(-9223372036854775807 - 1) % 3", 0, 1, 1);
    expect("-9223372036854775807 % 3", 0, 1, 2);
    expect("(-9223372036854775807 - 1) / 2", 0, 1, INT64_MIN / 2);
    expect("9223372036854775807 % -2", 0, 1, -1);
}

static void test_clone_equal(void)
{
    hn_expr *e = hn_ex_bin(HN_B_ADD, hn_ex_leaf(HN_EX_RANK), hn_ex_call(HN_EX_MAX, hn_ex_int(3), hn_ex_var(0)));
    hn_expr *c = hn_expr_clone(e);
    CU_ASSERT_PTR_NOT_NULL_FATAL(c);
    CU_ASSERT_TRUE(hn_expr_equal(e, c));
    c->b->a->ival = 4;
    CU_ASSERT_FALSE(hn_expr_equal(e, c));
    hn_expr_free(e);
    hn_expr_free(c);
    e = hn_ex_unary(HN_EX_FLOOR, hn_ex_bin(HN_B_DIV, hn_ex_var(0), hn_ex_leaf(HN_EX_WORLD)));
    c = hn_expr_clone(e);
    CU_ASSERT_PTR_NOT_NULL_FATAL(c);
    CU_ASSERT_TRUE(hn_expr_equal(e, c));
    c->kind = HN_EX_NEG; /* -(P / world) is not floor(P / world) */
    CU_ASSERT_FALSE(hn_expr_equal(e, c));
    hn_expr_free(e);
    hn_expr_free(c);
    /* builders propagate a NULL child and free the other */
    CU_ASSERT_PTR_NULL(hn_ex_bin(HN_B_ADD, hn_ex_int(1), NULL));
}

void hn_suite_expr(void)
{
    static CU_TestInfo tests[] = {
        {"arithmetic and precedence", test_arithmetic},
        {"the first division outside floor() that leaves a remainder", test_exact},
        {"floor division and modulo", test_floor_division},
        {"comparisons and logic", test_logic},
        {"errors", test_errors},
        {"overflow is an error naming the values", test_overflow},
        {"clone and equality", test_clone_equal},
        CU_TEST_INFO_NULL,
    };
    hn_test_add_suite("ir/expr", tests);
}
