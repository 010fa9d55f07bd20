/* A strict JSON reader (RFC 8259: no trailing commas, no comments, valid
 * UTF-8, paired surrogates, no duplicate keys) into a small tree, and the
 * string escaping of the writers (traces). */
#ifndef HN_JSON_H
#define HN_JSON_H

#include <stddef.h>

#include "util.h"

#define HN_JSON_MAX_DEPTH 64

typedef enum hn_json_type {
    HN_JSON_NULL,
    HN_JSON_FALSE,
    HN_JSON_TRUE,
    HN_JSON_NUMBER,
    HN_JSON_STRING,
    HN_JSON_ARRAY,
    HN_JSON_OBJECT,
} hn_json_type;

typedef struct hn_json hn_json;
struct hn_json {
    hn_json_type type;
    double num;     /* numbers */
    char *str;      /* strings: UTF-8, NUL-terminated (a \u0000 ends it early) */
    size_t len;     /* strings: bytes, without the terminator */
    int n;          /* arrays and objects: how many values */
    hn_json *items; /* [n] values */
    char **keys;    /* objects: [n] keys, in the order read */
};

/* Parses len bytes (a whole document: one value, whitespace around it).
 * On success *out owns the tree (hn_json_free). On failure, if err is not
 * NULL, "line:col: message" is appended to it; HN_ERR_PARSE, or
 * HN_ERR_NOMEM. */
hn_status_t hn_json_parse(const char *text, size_t len, hn_json **out, hn_strbuf *err);
void hn_json_free(hn_json *j);

/* The value of `key` in object o; NULL if o is no object or has no key. */
const hn_json *hn_json_get(const hn_json *o, const char *key);
/* The number at `key` if there is one, else `def`. */
double hn_json_num(const hn_json *o, const char *key, double def);
/* The string at `key` if there is one, else `def`. */
const char *hn_json_str(const hn_json *o, const char *key, const char *def);

/* Appends s as a JSON string, quotes included; bytes that are not valid
 * UTF-8 become U+FFFD, so the output always parses. */
void hn_json_put_string(hn_strbuf *sb, const char *s);

#endif
