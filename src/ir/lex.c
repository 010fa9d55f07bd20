/* Lexer for the hirnode text format. Any byte sequence yields tokens or a
 * clean error token; nothing here allocates. */
#include "lex.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static const char *punct_text[HN_P_COUNT] = {
    "<-", "..", "==", "!=", "<=", ">=", "&&", "||", "(", ")", "[", "]", "{",
    "}",  ",",  ":",  ";",  "=",  "+",  "-",  "*",  "/", "%", "<", ">", "!"};

const char *hn_punct_text(hn_punct p) { return punct_text[p]; }

void hn_lex_init(hn_lexer *lx, const char *src, size_t len)
{
    memset(lx, 0, sizeof(*lx));
    lx->src = src;
    lx->len = len;
    lx->line = 1;
    lx->col = 1;
}

static int at(const hn_lexer *lx, size_t off)
{
    return lx->pos + off < lx->len ? (unsigned char)lx->src[lx->pos + off] : -1;
}

static void advance(hn_lexer *lx, size_t n)
{
    while (n-- > 0 && lx->pos < lx->len) {
        if (lx->src[lx->pos] == '\n') {
            lx->line++;
            lx->col = 1;
        } else {
            lx->col++;
        }
        lx->pos++;
    }
}

static int is_ident_start(int c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
static int is_digit(int c) { return c >= '0' && c <= '9'; }

hn_token hn_lex_next(hn_lexer *lx)
{
    hn_token t;
    int c;
    memset(&t, 0, sizeof(t));
    for (;;) {
        c = at(lx, 0);
        if (c == ' ' || c == '\t' || c == '\r') {
            advance(lx, 1);
        } else if (c == '#') {
            while (at(lx, 0) != -1 && at(lx, 0) != '\n')
                advance(lx, 1);
        } else if (c == '\n' && lx->depth > 0) {
            advance(lx, 1);
        } else {
            break;
        }
    }
    t.line = lx->line;
    t.col = lx->col;
    t.s = lx->src + lx->pos;
    if (c == -1) {
        t.kind = HN_T_EOF;
        return t;
    }
    if (c == '\n') {
        t.kind = HN_T_NL;
        t.len = 1;
        advance(lx, 1);
        return t;
    }
    if (is_ident_start(c)) {
        size_t n = 0;
        while (is_ident_start(at(lx, n)) || is_digit(at(lx, n)))
            n++;
        t.kind = HN_T_IDENT;
        t.len = (int)n;
        advance(lx, n);
        return t;
    }
    if (is_digit(c)) {
        size_t n = 0;
        int is_float = 0;
        char buf[64];
        while (is_digit(at(lx, n)))
            n++;
        /* `1..4` is INT DOTDOT INT; `1.5` is a float */
        if (at(lx, n) == '.' && is_digit(at(lx, n + 1))) {
            is_float = 1;
            n++;
            while (is_digit(at(lx, n)))
                n++;
        }
        if (at(lx, n) == 'e' || at(lx, n) == 'E') {
            size_t m = n + 1;
            if (at(lx, m) == '+' || at(lx, m) == '-')
                m++;
            if (is_digit(at(lx, m))) {
                is_float = 1;
                n = m;
                while (is_digit(at(lx, n)))
                    n++;
            }
        }
        t.len = (int)n;
        if (is_ident_start(at(lx, n))) {
            while (is_ident_start(at(lx, n)) || is_digit(at(lx, n)))
                n++;
            t.kind = HN_T_ERROR;
            t.error = "malformed number";
            t.len = (int)n;
            advance(lx, n);
            return t;
        }
        if (n >= sizeof(buf)) {
            t.kind = HN_T_ERROR;
            t.error = "number literal too long";
            advance(lx, n);
            return t;
        }
        memcpy(buf, t.s, n);
        buf[n] = '\0';
        errno = 0;
        if (is_float) {
            t.kind = HN_T_FLOAT;
            t.fval = strtod(buf, NULL);
        } else {
            t.kind = HN_T_INT;
            t.ival = (int64_t)strtoll(buf, NULL, 10);
        }
        if (errno == ERANGE) {
            t.kind = HN_T_ERROR;
            t.error = "number literal out of range";
        }
        advance(lx, n);
        return t;
    }
    for (int p = 0; p < HN_P_COUNT; p++) {
        size_t n = strlen(punct_text[p]);
        if (lx->pos + n <= lx->len && memcmp(lx->src + lx->pos, punct_text[p], n) == 0) {
            t.kind = HN_T_PUNCT;
            t.punct = (hn_punct)p;
            t.len = (int)n;
            if (p == HN_P_LPAREN || p == HN_P_LBRACK)
                lx->depth++;
            if ((p == HN_P_RPAREN || p == HN_P_RBRACK) && lx->depth > 0)
                lx->depth--;
            advance(lx, n);
            return t;
        }
    }
    t.kind = HN_T_ERROR;
    t.len = 1;
    t.error = "unexpected character";
    advance(lx, 1);
    return t;
}
