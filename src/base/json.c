/* The strict JSON reader and the string escaping of the JSON writers. */
#include "json.h"

#include <stdlib.h>
#include <string.h>

typedef struct reader {
    const char *s;
    size_t n, i;
    int depth;
    hn_strbuf *err;
    hn_status_t st;
} reader;

static hn_status_t fail_at(reader *r, hn_status_t st, const char *msg)
{
    if (r->st == HN_OK) {
        int line = 1, col = 1;
        for (size_t k = 0; k < r->i && k < r->n; k++) {
            if (r->s[k] == '\n') {
                line++;
                col = 1;
            } else {
                col++;
            }
        }
        r->st = st;
        if (r->err != NULL)
            hn_sb_printf(r->err, "%d:%d: %s", line, col, msg);
    }
    return st;
}

static void skip_ws(reader *r)
{
    while (r->i < r->n && (r->s[r->i] == ' ' || r->s[r->i] == '\t' || r->s[r->i] == '\n' || r->s[r->i] == '\r'))
        r->i++;
}

static int peek(const reader *r) { return r->i < r->n ? (unsigned char)r->s[r->i] : -1; }

/* Length of the valid UTF-8 sequence at s[0..n) (1-4), 0 if invalid:
 * no overlong forms, no surrogates, nothing above U+10FFFF. */
static int utf8_len(const unsigned char *s, size_t n)
{
    unsigned c = s[0], need, min;
    uint32_t cp;
    if (c < 0x80)
        return 1;
    if (c >= 0xC2 && c <= 0xDF) {
        need = 1;
        min = 0x80;
        cp = c & 0x1F;
    } else if (c >= 0xE0 && c <= 0xEF) {
        need = 2;
        min = 0x800;
        cp = c & 0x0F;
    } else if (c >= 0xF0 && c <= 0xF4) {
        need = 3;
        min = 0x10000;
        cp = c & 0x07;
    } else {
        return 0;
    }
    if (n < need + 1)
        return 0;
    for (unsigned k = 1; k <= need; k++) {
        if ((s[k] & 0xC0) != 0x80)
            return 0;
        cp = (cp << 6) | (s[k] & 0x3F);
    }
    if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
        return 0;
    return (int)need + 1;
}

static void put_utf8(hn_strbuf *sb, uint32_t cp)
{
    char b[4];
    size_t n;
    if (cp < 0x80) {
        b[0] = (char)cp;
        n = 1;
    } else if (cp < 0x800) {
        b[0] = (char)(0xC0 | (cp >> 6));
        b[1] = (char)(0x80 | (cp & 0x3F));
        n = 2;
    } else if (cp < 0x10000) {
        b[0] = (char)(0xE0 | (cp >> 12));
        b[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        b[2] = (char)(0x80 | (cp & 0x3F));
        n = 3;
    } else {
        b[0] = (char)(0xF0 | (cp >> 18));
        b[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
        b[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
        b[3] = (char)(0x80 | (cp & 0x3F));
        n = 4;
    }
    hn_sb_appendn(sb, b, n);
}

static int hex4(reader *r, uint32_t *out)
{
    uint32_t v = 0;
    if (r->i + 4 > r->n)
        return 0;
    for (int k = 0; k < 4; k++) {
        int c = r->s[r->i + (size_t)k];
        v <<= 4;
        if (c >= '0' && c <= '9')
            v |= (uint32_t)(c - '0');
        else if (c >= 'a' && c <= 'f')
            v |= (uint32_t)(c - 'a' + 10);
        else if (c >= 'A' && c <= 'F')
            v |= (uint32_t)(c - 'A' + 10);
        else
            return 0;
    }
    r->i += 4;
    *out = v;
    return 1;
}

/* string = '"' { char | escape } '"' ; the opening quote is at r->i */
static hn_status_t read_string(reader *r, char **out, size_t *len)
{
    hn_strbuf sb;
    hn_sb_init(&sb);
    r->i++;
    for (;;) {
        int c = peek(r);
        if (c < 0) {
            hn_sb_free(&sb);
            return fail_at(r, HN_ERR_PARSE, "unterminated string");
        }
        if (c == '"') {
            r->i++;
            break;
        }
        if (c < 0x20) {
            hn_sb_free(&sb);
            return fail_at(r, HN_ERR_PARSE, "control character in a string");
        }
        if (c == '\\') {
            uint32_t cp;
            r->i++;
            c = peek(r);
            r->i++;
            switch (c) {
            case '"': hn_sb_append(&sb, "\""); break;
            case '\\': hn_sb_append(&sb, "\\"); break;
            case '/': hn_sb_append(&sb, "/"); break;
            case 'b': hn_sb_append(&sb, "\b"); break;
            case 'f': hn_sb_append(&sb, "\f"); break;
            case 'n': hn_sb_append(&sb, "\n"); break;
            case 'r': hn_sb_append(&sb, "\r"); break;
            case 't': hn_sb_append(&sb, "\t"); break;
            case 'u':
                if (!hex4(r, &cp)) {
                    hn_sb_free(&sb);
                    return fail_at(r, HN_ERR_PARSE, "bad \\u escape");
                }
                if (cp >= 0xDC00 && cp <= 0xDFFF) {
                    hn_sb_free(&sb);
                    return fail_at(r, HN_ERR_PARSE, "lone low surrogate");
                }
                if (cp >= 0xD800 && cp <= 0xDBFF) {
                    uint32_t lo;
                    if (r->i + 2 > r->n || r->s[r->i] != '\\' || r->s[r->i + 1] != 'u') {
                        hn_sb_free(&sb);
                        return fail_at(r, HN_ERR_PARSE, "high surrogate without its low half");
                    }
                    r->i += 2;
                    if (!hex4(r, &lo) || lo < 0xDC00 || lo > 0xDFFF) {
                        hn_sb_free(&sb);
                        return fail_at(r, HN_ERR_PARSE, "high surrogate without its low half");
                    }
                    cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
                }
                put_utf8(&sb, cp);
                break;
            default:
                r->i--;
                hn_sb_free(&sb);
                return fail_at(r, HN_ERR_PARSE, "unknown escape");
            }
            continue;
        }
        {
            int k = utf8_len((const unsigned char *)r->s + r->i, r->n - r->i);
            if (k == 0) {
                hn_sb_free(&sb);
                return fail_at(r, HN_ERR_PARSE, "invalid UTF-8 in a string");
            }
            hn_sb_appendn(&sb, r->s + r->i, (size_t)k);
            r->i += (size_t)k;
        }
    }
    if (sb.failed) {
        hn_sb_free(&sb);
        return fail_at(r, HN_ERR_NOMEM, "out of memory");
    }
    *len = sb.len;
    *out = hn_sb_take(&sb);
    if (*out == NULL)
        return fail_at(r, HN_ERR_NOMEM, "out of memory");
    return HN_OK;
}

static int is_digit(int c) { return c >= '0' && c <= '9'; }

/* number = [ '-' ] ( '0' | digit1-9 { digit } ) [ '.' digit { digit } ]
 *          [ ( 'e' | 'E' ) [ '+' | '-' ] digit { digit } ] */
static hn_status_t read_number(reader *r, double *out)
{
    size_t start = r->i;
    char buf[64], *end;
    if (peek(r) == '-')
        r->i++;
    if (peek(r) == '0') {
        r->i++;
    } else if (is_digit(peek(r))) {
        while (is_digit(peek(r)))
            r->i++;
    } else {
        return fail_at(r, HN_ERR_PARSE, "bad number");
    }
    if (peek(r) == '.') {
        r->i++;
        if (!is_digit(peek(r)))
            return fail_at(r, HN_ERR_PARSE, "bad number: a digit must follow '.'");
        while (is_digit(peek(r)))
            r->i++;
    }
    if (peek(r) == 'e' || peek(r) == 'E') {
        r->i++;
        if (peek(r) == '+' || peek(r) == '-')
            r->i++;
        if (!is_digit(peek(r)))
            return fail_at(r, HN_ERR_PARSE, "bad number: a digit must follow the exponent");
        while (is_digit(peek(r)))
            r->i++;
    }
    if (r->i - start >= sizeof(buf))
        return fail_at(r, HN_ERR_PARSE, "number too long");
    memcpy(buf, r->s + start, r->i - start);
    buf[r->i - start] = '\0';
    *out = strtod(buf, &end);
    return HN_OK;
}

static hn_status_t read_value(reader *r, hn_json *v);

static hn_status_t push(reader *r, hn_json *v, int *cap, char *key)
{
    int old = *cap;
    if (hn_grow((void **)&v->items, cap, v->n, sizeof(*v->items)) != 0) {
        hn_free(key);
        return fail_at(r, HN_ERR_NOMEM, "out of memory");
    }
    if (v->type == HN_JSON_OBJECT) {
        if (*cap != old) {
            char **keys = hn_realloc(v->keys, (size_t)*cap * sizeof(*keys));
            if (keys == NULL) {
                *cap = old; /* the keys still have room for old only */
                hn_free(key);
                return fail_at(r, HN_ERR_NOMEM, "out of memory");
            }
            v->keys = keys;
        }
        v->keys[v->n] = key;
    }
    memset(&v->items[v->n], 0, sizeof(v->items[0]));
    v->n++;
    return HN_OK;
}

/* array = '[' [ value { ',' value } ] ']'
 * object = '{' [ string ':' value { ',' string ':' value } ] '}' */
static hn_status_t read_container(reader *r, hn_json *v, int object)
{
    int cap = 0;
    v->type = object ? HN_JSON_OBJECT : HN_JSON_ARRAY;
    if (++r->depth > HN_JSON_MAX_DEPTH)
        return fail_at(r, HN_ERR_PARSE, "nested too deeply");
    r->i++;
    skip_ws(r);
    if (peek(r) == (object ? '}' : ']')) {
        r->i++;
        r->depth--;
        return HN_OK;
    }
    for (;;) {
        char *key = NULL;
        skip_ws(r);
        if (object) {
            size_t klen;
            if (peek(r) != '"')
                return fail_at(r, HN_ERR_PARSE, "expected a string key");
            if (read_string(r, &key, &klen) != HN_OK)
                return r->st;
            for (int k = 0; k < v->n; k++)
                if (strcmp(v->keys[k], key) == 0) {
                    hn_free(key);
                    return fail_at(r, HN_ERR_PARSE, "duplicate key");
                }
            skip_ws(r);
            if (peek(r) != ':') {
                hn_free(key);
                return fail_at(r, HN_ERR_PARSE, "expected ':'");
            }
            r->i++;
        }
        if (push(r, v, &cap, key) != HN_OK || read_value(r, &v->items[v->n - 1]) != HN_OK)
            return r->st;
        skip_ws(r);
        if (peek(r) == ',') {
            r->i++;
            continue;
        }
        if (peek(r) == (object ? '}' : ']')) {
            r->i++;
            r->depth--;
            return HN_OK;
        }
        return fail_at(r, HN_ERR_PARSE, object ? "expected ',' or '}'" : "expected ',' or ']'");
    }
}

static int literal(reader *r, const char *word)
{
    size_t n = strlen(word);
    if (r->n - r->i < n || memcmp(r->s + r->i, word, n) != 0)
        return 0;
    r->i += n;
    return 1;
}

/* value = object | array | string | number | 'true' | 'false' | 'null' */
static hn_status_t read_value(reader *r, hn_json *v)
{
    int c;
    skip_ws(r);
    c = peek(r);
    switch (c) {
    case '{': return read_container(r, v, 1);
    case '[': return read_container(r, v, 0);
    case '"':
        v->type = HN_JSON_STRING;
        return read_string(r, &v->str, &v->len);
    case 't':
        v->type = HN_JSON_TRUE;
        return literal(r, "true") ? HN_OK : fail_at(r, HN_ERR_PARSE, "bad literal");
    case 'f':
        v->type = HN_JSON_FALSE;
        return literal(r, "false") ? HN_OK : fail_at(r, HN_ERR_PARSE, "bad literal");
    case 'n':
        v->type = HN_JSON_NULL;
        return literal(r, "null") ? HN_OK : fail_at(r, HN_ERR_PARSE, "bad literal");
    default:
        if (c == '-' || is_digit(c)) {
            v->type = HN_JSON_NUMBER;
            return read_number(r, &v->num);
        }
        return fail_at(r, HN_ERR_PARSE, c < 0 ? "unexpected end of input" : "unexpected character");
    }
}

static void free_value(hn_json *v)
{
    for (int k = 0; k < v->n; k++) {
        free_value(&v->items[k]);
        if (v->keys != NULL)
            hn_free(v->keys[k]);
    }
    hn_free(v->items);
    hn_free(v->keys);
    hn_free(v->str);
}

hn_status_t hn_json_parse(const char *text, size_t len, hn_json **out, hn_strbuf *err)
{
    reader r = {text, len, 0, 0, err, HN_OK};
    hn_json *root = hn_calloc(1, sizeof(*root));
    if (root == NULL)
        return HN_ERR_NOMEM;
    if (read_value(&r, root) == HN_OK) {
        skip_ws(&r);
        if (r.i != r.n)
            fail_at(&r, HN_ERR_PARSE, "text after the value");
    }
    if (r.st != HN_OK) {
        hn_json_free(root);
        return r.st;
    }
    *out = root;
    return HN_OK;
}

void hn_json_free(hn_json *j)
{
    if (j == NULL)
        return;
    free_value(j);
    hn_free(j);
}

const hn_json *hn_json_get(const hn_json *o, const char *key)
{
    if (o == NULL || o->type != HN_JSON_OBJECT)
        return NULL;
    for (int k = 0; k < o->n; k++)
        if (strcmp(o->keys[k], key) == 0)
            return &o->items[k];
    return NULL;
}

double hn_json_num(const hn_json *o, const char *key, double def)
{
    const hn_json *v = hn_json_get(o, key);
    return v != NULL && v->type == HN_JSON_NUMBER ? v->num : def;
}

const char *hn_json_str(const hn_json *o, const char *key, const char *def)
{
    const hn_json *v = hn_json_get(o, key);
    return v != NULL && v->type == HN_JSON_STRING ? v->str : def;
}

void hn_json_put_string(hn_strbuf *sb, const char *s)
{
    const unsigned char *p = (const unsigned char *)s;
    size_t n = strlen(s);
    hn_sb_append(sb, "\"");
    while (n > 0) {
        int k;
        if (*p == '"' || *p == '\\') {
            hn_sb_appendn(sb, "\\", 1);
            hn_sb_appendn(sb, (const char *)p, 1);
            k = 1;
        } else if (*p < 0x20) {
            hn_sb_printf(sb, "\\u%04x", *p);
            k = 1;
        } else if ((k = utf8_len(p, n)) == 0) {
            hn_sb_append(sb, "\\ufffd");
            k = 1;
        } else {
            hn_sb_appendn(sb, (const char *)p, (size_t)k);
        }
        p += k;
        n -= (size_t)k;
    }
    hn_sb_append(sb, "\"");
}
