/* Memory in proportion to the program: parsing, verifying and dry-running
 * a program of many lines holds a small constant number of bytes per byte
 * of its text (counted by hn_malloc's counters, not timed, not the RSS),
 * and a long loop runs its dry run in memory that does not grow with its
 * trips. tools/gen_program.py writes the same kind of program at any size
 * for `hirnode check` under /usr/bin/time -v. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/util.h"
#include "hirnode/runtime.h"
#include "ir/params.h"
#include "exec/verify_run.h"
#include "../test.h"

/* Bytes of heap per byte of program text, at most (parse, static checks,
 * the dry run of 8 ranks and the matching of their logs, together): 14.8
 * and 13.4 for the two programs below since a parsed program lies in its
 * pool at the size of each instruction's form, with shared nodes for the
 * parts of expressions that name no variable (the aim is 10); 17 leaves
 * room for malloc's rounding elsewhere. These counters hold the dry run's
 * value tables whole (about 2.6 of the 14.8), of which the run keeps only the
 * pages of variables still named (verify_run.c), so the RSS is lower. */
#define MAX_BYTES_PER_BYTE 17

static const char *header = "param M = 64, N = 32, K = 16\n"
                            "input  X : f32[M, N]  replicated\n"
                            "input  W : f32[N, K]  replicated\n"
                            "output Y : f32[M, N]  replicated\n"
                            "s0 = current_stream\n"
                            "copy Y <- X\n";

/* One layer of tools/gen_program.py's kinds, with names of its own. */
static void layer(hn_strbuf *sb, int k)
{
    switch (k % 6) {
    case 0:
        hn_sb_printf(sb, "A%d = alloc f32[M, N]\ncopy A%d <- X\nscale A%d <- A%d, 0.5\n"
                         "allreduce A%d <- A%d op sum\ncopy Y <- A%d\nfree A%d\n",
                     k, k, k, k, k, k, k, k);
        break;
    case 1:
        hn_sb_printf(sb, "src%d = (rank + %d) %% world\nif src%d == rank {\n  scale Y <- Y, 1.0\n"
                         "} else {\n  add Y <- Y, X\n}\n",
                     k, k % 7 + 1, k);
        break;
    case 2:
        hn_sb_printf(sb, "for it%d in 0 .. 2 {\n  r%d = select Y, 0, (it%d * %d) %% M\n  x%d = select X, 0, it%d\n"
                         "  add r%d <- r%d, x%d\n}\n",
                     k, k, k, k % 13 + 1, k, k, k, k, k);
        break;
    case 3:
        hn_sb_printf(sb, "set_stream stream(%d %% nstreams)\nwait_stream s0\nc%d = chunk Y, 0, 4, %d\n"
                         "mul c%d <- c%d, c%d\nset_stream s0\nwait_stream stream(%d %% nstreams)\n",
                     k, k, k % 4, k, k, k, k);
        break;
    case 4:
        hn_sb_printf(sb, "g%d = (rank + 1) %% world\nh%d = (rank + world - 1) %% world\nT%d = select Y, 0, %d\n"
                         "group {\n  send T%d to g%d\n  recv T%d from h%d\n}\nwait\n",
                     k, k, k, k % 64, k, k, k, k);
        break;
    default:
        hn_sb_printf(sb, "u%d = transpose Y, 0, 1\ne%d = %d * 3 + rank - max(world, %d)\n"
                         "if e%d > 0 && rank >= 0 {\n  copy Y <- X\n}\n",
                     k, k, k, k % 9, k);
    }
}

/* Peak heap bytes, beyond what was held before, of parsing the program,
 * its static checks and the dry run of `world` ranks; *ok: all passed. */
static int64_t cost_of(const char *text, size_t len, int world, int *ok)
{
    hn_program *p = NULL;
    hn_strbuf diag;
    char *why = NULL;
    int64_t *params = NULL, before = hn_alloc_peak_reset();
    *ok = hn_program_parse(text, len, "mem.hir", &p, &why) == HN_OK;
    if (why != NULL)
        fputs(why, stderr);
    hn_string_free(why);
    hn_sb_init(&diag);
    if (*ok) {
        params = calloc((size_t)p->nparams + 1, sizeof(int64_t));
        *ok = params != NULL && hn_params_resolve(p, world, 3, 0, NULL, NULL, params, &diag) == HN_OK &&
              hn_verify_run(p, world, 3, params, &diag, NULL) == HN_OK;
    }
    if (diag.data != NULL)
        fputs(diag.data, stderr);
    hn_sb_free(&diag);
    free(params);
    hn_program_destroy(p);
    return hn_alloc_peak() - before;
}

static void test_program_bytes(void)
{
    int64_t cost[2];
    size_t len[2];
    for (int s = 0; s < 2; s++) {
        hn_strbuf sb;
        int ok, layers = s == 0 ? 4000 : 16000;
        hn_sb_init(&sb);
        hn_sb_append(&sb, header);
        for (int k = 0; k < layers; k++)
            layer(&sb, k);
        hn_sb_append(&sb, "reference {\n  copy Y <- X\n}\n");
        CU_ASSERT_FALSE_FATAL(sb.failed);
        len[s] = sb.len;
        cost[s] = cost_of(sb.data, sb.len, 8, &ok);
        CU_ASSERT_TRUE(ok);
        hn_sb_free(&sb);
        if (cost[s] > (int64_t)len[s] * MAX_BYTES_PER_BYTE)
            fprintf(stderr, "memory: %zu bytes of program took %lld bytes (%.1f per byte)\n", len[s],
                    (long long)cost[s], (double)cost[s] / (double)len[s]);
        CU_ASSERT(cost[s] <= (int64_t)len[s] * MAX_BYTES_PER_BYTE);
    }
    /* four times the program, not much more than four times the bytes */
    CU_ASSERT(cost[1] <= cost[0] * 5);
}

/* A dry run gives back the pages of its value tables whose variables the
 * rest of the program no longer names: a variable named again at the end
 * keeps its value (here a division by it would fail), and the error of a
 * late statement is found as before. */
static void test_tables_given_back(void)
{
    for (int bad = 0; bad < 2; bad++) {
        hn_strbuf sb;
        int ok;
        hn_sb_init(&sb);
        hn_sb_append(&sb, header);
        hn_sb_append(&sb, "keep = 7\nK7 = alloc f32[keep]\n");
        for (int k = 0; k < 6000; k++)
            layer(&sb, k);
        hn_sb_append(&sb, "q = 14 / keep\nfor i in 0 .. 3 {\n  w = i / (q - 1)\n}\nfree K7\n");
        if (bad)
            hn_sb_append(&sb, "free A0\n"); /* freed long ago */
        hn_sb_append(&sb, "reference {\n  copy Y <- X\n}\n");
        CU_ASSERT_FALSE_FATAL(sb.failed);
        if (bad)
            fputs("(an error expected:) ", stderr);
        cost_of(sb.data, sb.len, 8, &ok);
        CU_ASSERT_EQUAL(ok, !bad);
        hn_sb_free(&sb);
    }
}

/* A loop of many trips: its dry run keeps nothing per trip but what it
 * must match, a record per communication (bounded by HN_DRY_RUN_RECORDS). */
static void test_loop_bytes(void)
{
    for (int comm = 0; comm < 2; comm++) {
        int64_t cost[2];
        for (int s = 0; s < 2; s++) {
            char text[1024];
            int ok;
            snprintf(text, sizeof(text),
                     "%sfor i in 0 .. %d {\n  r = select Y, 0, i %% M\n  x = select X, 0, (i + rank) %% M\n"
                     "  add r <- r, x\n%s}\n",
                     header, s == 0 ? 1000 : 50000, comm ? "  c = allreduce r <- r\n  wait c\n" : "");
            cost[s] = cost_of(text, strlen(text), 2, &ok);
            CU_ASSERT_TRUE(ok);
        }
        if (comm) { /* two ranks' records, with their index and growth */
            CU_ASSERT(cost[1] - cost[0] <= (int64_t)2 * 49000 * 256);
        } else {
            CU_ASSERT(cost[1] - cost[0] <= 64 * 1024);
        }
    }
}

void hn_suite_memory(void)
{
    static CU_TestInfo tests[] = {
        {"a program's bytes grow linearly with its text", test_program_bytes},
        {"a long loop's dry run in bounded memory", test_loop_bytes},
        {"the dry run's tables given back as variables die", test_tables_given_back},
        CU_TEST_INFO_NULL,
    };
    hn_test_add_suite("runtime/memory", tests);
}
