/* Tests of src/base/util.c's strict parsers of what people write (integers,
 * numbers, sizes, with one message format), the nearest keyword for "did
 * you mean", and the checked file reader (regular files only, a size
 * limit, nothing that blocks). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../test.h"

static void test_int64(void)
{
    static const struct {
        const char *s;
        int64_t want;
    } good[] = {
        {"0", 0}, {"7", 7}, {"-5", -5}, {"+12", 12}, {"0x10", 16}, {"0XfF", 255}, {"007", 7},
        {"9223372036854775807", INT64_MAX}, {"-9223372036854775808", INT64_MIN}, {"-0x8000000000000000", INT64_MIN},
    };
    static const char *bad[] = {
        "", " 5", "5 ", "5x", "x5", "0x", "--5", "+-5", "-", "+", "1e3", "1.0", "9223372036854775808",
        "-9223372036854775809", "99999999999999999999", "0x10000000000000000", "5\n", "\xff",
    };
    for (int i = 0; i < HN_ARRAY_LEN(good); i++) {
        int64_t v = 42;
        CU_ASSERT_EQUAL(hn_parse_int64("x", good[i].s, INT64_MIN, INT64_MAX, &v, NULL), HN_OK);
        if (v != good[i].want)
            fprintf(stderr, "\n  '%s' gave %lld\n", good[i].s, (long long)v);
        CU_ASSERT_EQUAL(v, good[i].want);
    }
    for (int i = 0; i < HN_ARRAY_LEN(bad); i++) {
        int64_t v = 42;
        hn_strbuf err;
        hn_sb_init(&err);
        CU_ASSERT_EQUAL(hn_parse_int64("-D N", bad[i], INT64_MIN, INT64_MAX, &v, &err), HN_ERR_INVALID);
        CU_ASSERT_EQUAL(v, 42); /* untouched */
        CU_ASSERT_PTR_NOT_NULL_FATAL(err.data);
        CU_ASSERT(strncmp(err.data, "-D N: expected an integer, not '", 32) == 0);
        hn_sb_free(&err);
    }
    CU_ASSERT_EQUAL(hn_parse_int64("x", NULL, 0, 1, &(int64_t){0}, NULL), HN_ERR_INVALID);
}

/* The message says the range the way it is: both ends, one, or none. */
static void test_int64_messages(void)
{
    static const struct {
        const char *s;
        int64_t lo, hi;
        const char *want;
    } cases[] = {
        {"5x", 1, 1000000, "--iters: expected an integer from 1 to 1000000, not '5x'"},
        {"0", 1, 1000000, "--iters: expected an integer from 1 to 1000000, not '0'"},
        {"1000001", 1, 1000000, "--iters: expected an integer from 1 to 1000000, not '1000001'"},
        {"-1", 0, INT64_MAX, "--iters: expected an integer of at least 0, not '-1'"},
        {"", INT64_MIN, INT64_MAX, "--iters: expected an integer, not ''"},
        {"a\tb\x01", 1, 2, "--iters: expected an integer from 1 to 2, not 'a\\x09b\\x01'"},
        {"1234567890123456789012345678901234567890123", 1, 2,
         "--iters: expected an integer from 1 to 2, not '1234567890123456789012345678901234567890...'"},
    };
    for (int i = 0; i < HN_ARRAY_LEN(cases); i++) {
        int64_t v = 0;
        hn_strbuf err;
        hn_sb_init(&err);
        CU_ASSERT_EQUAL(hn_parse_int64("--iters", cases[i].s, cases[i].lo, cases[i].hi, &v, &err), HN_ERR_INVALID);
        CU_ASSERT_PTR_NOT_NULL_FATAL(err.data);
        if (strcmp(err.data, cases[i].want) != 0)
            fprintf(stderr, "\n  got  %s\n  want %s\n", err.data, cases[i].want);
        CU_ASSERT_STRING_EQUAL(err.data, cases[i].want);
        hn_sb_free(&err);
    }
    {
        int64_t v = 0;
        CU_ASSERT_EQUAL(hn_parse_int64("--iters", "1000000", 1, 1000000, &v, NULL), HN_OK);
        CU_ASSERT_EQUAL(v, 1000000);
    }
}

static void test_double(void)
{
    static const struct {
        const char *s;
        double want;
    } good[] = {{"0", 0}, {"1.5", 1.5}, {"-2", -2}, {"1e3", 1000}, {".5", 0.5}, {"5.", 5}, {"+7E-1", 0.7}};
    static const char *bad[] = {"", " 1", "1 ", "1x", "nan", "NaN", "inf", "-inf", "infinity", "0x1p3",
                                "1e999", "-1e999", "1..2", "e5", ".", "1e", "--1"};
    hn_strbuf err;
    double v;
    for (int i = 0; i < HN_ARRAY_LEN(good); i++) {
        v = -99;
        CU_ASSERT_EQUAL(hn_parse_double("x", good[i].s, -1e9, 1e9, &v, NULL), HN_OK);
        CU_ASSERT_DOUBLE_EQUAL(v, good[i].want, 1e-12);
    }
    for (int i = 0; i < HN_ARRAY_LEN(bad); i++) {
        v = -99;
        if (hn_parse_double("x", bad[i], -1e300, 1e300, &v, NULL) != HN_ERR_INVALID)
            fprintf(stderr, "\n  accepted '%s'\n", bad[i]);
        CU_ASSERT_EQUAL(v, -99);
    }
    hn_sb_init(&err);
    CU_ASSERT_EQUAL(hn_parse_double("--timeout", "0", 0.001, 1e6, &v, &err), HN_ERR_INVALID);
    CU_ASSERT_STRING_EQUAL(err.data, "--timeout: expected a number from 0.001 to 1e+06, not '0'");
    hn_sb_free(&err);
    CU_ASSERT_EQUAL(hn_parse_double("--delay", "-1", 0, HUGE_VAL, &v, &err), HN_ERR_INVALID);
    CU_ASSERT_STRING_EQUAL(err.data, "--delay: expected a number of at least 0, not '-1'");
    hn_sb_free(&err);
}

static void test_size(void)
{
    static const struct {
        const char *s;
        uint64_t want;
    } good[] = {
        {"0", 0}, {"100", 100}, {"100B", 100}, {"100b", 100}, {"8K", 8192}, {"8k", 8192}, {"8KB", 8192},
        {"8KiB", 8192}, {"16M", 16u << 20}, {"16MiB", 16u << 20}, {"1G", 1u << 30}, {"2T", (uint64_t)2 << 40},
        {"16777215T", (uint64_t)16777215 << 40}, {"18446744073709551615", UINT64_MAX},
    };
    static const char *bad[] = {"", "K", "8X", "8 K", " 8K", "8K ", "1.5M", "-1", "+1", "8KK", "8Ki", "8iB",
                                "8kib", "16777216T", "18446744073709551616", "0x10", "8P"};
    char text[32];
    hn_strbuf err;
    uint64_t v;
    for (int i = 0; i < HN_ARRAY_LEN(good); i++) {
        v = 1;
        CU_ASSERT_EQUAL(hn_parse_size("x", good[i].s, 0, UINT64_MAX, &v, NULL), HN_OK);
        if (v != good[i].want)
            fprintf(stderr, "\n  '%s' gave %llu\n", good[i].s, (unsigned long long)v);
        CU_ASSERT_EQUAL(v, good[i].want);
    }
    for (int i = 0; i < HN_ARRAY_LEN(bad); i++) {
        v = 1;
        if (hn_parse_size("x", bad[i], 0, UINT64_MAX, &v, NULL) != HN_ERR_INVALID)
            fprintf(stderr, "\n  accepted '%s'\n", bad[i]);
        CU_ASSERT_EQUAL(v, 1);
    }
    hn_sb_init(&err);
    CU_ASSERT_EQUAL(hn_parse_size("--min", "8X", 1, (uint64_t)1 << 40, &v, &err), HN_ERR_INVALID);
    CU_ASSERT_STRING_EQUAL(err.data,
                           "--min: expected a size from 1 byte to 1 TiB (bytes, or with K, M, G: 8K, 16M), not '8X'");
    hn_sb_free(&err);
    CU_ASSERT_EQUAL(hn_parse_size("--max", "2G", 1024, 1u << 30, &v, &err), HN_ERR_INVALID);
    CU_ASSERT_STRING_EQUAL(err.data,
                           "--max: expected a size from 1 KiB to 1 GiB (bytes, or with K, M, G: 8K, 16M), not '2G'");
    hn_sb_free(&err);
    /* the text of sizes: a unit only where it divides */
    hn_size_text(0, text, sizeof(text));
    CU_ASSERT_STRING_EQUAL(text, "0 bytes");
    hn_size_text(1, text, sizeof(text));
    CU_ASSERT_STRING_EQUAL(text, "1 byte");
    hn_size_text(1536, text, sizeof(text));
    CU_ASSERT_STRING_EQUAL(text, "1536 bytes");
    hn_size_text(3 << 10, text, sizeof(text));
    CU_ASSERT_STRING_EQUAL(text, "3 KiB");
    hn_size_text((size_t)64 << 20, text, sizeof(text));
    CU_ASSERT_STRING_EQUAL(text, "64 MiB");
    hn_size_text((uint64_t)5 << 50, text, sizeof(text));
    CU_ASSERT_STRING_EQUAL(text, "5120 TiB");
}

static void test_nearest_word(void)
{
    static const char *const words[] = {"allgather", "allreduce", "alloc", "copy", "if", NULL, "for", "recv"};
    static const struct {
        const char *word, *want;
    } cases[] = {
        {"allreduc", "allreduce"}, {"allreducee", "allreduce"}, {"alreduce", "allreduce"}, {"allgahter", "allgather"},
        {"AllReduce", "allreduce"}, {"cpy", "copy"}, {"cpoy", "copy"}, {"fo", "for"}, {"or", "for"}, {"ro", NULL},
        {"aloc", "alloc"}, {"rcev", "recv"}, {"x", NULL}, {"frobnicate", NULL}, {"allreduxxx", NULL}, {"cp", NULL},
        {"abcdefghijklmnopqrstuvwxyzabcdefghijkl", NULL},
    };
    for (int i = 0; i < HN_ARRAY_LEN(cases); i++) {
        const char *got = hn_nearest_word(cases[i].word, strlen(cases[i].word), words, HN_ARRAY_LEN(words));
        if (got != cases[i].want && (got == NULL || cases[i].want == NULL || strcmp(got, cases[i].want) != 0))
            fprintf(stderr, "\n  %s: got %s, want %s\n", cases[i].word, got ? got : "none",
                    cases[i].want ? cases[i].want : "none");
        CU_ASSERT(cases[i].want == NULL ? got == NULL : got != NULL && strcmp(got, cases[i].want) == 0);
    }
    /* only the first len bytes count */
    CU_ASSERT_STRING_EQUAL(hn_nearest_word("copy=3", 4, words, HN_ARRAY_LEN(words)), "copy");
}

static void test_word(void)
{
    static const char *const words[] = {"auto", "cuda", "host"}, *const one[] = {"on"};
    hn_strbuf err;
    int i = -1;
    hn_sb_init(&err);
    CU_ASSERT_EQUAL(hn_parse_word("--backend", "cuda", words, 3, &i, &err), HN_OK);
    CU_ASSERT_EQUAL(i, 1);
    CU_ASSERT_EQUAL(hn_parse_word("--backend", "host", words, 3, &i, NULL), HN_OK);
    CU_ASSERT_EQUAL(i, 2);
    CU_ASSERT_PTR_NULL(err.data);
    /* exactly the word: no prefix, no case, no blank; *index left alone */
    for (int k = 0; k < 5; k++) {
        static const char *const bad[] = {"gpu", "cud", "CUDA", "cuda ", ""};
        CU_ASSERT_EQUAL(hn_parse_word("--backend", bad[k], words, 3, &i, NULL), HN_ERR_INVALID);
        CU_ASSERT_EQUAL(i, 2);
    }
    CU_ASSERT_EQUAL(hn_parse_word("--backend", NULL, words, 3, &i, NULL), HN_ERR_INVALID);
    CU_ASSERT_EQUAL(hn_parse_word("--backend", "gpu", words, 3, &i, &err), HN_ERR_INVALID);
    CU_ASSERT_STRING_EQUAL(err.data, "--backend: expected auto, cuda or host, not 'gpu'");
    hn_sb_free(&err);
    hn_sb_init(&err);
    CU_ASSERT_EQUAL(hn_parse_word("HIRNODE_X", "o\tn", one, 1, &i, &err), HN_ERR_INVALID);
    CU_ASSERT_STRING_EQUAL(err.data, "HIRNODE_X: expected on, not 'o\\x09n'");
    hn_sb_free(&err);
}

/* A fresh folder under /tmp for one test's files. */
static char *scratch(void)
{
    char *dir = strdup("/tmp/hn-util-test-XXXXXX");
    CU_ASSERT_PTR_NOT_NULL_FATAL(dir);
    CU_ASSERT_PTR_NOT_NULL_FATAL(mkdtemp(dir));
    return dir;
}

static void remove_in(const char *dir, const char *name)
{
    char path[512];
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    remove(path);
}

/* the reason hn_file_read gives for path, into why ("" when it reads) */
static hn_status_t read_why(const char *path, uint64_t max, char *why, size_t n)
{
    hn_strbuf err;
    char *data = NULL;
    size_t len = 0;
    hn_status_t st;
    hn_sb_init(&err);
    st = hn_file_read(path, "a test file", max, &data, &len, &err);
    snprintf(why, n, "%s", err.data != NULL ? err.data : "");
    CU_ASSERT(st == HN_OK ? data != NULL : data == NULL);
    hn_free(data);
    hn_sb_free(&err);
    return st;
}

static void test_read_regular(void)
{
    char *dir = scratch(), path[512], *data = NULL;
    unsigned char bytes[3000];
    uint64_t seed = 7;
    size_t len = 0;
    FILE *f;
    for (size_t i = 0; i < sizeof(bytes); i++)
        bytes[i] = (unsigned char)hn_splitmix64(&seed); /* NUL bytes too */
    snprintf(path, sizeof(path), "%s/data.bin", dir);
    f = fopen(path, "wb");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    CU_ASSERT_EQUAL(fwrite(bytes, 1, sizeof(bytes), f), sizeof(bytes));
    fclose(f);
    CU_ASSERT_EQUAL(hn_file_read(path, "a test file", sizeof(bytes), &data, &len, NULL), HN_OK);
    CU_ASSERT_EQUAL(len, sizeof(bytes));
    CU_ASSERT(data != NULL && memcmp(data, bytes, sizeof(bytes)) == 0 && data[len] == '\0');
    hn_free(data);
    /* one byte past the limit: refused before anything is read */
    {
        char why[256];
        CU_ASSERT_EQUAL(read_why(path, sizeof(bytes) - 1, why, sizeof(why)), HN_ERR_IO);
        CU_ASSERT_STRING_EQUAL(why, "3000 bytes, more than the 2999 bytes a test file may have");
    }
    /* the open stream and its size */
    {
        FILE *g = NULL;
        uint64_t size = 0;
        CU_ASSERT_EQUAL(hn_file_open(path, "a test file", 1 << 20, &g, &size, NULL), HN_OK);
        CU_ASSERT_EQUAL(size, sizeof(bytes));
        CU_ASSERT(g != NULL && fgetc(g) == bytes[0]);
        if (g != NULL)
            fclose(g);
    }
    /* an empty file is a file */
    f = fopen(path, "wb");
    fclose(f);
    data = NULL;
    CU_ASSERT_EQUAL(hn_file_read(path, "a test file", 0, &data, &len, NULL), HN_OK);
    CU_ASSERT(len == 0 && data != NULL && data[0] == '\0');
    hn_free(data);
    /* out of memory for the buffer: said, nothing leaks */
    {
        hn_strbuf err;
        hn_sb_init(&err);
        data = NULL;
        hn_alloc_fail_after(1);
        CU_ASSERT_EQUAL(hn_file_read(path, "a test file", 0, &data, &len, &err), HN_ERR_NOMEM);
        hn_alloc_fail_after(0);
        CU_ASSERT_PTR_NULL(data);
        hn_sb_free(&err);
    }
    remove(path);
    rmdir(dir);
    free(dir);
}

/* What is not a regular file is refused by name, at once: a FIFO without
 * a writer would block an fopen for ever. */
static void test_read_refuses(void)
{
    char *dir = scratch(), path[512], why[256];
    FILE *f;
    CU_ASSERT_EQUAL(read_why(dir, 1 << 20, why, sizeof(why)), HN_ERR_IO);
    CU_ASSERT_STRING_EQUAL(why, "not a regular file (a directory)");
    CU_ASSERT_EQUAL(read_why("/dev/zero", 1 << 20, why, sizeof(why)), HN_ERR_IO);
    CU_ASSERT_STRING_EQUAL(why, "not a regular file (a character device)");
    CU_ASSERT_EQUAL(read_why("/dev/null", 1 << 20, why, sizeof(why)), HN_ERR_IO);
    CU_ASSERT_STRING_EQUAL(why, "not a regular file (a character device)");
    snprintf(path, sizeof(path), "%s/fifo", dir);
    CU_ASSERT_EQUAL_FATAL(mkfifo(path, 0600), 0);
    CU_ASSERT_EQUAL(read_why(path, 1 << 20, why, sizeof(why)), HN_ERR_IO);
    CU_ASSERT_STRING_EQUAL(why, "not a regular file (a FIFO)");
    remove(path);
    snprintf(path, sizeof(path), "%s/missing", dir);
    CU_ASSERT_EQUAL(read_why(path, 1 << 20, why, sizeof(why)), HN_ERR_IO);
    CU_ASSERT_STRING_EQUAL(why, "cannot read: No such file or directory");
    /* a link to a directory is the directory; to a file, the file */
    snprintf(path, sizeof(path), "%s/link", dir);
    CU_ASSERT_EQUAL_FATAL(symlink(dir, path), 0);
    CU_ASSERT_EQUAL(read_why(path, 1 << 20, why, sizeof(why)), HN_ERR_IO);
    CU_ASSERT_STRING_EQUAL(why, "not a regular file (a directory)");
    remove(path);
    /* a sparse file of 64 MiB + 1 against a 64 MiB limit: refused unread */
    snprintf(path, sizeof(path), "%s/big", dir);
    f = fopen(path, "wb");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    CU_ASSERT_EQUAL(ftruncate(fileno(f), ((off_t)64 << 20) + 1), 0);
    fclose(f);
    CU_ASSERT_EQUAL(read_why(path, (uint64_t)64 << 20, why, sizeof(why)), HN_ERR_IO);
    CU_ASSERT_STRING_EQUAL(why, "67108865 bytes, more than the 64 MiB a test file may have");
    remove_in(dir, "big");
    /* no err: the status alone */
    CU_ASSERT_EQUAL(hn_file_read(dir, "a test file", 1, &(char *){NULL}, NULL, NULL), HN_ERR_IO);
    rmdir(dir);
    free(dir);
}

void hn_suite_util(void)
{
    static CU_TestInfo tests[] = {
        {"integers: all of the text, in range", test_int64},
        {"integers: the message names the option, range and text", test_int64_messages},
        {"numbers: decimal and finite only", test_double},
        {"sizes: K, M, G, T suffixes, no fractions, no overflow", test_size},
        {"the nearest keyword for did-you-mean", test_nearest_word},
        {"words: exactly one of a list, the list in the message", test_word},
        {"reading a regular file, its size limit, out of memory", test_read_regular},
        {"directories, devices, FIFOs, missing and oversize files refused", test_read_refuses},
        CU_TEST_INFO_NULL,
    };
    hn_test_add_suite("base/util", tests);
}
