/* Hostile numbers: every number of every example and golden program,
 * one at a time and several at once (seeded), replaced by extreme values
 * (±2^63, 2^62, 2^32, 0, −1; huge and tiny floats), and every parameter
 * overridden with them as `-D` would. Each variant goes through what
 * `hirnode check` and `hirnode run --backend host --check` do: parse,
 * verify, dry-run every rank, and (when it verifies) run and check. A
 * variant may be rejected or fail; it may not crash, hang, leak or hit
 * undefined behaviour — `make test` runs this suite under ASan+UBSan (and
 * TSan, which verifies the variants without running them). Every
 * rejection must be a located error. */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ir/lex.h"
#include "hirnode/runtime.h"
#include "runtime/check.h"
#include "ir/params.h"
#include "exec/verify_run.h"
#include "../test.h"

static const char *const INTS[] = {
    "9223372036854775807", "-9223372036854775808", "4611686018427387904", "4294967296", "0", "-1",
};
static const char *const FLOATS[] = {"1e308", "-1e308", "1e-320", "0.0"};
static const int64_t PARAMS[] = {INT64_MAX, INT64_MIN, (int64_t)1 << 62, (int64_t)1 << 32, 0, -1};

#define MAX_NUMBERS 256
#define RANDOM_VARIANTS 24
#define WORLDS 4

typedef struct number {
    size_t off, len;
    int is_float;
} number;

typedef struct extreme_ctx {
    hn_runtime *rt[WORLDS]; /* 1, 2, 4, 8 ranks, kept across variants */
    int variants, rejected, ran, failed;
} extreme_ctx;

/* The numeric literals of a program text, by the project's own lexer. */
static int find_numbers(const char *text, size_t len, number *out)
{
    hn_lexer lx;
    int n = 0;
    hn_lex_init(&lx, text, len);
    for (;;) {
        hn_token t = hn_lex_next(&lx);
        if (t.kind == HN_T_EOF || t.kind == HN_T_ERROR)
            break;
        if ((t.kind == HN_T_INT || t.kind == HN_T_FLOAT) && n < MAX_NUMBERS) {
            out[n].off = (size_t)(t.s - text);
            out[n].len = (size_t)t.len;
            out[n].is_float = t.kind == HN_T_FLOAT;
            n++;
        }
    }
    return n;
}

/* text with the numbers marked in `which` replaced by `with[i]`. */
static char *replace(const char *text, size_t len, const number *nums, int n, const char *const *with)
{
    hn_strbuf sb;
    size_t at = 0;
    hn_sb_init(&sb);
    for (int i = 0; i < n; i++) {
        if (with[i] == NULL)
            continue;
        hn_sb_appendn(&sb, text + at, nums[i].off - at);
        hn_sb_append(&sb, with[i]);
        at = nums[i].off + nums[i].len;
    }
    hn_sb_appendn(&sb, text + at, len - at);
    return hn_sb_take(&sb);
}

/* One variant: parse, verify for its world, run with --check. */
static void try_variant(extreme_ctx *c, const char *path, const char *text, int noverrides,
                        const char *const *names, const int64_t *values)
{
    hn_program *p = NULL;
    char *diag = NULL;
    hn_runtime *rt = c->rt[c->variants % WORLDS];
    hn_status_t st;
    c->variants++;
    st = hn_program_parse(text, strlen(text), path, &p, &diag);
    if (st != HN_OK) {
        /* a located error: file:line:col: error: */
        CU_ASSERT_PTR_NOT_NULL(diag != NULL ? strstr(diag, ": error: ") : NULL);
        c->rejected++;
    } else {
        hn_check_opts o;
        hn_check_result res;
        hn_strbuf sb;
        memset(&o, 0, sizeof(o));
        o.iters = 1;
        o.seed = (uint64_t)c->variants;
        o.check = p->has_reference;
        o.noverrides = noverrides;
        o.names = names;
        o.values = values;
        hn_sb_init(&sb);
        if (getenv("HN_EXTREME_TRACE"))
            fprintf(stderr, "variant %d (%d ranks):\n%s\n", c->variants, hn_runtime_size(rt), text);
#if defined(__SANITIZE_THREAD__)
        /* A mutated program may race on its own buffers (say, two ring
         * steps receiving into one chunk: the verifier matches messages,
         * it does not prove a program race-free), and TSan rightly reports
         * that on the host backend. Under TSan only verify. */
        {
            int64_t params[64];
            st = p->nparams > 64 ? HN_ERR_INVALID
                                 : hn_params_resolve(p, hn_runtime_size(rt), 3, noverrides, names, values, params, &sb);
            if (st == HN_OK)
                st = hn_verify_run(p, hn_runtime_size(rt), 3, params, &sb, NULL);
            (void)o;
            (void)res;
        }
#else
        st = hn_check_run(rt, p, &o, &res, &sb);
#endif
        if (st == HN_OK) {
            c->ran++;
        } else if (st == HN_ERR_VERIFY || st == HN_ERR_INVALID) {
            /* rejected before anything ran, with a located error */
            if (sb.data == NULL || strstr(sb.data, "error: ") == NULL)
                fprintf(stderr, "\n  %s: %s without a message\n", path, hn_status_string(st));
            CU_ASSERT_PTR_NOT_NULL(sb.data != NULL ? strstr(sb.data, "error: ") : NULL);
            c->rejected++;
        } else {
            /* a failed run (out of memory, a runtime error) says what failed */
            const char *e = hn_runtime_error(rt);
            int said = (sb.data != NULL && strstr(sb.data, "error") != NULL) || (e != NULL && *e != '\0');
            if (!said)
                fprintf(stderr, "\n  %s: %s without a message\n", path, hn_status_string(st));
            CU_ASSERT_TRUE(said);
            if (st == HN_ERR_TIMEOUT)
                fprintf(stderr, "\n  %s timed out: %s\n%s\n", path, e, text);
            CU_ASSERT_NOT_EQUAL(st, HN_ERR_TIMEOUT);
            if (getenv("HN_EXTREME_TRACE"))
                fprintf(stderr, "  failed: %s %s\n", sb.data ? sb.data : "", e ? e : "");
            c->failed++;
        }
        hn_sb_free(&sb);
        hn_program_destroy(p);
    }
    hn_string_free(diag);
}

static void program_variants(extreme_ctx *c, const char *path)
{
    size_t len;
    char *text = hn_test_read_file(path, &len);
    number nums[MAX_NUMBERS];
    const char *with[MAX_NUMBERS];
    hn_program *p = NULL;
    uint64_t rng = 0x5eed;
    int n;
    CU_ASSERT_PTR_NOT_NULL_FATAL(text);
    n = find_numbers(text, len, nums);
    CU_ASSERT(n > 0);
    /* one number at a time, every extreme value of its kind */
    for (int i = 0; i < n; i++) {
        int kinds = nums[i].is_float ? HN_ARRAY_LEN(FLOATS) : HN_ARRAY_LEN(INTS);
        for (int v = 0; v < kinds; v++) {
            char *variant;
            memset(with, 0, sizeof(with));
            with[i] = nums[i].is_float ? FLOATS[v] : INTS[v];
            variant = replace(text, len, nums, n, with);
            CU_ASSERT_PTR_NOT_NULL_FATAL(variant);
            try_variant(c, path, variant, 0, NULL, NULL);
            hn_free(variant);
        }
    }
    /* several at once */
    for (int k = 0; k < RANDOM_VARIANTS; k++) {
        char *variant;
        for (int i = 0; i < n; i++) {
            uint64_t r = hn_splitmix64(&rng);
            with[i] = r % 3 != 0 ? NULL
                      : nums[i].is_float ? FLOATS[(r >> 8) % HN_ARRAY_LEN(FLOATS)]
                                         : INTS[(r >> 8) % HN_ARRAY_LEN(INTS)];
        }
        variant = replace(text, len, nums, n, with);
        CU_ASSERT_PTR_NOT_NULL_FATAL(variant);
        try_variant(c, path, variant, 0, NULL, NULL);
        hn_free(variant);
    }
    /* every parameter overridden, as -D NAME=VALUE */
    if (hn_program_parse(text, len, path, &p, NULL) == HN_OK) {
        for (int i = 0; i < p->nparams; i++)
            for (int v = 0; v < HN_ARRAY_LEN(PARAMS); v++) {
                const char *name = p->names[p->params[i].var];
                try_variant(c, path, text, 1, &name, &PARAMS[v]);
            }
        hn_program_destroy(p);
    }
    hn_free(text);
}

static void test_extreme_numbers(void)
{
    static const char *const dirs[] = {"examples", "tests/programs"};
    extreme_ctx c;
    hn_log_level_t level = hn_log_level();
    char *saved = getenv("HIRNODE_HOST_MEM_MIB") ? strdup(getenv("HIRNODE_HOST_MEM_MIB")) : NULL;
    int programs = 0;
    memset(&c, 0, sizeof(c));
    /* small emulated devices: a huge but representable size fails fast as
     * out of memory instead of filling the machine */
    setenv("HIRNODE_HOST_MEM_MIB", "16", 1);
    hn_log_set_level(HN_LOG_OFF); /* the errors are expected; the test checks what they say */
    for (int w = 0; w < WORLDS; w++) {
        hn_runtime_config cfg;
        hn_runtime_config_default(&cfg);
        cfg.ndev = 1 << w;
        cfg.backend = "host";
        cfg.timeout_s = 20;
        CU_ASSERT_EQUAL_FATAL(hn_runtime_create(&cfg, &c.rt[w]), HN_OK);
    }
    for (int d = 0; d < HN_ARRAY_LEN(dirs); d++) {
        struct dirent **names = NULL;
        /* in name order: the runtimes carry state from variant to variant */
        int nnames = scandir(dirs[d], &names, NULL, alphasort);
        CU_ASSERT_FATAL(nnames >= 0);
        for (int i = 0; i < nnames; i++) {
            char path[512];
            if (strstr(names[i]->d_name, ".hir") != NULL) {
                snprintf(path, sizeof(path), "%s/%s", dirs[d], names[i]->d_name);
                program_variants(&c, path);
                programs++;
            }
            free(names[i]);
        }
        free(names);
    }
    for (int w = 0; w < WORLDS; w++)
        hn_runtime_destroy(c.rt[w]);
    hn_log_set_level(level);
    if (saved != NULL) {
        setenv("HIRNODE_HOST_MEM_MIB", saved, 1);
        free(saved);
    } else {
        unsetenv("HIRNODE_HOST_MEM_MIB");
    }
    printf("\n  extreme numbers: %d variants of %d programs: %d rejected with a located error, %d failed "
           "with a message, %d ran\n", c.variants, programs, c.rejected, c.failed, c.ran);
    CU_ASSERT(programs >= 10);
    CU_ASSERT(c.rejected > 0);
    CU_ASSERT(c.ran > 0); /* (under TSan: verified) */
}

void hn_suite_extreme(void)
{
    static CU_TestInfo tests[] = {
        {"extreme numbers are rejected or run; never crash, hang or overflow", test_extreme_numbers},
        CU_TEST_INFO_NULL,
    };
    /* sizes are made small through the host backend's memory */
    if (strcmp(hn_test_backend, "host") != 0)
        tests[0] = (CU_TestInfo)CU_TEST_INFO_NULL;
    hn_test_add_suite("tools/extreme", tests);
}
