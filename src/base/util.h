/* Internal utilities: logging, checked allocation with failure injection, strings. */
#ifndef HN_UTIL_H
#define HN_UTIL_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "hirnode/hirnode.h"

typedef enum hn_log_level {
    HN_LOG_OFF = -1, /* nothing is logged */
    HN_LOG_ERROR = 0,
    HN_LOG_WARN,
    HN_LOG_INFO,
    HN_LOG_DEBUG,
    HN_LOG_TRACE,
} hn_log_level_t;

/* Level from HIRNODE_LOG (error|warn|info|debug|trace), read once.
 * A line reads "hirnode error: MESSAGE"; at debug and trace it also names
 * the runtime's source ("hirnode error trace.c:696: MESSAGE"). */
hn_log_level_t hn_log_level(void);
void hn_log_set_level(hn_log_level_t level);
void hn_log_emit(hn_log_level_t level, const char *file, int line,
                 const char *fmt, ...) __attribute__((format(printf, 4, 5)));

#define HN_LOG(level, ...)                                                   \
    do {                                                                     \
        if ((level) <= hn_log_level())                                       \
            hn_log_emit((level), __FILE__, __LINE__, __VA_ARGS__);           \
    } while (0)
#define HN_ERROR(...) HN_LOG(HN_LOG_ERROR, __VA_ARGS__)
#define HN_WARN(...) HN_LOG(HN_LOG_WARN, __VA_ARGS__)
#define HN_INFO(...) HN_LOG(HN_LOG_INFO, __VA_ARGS__)
#define HN_DEBUG(...) HN_LOG(HN_LOG_DEBUG, __VA_ARGS__)
#define HN_TRACE(...) HN_LOG(HN_LOG_TRACE, __VA_ARGS__)

/* All internal allocations go through these, so tests can make the Nth fail. */
void *hn_malloc(size_t size);
void *hn_calloc(size_t n, size_t size);
void *hn_realloc(void *ptr, size_t size);
char *hn_strdup(const char *s);
char *hn_strndup(const char *s, size_t n);
void hn_free(void *ptr);

/* Make the allocation numbered `n` from now (1 = next) and every later one
 * fail; 0 turns injection off. Returns how many allocations were counted
 * since the last call (to size sweeps). Not thread-safe: tests only. */
long hn_alloc_fail_after(long n);

/* Bytes held through these functions (malloc's usable sizes), now and at
 * the most since the last hn_alloc_peak_reset (which returns the bytes
 * held then): to test that a program costs memory in proportion to its
 * size. Any thread. */
int64_t hn_alloc_live(void);
int64_t hn_alloc_peak(void);
int64_t hn_alloc_peak_reset(void);

/* Growable string. */
typedef struct hn_strbuf {
    char *data;
    size_t len;
    size_t cap;
    int failed; /* an append ran out of memory; data stays valid */
} hn_strbuf;

void hn_sb_init(hn_strbuf *sb);
void hn_sb_free(hn_strbuf *sb);
void hn_sb_append(hn_strbuf *sb, const char *s);
void hn_sb_appendn(hn_strbuf *sb, const char *s, size_t n);
void hn_sb_printf(hn_strbuf *sb, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
void hn_sb_vprintf(hn_strbuf *sb, const char *fmt, va_list ap);
/* Hands the buffer to the caller (NULL if an append failed). */
char *hn_sb_take(hn_strbuf *sb);

/* ---- values a person writes: command-line options and HIRNODE_* settings ----
 * Each parses all of `s` (no blanks around it, nothing after it) into a
 * value from lo to hi. On failure it returns HN_ERR_INVALID, leaves *out
 * alone and, when err is not NULL, appends one line without a newline:
 *   "WHAT: expected an integer from 1 to 1000000, not '5x'"
 * Integers are decimal or 0x hexadecimal; numbers are decimal, finite;
 * sizes are bytes, a whole number with an optional K, M, G or T suffix
 * (powers of 1024; "8K", "8KB", "8KiB" alike). */
hn_status_t hn_parse_int64(const char *what, const char *s, int64_t lo, int64_t hi, int64_t *out, hn_strbuf *err);
hn_status_t hn_parse_double(const char *what, const char *s, double lo, double hi, double *out, hn_strbuf *err);
hn_status_t hn_parse_size(const char *what, const char *s, uint64_t lo, uint64_t hi, uint64_t *out, hn_strbuf *err);
/* One of the words[0..n) exactly (case counts): its index into *index;
 * else "WHAT: expected auto, cuda or host, not 'gpu'". */
hn_status_t hn_parse_word(const char *what, const char *s, const char *const *words, int n, int *index,
                          hn_strbuf *err);
/* A byte count as people read it: "64 MiB", "8 KiB", "1000 bytes" (exact:
 * a suffix only where it divides). */
void hn_size_text(uint64_t bytes, char *buf, size_t n);

/* The word of words[0..n) (NULL entries skipped) nearest to word[0..len)
 * by edit distance (insertions, deletions, substitutions and swaps of
 * neighbours; case ignored) when it is near enough to be a slip of the
 * fingers: one edit for words of up to 4 letters, two beyond; else NULL.
 * For "did you mean" in errors. */
const char *hn_nearest_word(const char *word, size_t len, const char *const *words, int n);

/* ---- files a person names: programs, .npy data, traces ----
 * Opens `path` for reading only if it is a regular file (no directory,
 * FIFO, device or socket; opened without blocking, so a FIFO cannot hang
 * the caller) of at most max_bytes bytes; `what` names the kind of file in
 * the message ("a program file"). On success the open stream (the caller
 * closes it) and the file's size. On failure HN_ERR_IO and one line in err
 * without the path and without a newline ("not a regular file (a
 * directory)", "cannot read: No such file or directory", "70000000 bytes,
 * more than the 64 MiB a program file may have"); callers put the path in
 * front. */
hn_status_t hn_file_open(const char *path, const char *what, uint64_t max_bytes, FILE **out, uint64_t *size,
                         hn_strbuf *err);
/* The whole file as hn_file_open checks it, NUL-terminated (the caller
 * hn_frees *data), its length into *len. HN_ERR_NOMEM when the buffer
 * cannot be had (err says so too). */
hn_status_t hn_file_read(const char *path, const char *what, uint64_t max_bytes, char **data, size_t *len,
                         hn_strbuf *err);

/* Grows *arr (element size `elem`) so that index `need` fits. */
int hn_grow(void **arr, int *cap, int need, size_t elem);

/* The median of v[0..n-1] (sorts v). */
double hn_median(double *v, int n);

/* Monotonic clock in seconds. */
double hn_now(void);

/* splitmix64: the one seeded generator used everywhere (portable results). */
static inline uint64_t hn_splitmix64(uint64_t *state)
{
    uint64_t z = (*state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* Checked int64 arithmetic: 1 when the exact result does not fit (then
 * *out is unspecified), 0 otherwise. Everything that becomes a size, a
 * stride, an offset or a count goes through these. */
static inline int hn_add_overflows(int64_t a, int64_t b, int64_t *out) { return __builtin_add_overflow(a, b, out); }
static inline int hn_sub_overflows(int64_t a, int64_t b, int64_t *out) { return __builtin_sub_overflow(a, b, out); }
static inline int hn_mul_overflows(int64_t a, int64_t b, int64_t *out) { return __builtin_mul_overflow(a, b, out); }

#define HN_ARRAY_LEN(a) ((int)(sizeof(a) / sizeof((a)[0])))
#define HN_MIN(a, b) ((a) < (b) ? (a) : (b))
#define HN_MAX(a, b) ((a) > (b) ? (a) : (b))

#endif
