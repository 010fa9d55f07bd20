/* Tests of tools/options.c, the command line's options parser: a table read
 * the same way for every subcommand — values stored by kind and range,
 * `--name=VALUE` and `-DVALUE`, arguments and `--`, --help, and what is
 * refused (exit 2) leaving nothing half-set that matters. Messages go to
 * stderr; tests/examples.sh checks their text through the command. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../tools/options.c"
#include "../test.h"

typedef struct opts {
    int n, flag;
    int64_t big;
    size_t size;
    double d;
    const char *text, *choice;
    char defs[4][32];
    int ndefs;
} opts;

static int take_def(const char *value, void *dest, hn_strbuf *err)
{
    opts *o = dest;
    (void)err;
    if (strchr(value, '=') == NULL || o->ndefs == 4)
        return 0;
    snprintf(o->defs[o->ndefs++], sizeof(o->defs[0]), "%s", value);
    return 1;
}

/* Parses argv (NULL-terminated) into o by the test table; -1, 0 or 2 as
 * hn_cli_parse returns, the arguments into args. */
static int parse(opts *o, const char **args, int *nargs, const char *const *argv)
{
    const hn_option table[] = {
        HN_INT("--n", "N", &o->n, 1, 256, "a count"),
        HN_FLAG("--flag", &o->flag, "a switch"),
        HN_INT64("--big", "X", &o->big, INT64_MIN, INT64_MAX, "any integer"),
        HN_SIZE("--size", "BYTES", &o->size, 1, (int64_t)1 << 40, "a size"),
        HN_DOUBLE("--d", "S", &o->d, 0.001, 1e6, "seconds"),
        HN_TEXT("--text", "FILE", &o->text, "a file"),
        HN_CHOICE("--choice", "red|green|blue", &o->choice, "a colour"),
        HN_CALL("-D", "NAME=VAL", take_def, o, "a definition"),
    };
    hn_command c = {"hirnode test", " FILE...", table, HN_ARRAY_LEN(table), args, 2, nargs, NULL};
    char *v[32];
    int argc = 0;
    memset(o, 0, sizeof(*o));
    o->n = 8;
    for (; argv[argc] != NULL; argc++)
        v[argc] = (char *)argv[argc];
    return hn_cli_parse(&c, argc, v, 0);
}

static void test_values(void)
{
    static const char *const argv[] = {"--n", "17", "--flag", "--big=-9223372036854775808", "--size", "16M",
                                       "--d", "0.5", "--text", "t.json", "--choice=green", "-DN=4", "-D", "M=2",
                                       "a.hir", "--", "-b.hir", NULL};
    const char *args[2];
    int nargs = 0;
    opts o;
    CU_ASSERT_EQUAL(parse(&o, args, &nargs, argv), -1);
    CU_ASSERT_EQUAL(o.n, 17);
    CU_ASSERT_EQUAL(o.flag, 1);
    CU_ASSERT_EQUAL(o.big, INT64_MIN);
    CU_ASSERT_EQUAL(o.size, (size_t)16 << 20);
    CU_ASSERT_DOUBLE_EQUAL(o.d, 0.5, 0);
    CU_ASSERT_STRING_EQUAL(o.text, "t.json");
    CU_ASSERT_STRING_EQUAL(o.choice, "green");
    CU_ASSERT_EQUAL_FATAL(o.ndefs, 2);
    CU_ASSERT_STRING_EQUAL(o.defs[0], "N=4");
    CU_ASSERT_STRING_EQUAL(o.defs[1], "M=2");
    CU_ASSERT_EQUAL_FATAL(nargs, 2);
    CU_ASSERT_STRING_EQUAL(args[0], "a.hir");
    CU_ASSERT_STRING_EQUAL(args[1], "-b.hir"); /* after --: an argument */
}

static void test_refused(void)
{
    const char *const *bad[] = {
        (const char *const[]){"--n", "0", NULL},        (const char *const[]){"--n", "5x", NULL},
        (const char *const[]){"--n", "", NULL},         (const char *const[]){"--n", NULL},
        (const char *const[]){"--n=", NULL},            (const char *const[]){"--size", "1.5M", NULL},
        (const char *const[]){"--d", "nan", NULL},      (const char *const[]){"--d", "0", NULL},
        (const char *const[]){"--text", "", NULL},      (const char *const[]){"--choice", "gren", NULL},
        (const char *const[]){"-D", "N", NULL},         (const char *const[]){"--flag=1", NULL},
        (const char *const[]){"--nn", "3", NULL},       (const char *const[]){"-x", NULL},
        (const char *const[]){"a", "b", "c", NULL},     (const char *const[]){"--big", "0x", NULL},
    };
    for (int i = 0; i < HN_ARRAY_LEN(bad); i++) {
        const char *args[2];
        int nargs = 0;
        opts o;
        int rc;
        char *said;
        hn_test_capture_begin(); /* the message is expected: checked, not shown */
        rc = parse(&o, args, &nargs, bad[i]);
        said = hn_test_capture_end();
        /* one message naming the command, then where the options are listed */
        CU_ASSERT_EQUAL(strncmp(said, "hirnode test: ", 14), 0);
        CU_ASSERT_PTR_NOT_NULL(strstr(said, "\n(hirnode test --help lists the options)\n"));
        free(said);
        if (rc != HN_EXIT_USAGE)
            fprintf(stderr, "\n  case %d (%s ...): %d\n", i, bad[i][0], rc);
        CU_ASSERT_EQUAL(rc, HN_EXIT_USAGE);
        CU_ASSERT_EQUAL(o.n == 8 || o.n == 0, 1); /* never a value out of range */
    }
}

static void test_help(void)
{
    static const char *const argv[] = {"--n", "3", "-h", "--n", "bad", NULL};
    const char *args[2];
    int nargs = 0;
    opts o;
    char *said;
    /* usage on stdout, exit 0, whatever comes after */
    hn_test_capture_begin();
    CU_ASSERT_EQUAL(parse(&o, args, &nargs, argv), HN_EXIT_OK);
    said = hn_test_capture_end();
    CU_ASSERT_EQUAL(strncmp(said, "usage: hirnode test [options] FILE...\n", 38), 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(said, "\noptions:\n"));
    free(said);
    hn_test_capture_begin();
    CU_ASSERT_EQUAL(parse(&o, args, &nargs, (const char *const[]){"--help", NULL}), HN_EXIT_OK);
    said = hn_test_capture_end();
    CU_ASSERT_EQUAL(strncmp(said, "usage: hirnode test [options] FILE...\n", 38), 0);
    free(said);
}

void hn_suite_options(void)
{
    static CU_TestInfo tests[] = {
        {"values by kind, joined values, arguments and --", test_values},
        {"bad values, unknown options, too many arguments: exit 2", test_refused},
        {"--help and -h: the usage, exit 0", test_help},
        CU_TEST_INFO_NULL,
    };
    hn_test_add_suite("tools/options", tests);
}
