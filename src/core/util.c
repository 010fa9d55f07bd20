/* Logging, checked allocation with failure injection, growable strings. */
#include "util.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static pthread_once_t log_once = PTHREAD_ONCE_INIT;
static int log_level = HN_LOG_WARN;

static void log_init(void)
{
    const char *env = getenv("HIRNODE_LOG");
    static const char *names[] = {"error", "warn", "info", "debug", "trace"};
    if (env == NULL)
        return;
    if (strcmp(env, "off") == 0)
        log_level = HN_LOG_OFF;
    for (int i = 0; i < HN_ARRAY_LEN(names); i++)
        if (strcmp(env, names[i]) == 0)
            log_level = i;
}

hn_log_level_t hn_log_level(void)
{
    pthread_once(&log_once, log_init);
    return (hn_log_level_t)__atomic_load_n(&log_level, __ATOMIC_RELAXED);
}

void hn_log_set_level(hn_log_level_t level)
{
    pthread_once(&log_once, log_init);
    __atomic_store_n(&log_level, (int)level, __ATOMIC_RELAXED);
}

void hn_log_emit(hn_log_level_t level, const char *file, int line,
                 const char *fmt, ...)
{
    static const char *tags[] = {"error", "warn", "info", "debug", "trace"};
    char msg[1024];
    va_list ap;
    const char *base = strrchr(file, '/');
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    /* one fprintf per event so lines from rank threads do not interleave */
    fprintf(stderr, "hirnode %s %s:%d: %s\n", tags[level],
            base ? base + 1 : file, line, msg);
}

static long alloc_fail_at;   /* 0: off */
static long alloc_count;

long hn_alloc_fail_after(long n)
{
    long counted = alloc_count;
    alloc_count = 0;
    alloc_fail_at = n;
    return counted;
}

static int alloc_should_fail(void)
{
    if (alloc_fail_at == 0)
        return 0;
    return ++alloc_count >= alloc_fail_at;
}

void *hn_malloc(size_t size)
{
    if (alloc_should_fail())
        return NULL;
    return malloc(size ? size : 1);
}

void *hn_calloc(size_t n, size_t size)
{
    if (alloc_should_fail())
        return NULL;
    return calloc(n ? n : 1, size ? size : 1);
}

void *hn_realloc(void *ptr, size_t size)
{
    if (alloc_should_fail())
        return NULL;
    return realloc(ptr, size ? size : 1);
}

char *hn_strndup(const char *s, size_t n)
{
    char *d = hn_malloc(n + 1);
    if (d == NULL)
        return NULL;
    memcpy(d, s, n);
    d[n] = '\0';
    return d;
}

char *hn_strdup(const char *s) { return hn_strndup(s, strlen(s)); }

void hn_free(void *ptr) { free(ptr); }

int hn_grow(void **arr, int *cap, int need, size_t elem)
{
    int ncap;
    void *p;
    if (need < *cap)
        return 0;
    ncap = *cap ? *cap * 2 : 8;
    while (ncap <= need)
        ncap *= 2;
    p = hn_realloc(*arr, (size_t)ncap * elem);
    if (p == NULL)
        return -1;
    *arr = p;
    *cap = ncap;
    return 0;
}

void hn_sb_init(hn_strbuf *sb) { memset(sb, 0, sizeof(*sb)); }

void hn_sb_free(hn_strbuf *sb)
{
    hn_free(sb->data);
    hn_sb_init(sb);
}

hn_status_t hn_sb_append_file(hn_strbuf *sb, FILE *file)
{
    char buf[65536];
    size_t n;
    while ((n = fread(buf, 1, sizeof(buf), file)) > 0)
        hn_sb_appendn(sb, buf, n);
    fclose(file);
    if (sb->failed) {
        hn_sb_free(sb);
        return HN_ERR_NOMEM;
    }
    return HN_OK;
}

void hn_sb_appendn(hn_strbuf *sb, const char *s, size_t n)
{
    if (sb->failed)
        return;
    if (sb->len + n + 1 > sb->cap) {
        size_t ncap = sb->cap ? sb->cap * 2 : 64;
        char *p;
        while (ncap < sb->len + n + 1)
            ncap *= 2;
        p = hn_realloc(sb->data, ncap);
        if (p == NULL) {
            sb->failed = 1;
            return;
        }
        sb->data = p;
        sb->cap = ncap;
    }
    memcpy(sb->data + sb->len, s, n);
    sb->len += n;
    sb->data[sb->len] = '\0';
}

void hn_sb_append(hn_strbuf *sb, const char *s) { hn_sb_appendn(sb, s, strlen(s)); }

void hn_sb_vprintf(hn_strbuf *sb, const char *fmt, va_list ap)
{
    char small[256];
    va_list ap2;
    int n;
    va_copy(ap2, ap);
    n = vsnprintf(small, sizeof(small), fmt, ap);
    if (n < 0) {
        va_end(ap2);
        return;
    }
    if ((size_t)n < sizeof(small)) {
        hn_sb_appendn(sb, small, (size_t)n);
    } else {
        char *big = hn_malloc((size_t)n + 1);
        if (big == NULL) {
            sb->failed = 1;
        } else {
            vsnprintf(big, (size_t)n + 1, fmt, ap2);
            hn_sb_appendn(sb, big, (size_t)n);
            hn_free(big);
        }
    }
    va_end(ap2);
}

void hn_sb_printf(hn_strbuf *sb, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    hn_sb_vprintf(sb, fmt, ap);
    va_end(ap);
}

char *hn_sb_take(hn_strbuf *sb)
{
    char *d;
    if (sb->failed) {
        hn_sb_free(sb);
        return NULL;
    }
    if (sb->data == NULL)
        hn_sb_appendn(sb, "", 0);
    d = sb->data;
    if (sb->failed)
        d = NULL;
    hn_sb_init(sb);
    return d;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

double hn_median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof(double), cmp_double);
    return v[n / 2];
}

double hn_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

const char *hn_status_string(hn_status_t status)
{
    switch (status) {
    case HN_OK: return "ok";
    case HN_ERR_NOMEM: return "out of memory";
    case HN_ERR_INVALID: return "invalid argument";
    case HN_ERR_PARSE: return "parse error";
    case HN_ERR_VERIFY: return "program rejected by the verifier";
    case HN_ERR_RUNTIME: return "runtime error";
    case HN_ERR_TIMEOUT: return "timed out";
    case HN_ERR_MISMATCH: return "ranks diverged";
    case HN_ERR_UNSUPPORTED: return "unsupported";
    case HN_ERR_IO: return "i/o error";
    case HN_ERR_ABORTED: return "aborted";
    case HN_ERR_DEVICE: return "device error";
    case HN_ERR_DEVICE_LOST: return "device lost";
    case HN_ERR_BUSY: return "busy";
    }
    return "unknown status";
}

const char *hn_version(void)
{
#define HN_STR2(x) #x
#define HN_STR(x) HN_STR2(x)
    return HN_STR(HN_VERSION_MAJOR) "." HN_STR(HN_VERSION_MINOR) "." HN_STR(
        HN_VERSION_PATCH);
}
