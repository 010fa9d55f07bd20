/* Lexer for the hirnode text format: tokens with line and column. */
#ifndef HN_LEX_H
#define HN_LEX_H

#include <stddef.h>
#include <stdint.h>

typedef enum hn_tok_kind {
    HN_T_EOF,
    HN_T_NL,
    HN_T_IDENT,
    HN_T_INT,
    HN_T_FLOAT,
    HN_T_PUNCT,
    HN_T_ERROR,
} hn_tok_kind;

/* Punctuation, longest first where prefixes overlap. */
typedef enum hn_punct {
    HN_P_ARROW,  /* <- */
    HN_P_DOTDOT, /* .. */
    HN_P_EQ,     /* == */
    HN_P_NE,     /* != */
    HN_P_LE,     /* <= */
    HN_P_GE,     /* >= */
    HN_P_AND,    /* && */
    HN_P_OR,     /* || */
    HN_P_LPAREN,
    HN_P_RPAREN,
    HN_P_LBRACK,
    HN_P_RBRACK,
    HN_P_LBRACE,
    HN_P_RBRACE,
    HN_P_COMMA,
    HN_P_COLON,
    HN_P_SEMI,
    HN_P_ASSIGN,
    HN_P_PLUS,
    HN_P_MINUS,
    HN_P_STAR,
    HN_P_SLASH,
    HN_P_PERCENT,
    HN_P_LT,
    HN_P_GT,
    HN_P_NOT,
    HN_P_COUNT
} hn_punct;

typedef struct hn_token {
    hn_tok_kind kind;
    const char *s; /* into the source text */
    int len;
    int line, col;
    int64_t ival;
    double fval;
    hn_punct punct;
    const char *error; /* HN_T_ERROR: what is wrong */
} hn_token;

typedef struct hn_lexer {
    const char *src;
    size_t len, pos;
    int line, col;
    int depth; /* ( and [ nesting: newlines inside are not tokens */
} hn_lexer;

void hn_lex_init(hn_lexer *lx, const char *src, size_t len);
hn_token hn_lex_next(hn_lexer *lx);
const char *hn_punct_text(hn_punct p);

#endif
