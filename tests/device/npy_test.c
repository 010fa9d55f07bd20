/* Tests of src/device/npy.c: random tensors written and read back in every
 * dtype, and every way a file can be wrong (not a regular file, larger than
 * its shape allows, a truncated header or data, bytes after the data, a
 * shape or dtype other than the program's, values an integer tensor cannot
 * hold) refused with the file, the expected and the actual named. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "device/npy.h"
#include "../test.h"

static hn_tensor tensor(hn_dtype dt, int ndim, const int64_t *shape)
{
    hn_tensor t;
    memset(&t, 0, sizeof(t));
    t.dtype = dt;
    t.ndim = ndim;
    memcpy(t.shape, shape, (size_t)ndim * sizeof(int64_t));
    CU_ASSERT_EQUAL(hn_tensor_make_contiguous(&t), 0);
    t.data = calloc((size_t)hn_tensor_numel(&t) + 1, (size_t)hn_dtype_size(dt));
    return t;
}

static void random_fill(hn_tensor *t, uint64_t seed)
{
    for (int64_t i = 0; i < hn_tensor_numel(t); i++) {
        double v = (double)(hn_splitmix64(&seed) % 2001) - 1000.0;
        hn_store(t->dtype, t->data, i, t->dtype == HN_I32 || t->dtype == HN_I64 ? v : v / 64.0);
    }
}

static void poison(hn_tensor *t)
{
    for (int64_t i = 0; i < hn_tensor_numel(t); i++)
        hn_store(t->dtype, t->data, i, -12345);
}

static char dir[64];

static int suite_init(void)
{
    snprintf(dir, sizeof(dir), "/tmp/hn-npy-test-XXXXXX");
    return mkdtemp(dir) == NULL;
}

static int suite_fini(void)
{
    char cmd[128];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
    return system(cmd) != 0;
}

static const char *path_of(const char *name)
{
    static char path[256];
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    return path;
}

/* the first error line for reading path into t ("" when it reads) */
static hn_status_t read_msg(const char *path, const hn_tensor *t, char *msg, size_t n)
{
    hn_strbuf err;
    hn_status_t st;
    hn_sb_init(&err);
    st = hn_npy_read(path, t, &err);
    snprintf(msg, n, "%s", err.data != NULL ? err.data : "");
    hn_sb_free(&err);
    return st;
}

static void test_round_trip(void)
{
    static const hn_dtype dts[] = {HN_F32, HN_BF16, HN_F16, HN_I32, HN_I64};
    static const int64_t shapes[][3] = {{7, 0, 0}, {5, 3, 0}, {2, 3, 4}};
    for (int d = 0; d < HN_ARRAY_LEN(dts); d++)
        for (int s = 0; s < 3; s++) {
            hn_tensor a = tensor(dts[d], s + 1, shapes[s]), b = tensor(dts[d], s + 1, shapes[s]);
            hn_strbuf err;
            hn_sb_init(&err);
            random_fill(&a, (uint64_t)(d * 10 + s));
            poison(&b);
            CU_ASSERT_EQUAL(hn_npy_write(path_of("x.npy"), &a, &err), HN_OK);
            CU_ASSERT_EQUAL(hn_npy_read(path_of("x.npy"), &b, &err), HN_OK);
            /* bf16 and f16 go through float32 and back: exact */
            CU_ASSERT_EQUAL(memcmp(a.data, b.data, hn_tensor_bytes(&a)), 0);
            if (err.data != NULL)
                fprintf(stderr, "\n  %s", err.data);
            hn_sb_free(&err);
            free(a.data);
            free(b.data);
        }
}

/* A file of `len` bytes as given. */
static void write_raw(const char *path, const void *data, size_t len)
{
    FILE *f = fopen(path, "wb");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    CU_ASSERT_EQUAL(fwrite(data, 1, len, f), len);
    fclose(f);
}

/* A .npy file with this header text (padded as numpy pads) and `data`. */
static size_t make_npy(char *buf, size_t cap, const char *header, const void *data, size_t len)
{
    size_t h = strlen(header), total = (10 + h + 1 + 63) / 64 * 64 - 10;
    CU_ASSERT_FATAL(10 + total + len <= cap);
    memcpy(buf, "\x93NUMPY\x01\x00", 8);
    buf[8] = (char)(total & 0xff);
    buf[9] = (char)(total >> 8);
    memcpy(buf + 10, header, h);
    memset(buf + 10 + h, ' ', total - h - 1);
    buf[10 + total - 1] = '\n';
    memcpy(buf + 10 + total, data, len);
    return 10 + total + len;
}

static void expect(const char *name, const char *msg, const char *want)
{
    if (strstr(msg, want) == NULL)
        fprintf(stderr, "\n  %s: got  %s  want %s\n", name, msg, want);
    CU_ASSERT_PTR_NOT_NULL(strstr(msg, want));
}

static void test_size_checks(void)
{
    int64_t shape[2] = {5, 3};
    hn_tensor a = tensor(HN_F32, 2, shape), b = tensor(HN_F32, 2, shape);
    char msg[512], want[512], buf[4096];
    const char *p = path_of("t.npy");
    hn_strbuf err;
    FILE *f;
    long full;
    hn_sb_init(&err);
    random_fill(&a, 3);
    CU_ASSERT_EQUAL_FATAL(hn_npy_write(p, &a, &err), HN_OK);
    f = fopen(p, "rb");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    fseek(f, 0, SEEK_END);
    full = ftell(f);
    fseek(f, 0, SEEK_SET);
    CU_ASSERT_EQUAL((size_t)fread(buf, 1, sizeof(buf), f), (size_t)full);
    fclose(f);
    /* 4 bytes short: the data's size against the file's */
    CU_ASSERT_EQUAL_FATAL(truncate(p, full - 4), 0);
    CU_ASSERT_EQUAL(read_msg(p, &b, msg, sizeof(msg)), HN_ERR_IO);
    snprintf(want, sizeof(want),
             "%s: error: truncated data: shape (5, 3) of '<f4' takes 60 bytes after the %ld-byte header, the file "
             "has 56\n",
             p, full - 60);
    CU_ASSERT_STRING_EQUAL(msg, want);
    /* 4 bytes more */
    memcpy(buf + full, "abcd", 4);
    write_raw(p, buf, (size_t)full + 4);
    CU_ASSERT_EQUAL(read_msg(p, &b, msg, sizeof(msg)), HN_ERR_IO);
    expect("longer", msg, "bytes after the data: shape (5, 3) of '<f4' takes 60 bytes");
    expect("longer", msg, "the file has 64\n");
    /* a truncated header */
    write_raw(p, buf, 40);
    CU_ASSERT_EQUAL(read_msg(p, &b, msg, sizeof(msg)), HN_ERR_IO);
    expect("short header", msg, "error: truncated header: ");
    write_raw(p, buf, 6);
    CU_ASSERT_EQUAL(read_msg(p, &b, msg, sizeof(msg)), HN_ERR_IO);
    expect("no magic", msg, "error: not a .npy file of format 1.0");
    /* larger than any file of this shape may be (header and f8): refused
     * before it is read */
    CU_ASSERT_EQUAL_FATAL(truncate(p, (off_t)1 << 30), 0);
    CU_ASSERT_EQUAL(read_msg(p, &b, msg, sizeof(msg)), HN_ERR_IO);
    snprintf(want, sizeof(want),
             "%s: error: 1073741824 bytes, more than the 4226 bytes a .npy file of shape (5, 3) may have\n", p);
    CU_ASSERT_STRING_EQUAL(msg, want);
    /* not files */
    CU_ASSERT_EQUAL(read_msg(dir, &b, msg, sizeof(msg)), HN_ERR_IO);
    snprintf(want, sizeof(want), "%s: error: not a regular file (a directory)\n", dir);
    CU_ASSERT_STRING_EQUAL(msg, want);
    CU_ASSERT_EQUAL(read_msg("/dev/zero", &b, msg, sizeof(msg)), HN_ERR_IO);
    CU_ASSERT_STRING_EQUAL(msg, "/dev/zero: error: not a regular file (a character device)\n");
    CU_ASSERT_EQUAL(read_msg(path_of("none.npy"), &b, msg, sizeof(msg)), HN_ERR_IO);
    expect("missing", msg, "none.npy: error: cannot read: No such file or directory\n");
    remove(p);
    hn_sb_free(&err);
    free(a.data);
    free(b.data);
}

static void test_headers(void)
{
    static const struct {
        const char *header, *want;
        size_t data;
    } bad[] = {
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (3, 5), }", "error: shape (3, 5), expected (5, 3)", 60},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (15,), }", "error: shape (15,), expected (5, 3)", 60},
        {"{'descr': '<f4', 'fortran_order': True, 'shape': (5, 3), }", "only C-order", 60},
        {"{'descr': '>f4', 'fortran_order': False, 'shape': (5, 3), }", "little-endian", 60},
        {"{'descr': '<f16', 'fortran_order': False, 'shape': (5, 3), }", "little-endian", 240},
        {"{'descr': '<i2', 'fortran_order': False, 'shape': (5, 3), }", "little-endian", 30},
        {"{'descr': '<U4', 'fortran_order': False, 'shape': (5, 3), }", "little-endian", 240},
        {"{'descr': '<f4', 'fortran_order': False, }", "no shape", 60},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (5, -3), }", "not a tuple", 60},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (5, x), }", "not a tuple", 60},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (1, 1, 1, 1, 1, 1, 1, 5, 3), }", "not a tuple", 60},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999, 3), }", "not a tuple", 60},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (5, 3", "not a tuple", 60},
        {"{'descr': '<f8', 'fortran_order': False, 'shape': (5, 3), }", "truncated data", 60},
    };
    int64_t shape[2] = {5, 3};
    hn_tensor b = tensor(HN_F32, 2, shape);
    static char zeros[4096], buf[8192];
    for (int i = 0; i < HN_ARRAY_LEN(bad); i++) {
        char msg[512];
        size_t n = make_npy(buf, sizeof(buf), bad[i].header, zeros, bad[i].data);
        hn_strbuf err;
        hn_sb_init(&err);
        poison(&b);
        CU_ASSERT_EQUAL(hn_npy_decode(buf, n, "m.npy", &b, &err), HN_ERR_IO);
        snprintf(msg, sizeof(msg), "%s", err.data != NULL ? err.data : "");
        CU_ASSERT(strncmp(msg, "m.npy: error: ", 14) == 0);
        expect(bad[i].header, msg, bad[i].want);
        hn_sb_free(&err);
    }
    /* a header longer than this reader takes */
    {
        hn_strbuf err;
        memcpy(buf, "\x93NUMPY\x01\x00\xff\xff", 10);
        hn_sb_init(&err);
        CU_ASSERT_EQUAL(hn_npy_decode(buf, sizeof(buf), "m.npy", &b, &err), HN_ERR_IO);
        expect("long header", err.data ? err.data : "", "a header of 65535 bytes: this reader takes up to 4095");
        hn_sb_free(&err);
    }
    free(b.data);
}

/* f8 and i8 files into every dtype; what an integer tensor cannot hold is
 * refused, not cast (a cast of such a double is undefined) */
static void test_conversions(void)
{
    int64_t shape[1] = {4};
    double f8[4] = {1.5, -2.75, 1e6, -0.0};
    int64_t i8[4] = {INT64_MAX, INT64_MIN, 7, -7};
    static char buf[1024];
    hn_strbuf err;
    size_t n;
    hn_tensor f = tensor(HN_F32, 1, shape), i32 = tensor(HN_I32, 1, shape), i64 = tensor(HN_I64, 1, shape);
    hn_sb_init(&err);
    n = make_npy(buf, sizeof(buf), "{'descr': '<f8', 'fortran_order': False, 'shape': (4,), }", f8, sizeof(f8));
    CU_ASSERT_EQUAL(hn_npy_decode(buf, n, "a.npy", &f, &err), HN_OK);
    CU_ASSERT(((float *)f.data)[0] == 1.5f && ((float *)f.data)[1] == -2.75f && ((float *)f.data)[2] == 1e6f);
    CU_ASSERT_EQUAL(hn_npy_decode(buf, n, "a.npy", &i32, &err), HN_OK);
    CU_ASSERT(((int32_t *)i32.data)[0] == 1 && ((int32_t *)i32.data)[1] == -2 && ((int32_t *)i32.data)[2] == 1000000);
    n = make_npy(buf, sizeof(buf), "{'descr': '<i8', 'fortran_order': False, 'shape': (4,), }", i8, sizeof(i8));
    CU_ASSERT_EQUAL(hn_npy_decode(buf, n, "b.npy", &i64, &err), HN_OK);
    /* exact, not through a double */
    CU_ASSERT(((int64_t *)i64.data)[0] == INT64_MAX && ((int64_t *)i64.data)[1] == INT64_MIN);
    CU_ASSERT_PTR_NULL(err.data);
    CU_ASSERT_EQUAL(hn_npy_decode(buf, n, "b.npy", &i32, &err), HN_ERR_IO);
    expect("i8 into i32", err.data ? err.data : "", "b.npy: error: element 0 does not fit in i32");
    hn_sb_free(&err);
    {
        double huge[4] = {1, 2, 1e300, NAN};
        n = make_npy(buf, sizeof(buf), "{'descr': '<f8', 'fortran_order': False, 'shape': (4,), }", huge,
                     sizeof(huge));
        CU_ASSERT_EQUAL(hn_npy_decode(buf, n, "c.npy", &i64, &err), HN_ERR_IO);
        expect("1e300 into i64", err.data ? err.data : "", "element 2 does not fit in i64");
        hn_sb_free(&err);
        huge[2] = 3;
        n = make_npy(buf, sizeof(buf), "{'descr': '<f8', 'fortran_order': False, 'shape': (4,), }", huge,
                     sizeof(huge));
        CU_ASSERT_EQUAL(hn_npy_decode(buf, n, "c.npy", &i32, &err), HN_ERR_IO);
        expect("nan into i32", err.data ? err.data : "", "element 3 does not fit in i32");
        hn_sb_free(&err);
    }
    free(f.data);
    free(i32.data);
    free(i64.data);
}

void hn_suite_npy(void)
{
    static CU_TestInfo tests[] = {
        {"random tensors of every dtype written and read back", test_round_trip},
        {"file checks: sizes against the shape, not files, missing", test_size_checks},
        {"headers: shape, order, dtype, length", test_headers},
        {"f8 and i8 data into every dtype, values that do not fit refused", test_conversions},
        CU_TEST_INFO_NULL,
    };
    CU_SuiteInfo suites[] = {{"device/npy", suite_init, suite_fini, NULL, NULL, tests}, CU_SUITE_INFO_NULL};
    CU_register_suites(suites);
}
