/* Logging, checked allocation with failure injection, growable strings,
 * strict parsing of the values people write, checked reading of the files
 * they name. */
#include "util.h"

#include <malloc.h>

#include <errno.h>
#include <fcntl.h>
#include <float.h>
#include <malloc.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

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
    /* one fprintf per event so lines from rank threads do not interleave;
     * the runtime's own source location only for its developers (debug and
     * trace): errors and warnings a user reads carry none */
    if (hn_log_level() >= HN_LOG_DEBUG)
        fprintf(stderr, "hirnode %s %s:%d: %s\n", tags[level],
                base ? base + 1 : file, line, msg);
    else
        fprintf(stderr, "hirnode %s: %s\n", tags[level], msg);
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

/* signed: a block that some code allocated with plain malloc and hands
 * to hn_free takes off what was never counted */
static int64_t alloc_live, alloc_peak;

static void *counted(void *p)
{
    if (p != NULL) {
        int64_t live = __atomic_add_fetch(&alloc_live, (int64_t)malloc_usable_size(p), __ATOMIC_RELAXED);
        int64_t peak = __atomic_load_n(&alloc_peak, __ATOMIC_RELAXED);
        while (live > peak &&
               !__atomic_compare_exchange_n(&alloc_peak, &peak, live, 1, __ATOMIC_RELAXED, __ATOMIC_RELAXED))
            ;
    }
    return p;
}

static void uncount(void *p)
{
    if (p != NULL)
        __atomic_sub_fetch(&alloc_live, (int64_t)malloc_usable_size(p), __ATOMIC_RELAXED);
}

int64_t hn_alloc_live(void) { return __atomic_load_n(&alloc_live, __ATOMIC_RELAXED); }
int64_t hn_alloc_peak(void) { return __atomic_load_n(&alloc_peak, __ATOMIC_RELAXED); }

int64_t hn_alloc_peak_reset(void)
{
    int64_t live = hn_alloc_live();
    __atomic_store_n(&alloc_peak, live, __ATOMIC_RELAXED);
    return live;
}

void *hn_malloc(size_t size)
{
    if (alloc_should_fail())
        return NULL;
    return counted(malloc(size ? size : 1));
}

void *hn_calloc(size_t n, size_t size)
{
    if (alloc_should_fail())
        return NULL;
    return counted(calloc(n ? n : 1, size ? size : 1));
}

void *hn_realloc(void *ptr, size_t size)
{
    int64_t before = ptr != NULL ? (int64_t)malloc_usable_size(ptr) : 0;
    void *p;
    if (alloc_should_fail())
        return NULL;
    if ((p = realloc(ptr, size ? size : 1)) == NULL)
        return NULL;
    __atomic_sub_fetch(&alloc_live, before, __ATOMIC_RELAXED);
    return counted(p);
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

void hn_free(void *ptr)
{
    uncount(ptr);
    free(ptr);
}

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

/* ---- values people write ---- */

/* 'text' as given, printable bytes only, at most 40 of them. */
static void quote(hn_strbuf *sb, const char *s)
{
    size_t n = s != NULL ? strlen(s) : 0;
    hn_sb_append(sb, "'");
    for (size_t i = 0; i < n && i < 40; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c >= 32 && c < 127)
            hn_sb_appendn(sb, (const char *)&c, 1);
        else
            hn_sb_printf(sb, "\\x%02x", c);
    }
    hn_sb_append(sb, n > 40 ? "...'" : "'");
}

static hn_status_t refuse(hn_strbuf *err, const char *what, const char *s, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static hn_status_t refuse(hn_strbuf *err, const char *what, const char *s, const char *fmt, ...)
{
    va_list ap;
    if (err == NULL)
        return HN_ERR_INVALID;
    hn_sb_printf(err, "%s: expected ", what);
    va_start(ap, fmt);
    hn_sb_vprintf(err, fmt, ap);
    va_end(ap);
    hn_sb_append(err, ", not ");
    quote(err, s);
    return HN_ERR_INVALID;
}

/* Digits in base 10 or 16 up to the end of s, into *v; 0 if there are
 * none, another byte follows, or the value passes 2^64 - 1. */
static int digits_u64(const char *p, int base, uint64_t *v)
{
    uint64_t acc = 0;
    int n = 0;
    for (; *p != '\0'; p++, n++) {
        int d = *p >= '0' && *p <= '9'   ? *p - '0'
                : *p >= 'a' && *p <= 'f' ? *p - 'a' + 10
                : *p >= 'A' && *p <= 'F' ? *p - 'A' + 10
                                         : 99;
        if (d >= base || acc > (UINT64_MAX - (uint64_t)d) / (uint64_t)base)
            return 0;
        acc = acc * (uint64_t)base + (uint64_t)d;
    }
    *v = acc;
    return n > 0;
}

static int parse_i64(const char *s, int64_t *out)
{
    int neg = *s == '-';
    uint64_t v;
    if (*s == '+' || *s == '-')
        s++;
    if (s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) {
        if (!digits_u64(s + 2, 16, &v))
            return 0;
    } else if (!digits_u64(s, 10, &v)) {
        return 0;
    }
    if (v > (uint64_t)INT64_MAX + neg)
        return 0;
    *out = neg ? (int64_t)(0 - v) : (int64_t)v; /* 0 - 2^63 wraps to INT64_MIN */
    return 1;
}

hn_status_t hn_parse_int64(const char *what, const char *s, int64_t lo, int64_t hi, int64_t *out, hn_strbuf *err)
{
    int64_t v;
    if (s != NULL && parse_i64(s, &v) && v >= lo && v <= hi) {
        *out = v;
        return HN_OK;
    }
    if (lo == INT64_MIN && hi == INT64_MAX)
        return refuse(err, what, s, "an integer");
    if (hi == INT64_MAX)
        return refuse(err, what, s, "an integer of at least %lld", (long long)lo);
    return refuse(err, what, s, "an integer from %lld to %lld", (long long)lo, (long long)hi);
}

hn_status_t hn_parse_double(const char *what, const char *s, double lo, double hi, double *out, hn_strbuf *err)
{
    char *end = NULL;
    double v = 0;
    /* decimal only: no blanks, hexadecimal, nan or inf that strtod takes */
    int ok = s != NULL && *s != '\0' && strspn(s, "0123456789.eE+-") == strlen(s);
    if (ok) {
        v = strtod(s, &end);
        ok = end != s && *end == '\0' && isfinite(v) && v >= lo && v <= hi;
    }
    if (ok) {
        *out = v;
        return HN_OK;
    }
    if (hi >= DBL_MAX)
        return refuse(err, what, s, "a number of at least %g", lo);
    return refuse(err, what, s, "a number from %g to %g", lo, hi);
}

hn_status_t hn_parse_size(const char *what, const char *s, uint64_t lo, uint64_t hi, uint64_t *out, hn_strbuf *err)
{
    static const char units[] = "KMGT";
    char num[32], lo_text[32], hi_text[32];
    size_t n = s != NULL ? strspn(s, "0123456789") : 0;
    const char *suffix = s != NULL ? s + n : "";
    uint64_t v, scale = 1;
    int ok = n > 0 && n < sizeof(num);
    if (ok) {
        char upper = (char)(suffix[0] & ~0x20); /* 'k' as 'K'; a blank becomes NUL */
        const char *u = upper != '\0' ? strchr(units, upper) : NULL;
        memcpy(num, s, n);
        num[n] = '\0';
        if (u != NULL) {
            scale = (uint64_t)1 << (10 * (u - units + 1));
            suffix++;
            if (strcmp(suffix, "iB") == 0 || strcmp(suffix, "B") == 0 || strcmp(suffix, "b") == 0)
                suffix += strlen(suffix);
        } else if (strcmp(suffix, "B") == 0 || strcmp(suffix, "b") == 0) {
            suffix++;
        }
        ok = *suffix == '\0' && digits_u64(num, 10, &v) && v <= UINT64_MAX / scale;
    }
    if (ok && v * scale >= lo && v * scale <= hi) {
        *out = v * scale;
        return HN_OK;
    }
    hn_size_text(lo, lo_text, sizeof(lo_text));
    hn_size_text(hi, hi_text, sizeof(hi_text));
    return refuse(err, what, s, "a size from %s to %s (bytes, or with K, M, G: 8K, 16M)", lo_text, hi_text);
}

hn_status_t hn_parse_word(const char *what, const char *s, const char *const *words, int n, int *index,
                          hn_strbuf *err)
{
    hn_strbuf list;
    hn_status_t st;
    for (int i = 0; i < n && s != NULL; i++)
        if (strcmp(s, words[i]) == 0) {
            *index = i;
            return HN_OK;
        }
    if (err == NULL)
        return HN_ERR_INVALID;
    hn_sb_init(&list);
    for (int i = 0; i < n; i++)
        hn_sb_printf(&list, "%s%s", i == 0 ? "" : i + 1 < n ? ", " : " or ", words[i]);
    st = refuse(err, what, s, "%s", list.data != NULL ? list.data : "");
    hn_sb_free(&list);
    return st;
}

void hn_size_text(uint64_t bytes, char *buf, size_t n)
{
    static const char *units[] = {"KiB", "MiB", "GiB", "TiB"};
    int u = -1;
    while (u + 1 < HN_ARRAY_LEN(units) && bytes != 0 && bytes % ((uint64_t)1 << (10 * (u + 2))) == 0)
        u++;
    if (u < 0)
        snprintf(buf, n, "%llu byte%s", (unsigned long long)bytes, bytes == 1 ? "" : "s");
    else
        snprintf(buf, n, "%llu %s", (unsigned long long)(bytes >> (10 * (u + 1))), units[u]);
}

/* Optimal string alignment distance of a and b, case ignored; at most
 * 32 bytes each (longer: a large distance). */
static int edit_distance(const char *a, size_t la, const char *b, size_t lb)
{
    int d[33][33];
    if (la > 32 || lb > 32)
        return 99;
    for (size_t i = 0; i <= la; i++)
        d[i][0] = (int)i;
    for (size_t j = 0; j <= lb; j++)
        d[0][j] = (int)j;
    for (size_t i = 1; i <= la; i++)
        for (size_t j = 1; j <= lb; j++) {
            int ca = a[i - 1] | 0x20, cb = b[j - 1] | 0x20; /* ASCII letters folded, enough here */
            int v = HN_MIN(d[i - 1][j] + 1, d[i][j - 1] + 1);
            v = HN_MIN(v, d[i - 1][j - 1] + (ca != cb));
            if (i > 1 && j > 1 && ca == (b[j - 2] | 0x20) && (a[i - 2] | 0x20) == cb)
                v = HN_MIN(v, d[i - 2][j - 2] + 1);
            d[i][j] = v;
        }
    return d[la][lb];
}

const char *hn_nearest_word(const char *word, size_t len, const char *const *words, int n)
{
    const char *best = NULL;
    int best_d = len <= 4 ? 1 : 2;
    for (int i = 0; i < n; i++) {
        int dist;
        if (words[i] == NULL)
            continue;
        dist = edit_distance(word, len, words[i], strlen(words[i]));
        if (dist <= best_d && (best == NULL || dist < best_d)) {
            best = words[i];
            best_d = dist;
        }
    }
    return best;
}

/* ---- files people name ---- */

static const char *file_kind(mode_t m)
{
    return S_ISDIR(m) ? "a directory" : S_ISFIFO(m) ? "a FIFO" : S_ISCHR(m) ? "a character device"
           : S_ISBLK(m) ? "a block device" : S_ISSOCK(m) ? "a socket" : "not a file";
}

/* Whether st is a regular file of at most max bytes; why not into err. */
static int file_fits(const struct stat *st, const char *what, uint64_t max, hn_strbuf *err)
{
    char limit[32];
    if (!S_ISREG(st->st_mode)) {
        if (err != NULL)
            hn_sb_printf(err, "not a regular file (%s)", file_kind(st->st_mode));
        return 0;
    }
    if ((uint64_t)st->st_size > max) {
        hn_size_text(max, limit, sizeof(limit));
        if (err != NULL)
            hn_sb_printf(err, "%lld bytes, more than the %s %s may have", (long long)st->st_size, limit, what);
        return 0;
    }
    return 1;
}

static hn_status_t cannot_read(hn_strbuf *err, int e)
{
    if (err != NULL)
        hn_sb_printf(err, "cannot read: %s", strerror(e));
    return HN_ERR_IO;
}

hn_status_t hn_file_open(const char *path, const char *what, uint64_t max_bytes, FILE **out, uint64_t *size,
                         hn_strbuf *err)
{
    struct stat st;
    int fd, flags;
    FILE *f;
    /* what the name is, before opening it: opening a device can do things */
    if (stat(path, &st) != 0)
        return cannot_read(err, errno);
    if (!file_fits(&st, what, max_bytes, err))
        return HN_ERR_IO;
    /* then what was opened: the name may point elsewhere by now */
    if ((fd = open(path, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC)) < 0)
        return cannot_read(err, errno);
    if (fstat(fd, &st) != 0 || (flags = fcntl(fd, F_GETFL)) < 0 || fcntl(fd, F_SETFL, flags & ~O_NONBLOCK) < 0) {
        int e = errno;
        close(fd);
        return cannot_read(err, e);
    }
    if (!file_fits(&st, what, max_bytes, err)) {
        close(fd);
        return HN_ERR_IO;
    }
    if ((f = fdopen(fd, "rb")) == NULL) {
        int e = errno;
        close(fd);
        return cannot_read(err, e);
    }
    *out = f;
    *size = (uint64_t)st.st_size;
    return HN_OK;
}

hn_status_t hn_file_read(const char *path, const char *what, uint64_t max_bytes, char **data, size_t *len,
                         hn_strbuf *err)
{
    FILE *f;
    uint64_t size;
    size_t got;
    char *buf;
    hn_status_t st = hn_file_open(path, what, max_bytes, &f, &size, err);
    if (st != HN_OK)
        return st;
    if (size >= SIZE_MAX || (buf = hn_malloc((size_t)size + 1)) == NULL) {
        fclose(f);
        if (err != NULL)
            hn_sb_printf(err, "out of memory for its %llu bytes", (unsigned long long)size);
        return HN_ERR_NOMEM;
    }
    /* what the file held when it was opened; one that shrank since is read as it is now */
    got = fread(buf, 1, (size_t)size, f);
    if (ferror(f)) {
        int e = errno;
        fclose(f);
        hn_free(buf);
        return cannot_read(err, e);
    }
    fclose(f);
    buf[got] = '\0';
    *data = buf;
    if (len != NULL)
        *len = got;
    return HN_OK;
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
    case HN_ERR_PEER_LOST: return "a process of the world died";
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
