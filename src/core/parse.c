/* Parser: text -> hn_program. Stops at the first error, reported as
 * `file:line:col: error: message`; frees everything it built on failure.
 * The grammar rule is written above each function (docs/SYNTAX.md has all). */
#include <stdio.h>
#include <string.h>

#include "ir.h"
#include "lex.h"
#include "parse.h"

#define MAX_DEPTH 200 /* nesting of expressions and blocks */

typedef struct parser {
    hn_lexer lx;
    hn_token tok; /* current token */
    hn_program *prog;
    const char *file;
    hn_strbuf *diag;
    int failed;
    int nomem;
    int depth;
    int in_group;
} parser;

static const char *reserved[] = {
    "rank", "world", "nstreams", "min",   "max",    "in",     "step",  "else",
    "op",   "root",  "team",     "via",   "to",     "from",   "as",    "range",
    "param", "input", "output",  "reference", "replicated", "shard", "axis",
    "f32",  "bf16",  "f16",      "i32",   "i64",
};

static int is_reserved(const char *s, int len)
{
    for (int i = 0; i < HN_ARRAY_LEN(reserved); i++)
        if ((int)strlen(reserved[i]) == len && strncmp(reserved[i], s, (size_t)len) == 0)
            return 1;
    return hn_op_lookup(s, len) >= 0;
}

static void describe(const hn_token *t, char *buf, size_t n)
{
    switch (t->kind) {
    case HN_T_EOF: snprintf(buf, n, "end of file"); break;
    case HN_T_NL: snprintf(buf, n, "end of line"); break;
    default: {
        /* show the token, printable bytes only, at most 32 */
        size_t k = 0;
        int len = t->len > 32 ? 32 : t->len;
        buf[k++] = '\'';
        for (int i = 0; i < len && k + 6 < n; i++) {
            unsigned char c = (unsigned char)t->s[i];
            if (c >= 32 && c < 127 && c != '\'')
                buf[k++] = (char)c;
            else
                k += (size_t)snprintf(buf + k, n - k, "\\x%02x", c);
        }
        buf[k++] = '\'';
        buf[k] = '\0';
    }
    }
}

static void error_at(parser *ps, const hn_token *t, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void error_at(parser *ps, const hn_token *t, const char *fmt, ...)
{
    va_list ap;
    if (ps->failed)
        return;
    ps->failed = 1;
    hn_sb_printf(ps->diag, "%s:%d:%d: error: ", ps->file, t->line, t->col);
    va_start(ap, fmt);
    hn_sb_vprintf(ps->diag, fmt, ap);
    va_end(ap);
    hn_sb_append(ps->diag, "\n");
}

static void oom(parser *ps)
{
    if (!ps->failed) {
        ps->nomem = 1;
        error_at(ps, &ps->tok, "out of memory");
    }
}

static void next(parser *ps)
{
    if (ps->failed) {
        ps->tok.kind = HN_T_EOF;
        return;
    }
    ps->tok = hn_lex_next(&ps->lx);
    if (ps->tok.kind == HN_T_ERROR) {
        char what[160];
        describe(&ps->tok, what, sizeof(what));
        error_at(ps, &ps->tok, "%s: %s", ps->tok.error, what);
        ps->tok.kind = HN_T_EOF;
    }
}

/* The token after the current one, without consuming anything. */
static hn_token peek2(parser *ps)
{
    hn_lexer save = ps->lx;
    hn_token t = hn_lex_next(&ps->lx);
    ps->lx = save;
    return t;
}

static int is_punct(const parser *ps, hn_punct p)
{
    return ps->tok.kind == HN_T_PUNCT && ps->tok.punct == p;
}

static int is_word(const parser *ps, const char *w)
{
    return ps->tok.kind == HN_T_IDENT && (int)strlen(w) == ps->tok.len &&
           strncmp(ps->tok.s, w, (size_t)ps->tok.len) == 0;
}

static void expected(parser *ps, const char *what)
{
    char found[160];
    describe(&ps->tok, found, sizeof(found));
    error_at(ps, &ps->tok, "expected %s but found %s", what, found);
}

static int accept_punct(parser *ps, hn_punct p)
{
    if (!is_punct(ps, p))
        return 0;
    next(ps);
    return 1;
}

static int expect_punct(parser *ps, hn_punct p)
{
    char what[16];
    if (accept_punct(ps, p))
        return 1;
    snprintf(what, sizeof(what), "'%s'", hn_punct_text(p));
    expected(ps, what);
    return 0;
}

static int expect_word(parser *ps, const char *w)
{
    char what[64];
    if (is_word(ps, w)) {
        next(ps);
        return 1;
    }
    snprintf(what, sizeof(what), "'%s'", w);
    expected(ps, what);
    return 0;
}

/* A variable name being defined or referenced; -1 on error. */
static int name(parser *ps, const char *what)
{
    int var;
    if (ps->tok.kind != HN_T_IDENT || is_reserved(ps->tok.s, ps->tok.len)) {
        expected(ps, what);
        return -1;
    }
    var = hn_prog_var(ps->prog, ps->tok.s, ps->tok.len);
    if (var < 0) {
        oom(ps);
        return -1;
    }
    next(ps);
    return var;
}

/* ---- expressions ---- */

static hn_expr *expr_prec(parser *ps, int minprec);

static hn_expr *located(hn_expr *e, int line, int col)
{
    if (e != NULL && e->line == 0) {
        e->line = line;
        e->col = col;
    }
    return e;
}

/* primary := INT | IDENT | 'rank' | 'world' | 'nstreams'
 *          | ('min'|'max') '(' expr ',' expr ')' | '(' expr ')'
 *          | ('-'|'!') primary */
static hn_expr *primary(parser *ps)
{
    hn_token t = ps->tok;
    hn_expr *e = NULL;
    if (ps->failed)
        return NULL;
    if (++ps->depth > MAX_DEPTH) {
        error_at(ps, &t, "expression nested too deeply");
        return NULL;
    }
    if (accept_punct(ps, HN_P_MINUS) || accept_punct(ps, HN_P_NOT)) {
        hn_expr *a = primary(ps);
        if (a != NULL) {
            e = hn_ex_unary(t.punct == HN_P_MINUS ? HN_EX_NEG : HN_EX_NOT, a);
            if (e == NULL)
                oom(ps);
        }
    } else if (t.kind == HN_T_INT) {
        next(ps);
        if ((e = hn_ex_int(t.ival)) == NULL)
            oom(ps);
    } else if (t.kind == HN_T_FLOAT) {
        error_at(ps, &t, "a float literal is allowed only as a whole numeric operand");
    } else if (accept_punct(ps, HN_P_LPAREN)) {
        e = expr_prec(ps, 0);
        if (e != NULL && !expect_punct(ps, HN_P_RPAREN)) {
            hn_expr_free(e);
            e = NULL;
        }
    } else if (is_word(ps, "rank") || is_word(ps, "world") || is_word(ps, "nstreams")) {
        hn_expr_kind k = is_word(ps, "rank") ? HN_EX_RANK : is_word(ps, "world") ? HN_EX_WORLD : HN_EX_NSTREAMS;
        next(ps);
        if ((e = hn_ex_leaf(k)) == NULL)
            oom(ps);
    } else if (is_word(ps, "min") || is_word(ps, "max")) {
        hn_expr_kind k = is_word(ps, "min") ? HN_EX_MIN : HN_EX_MAX;
        hn_expr *a = NULL, *b = NULL;
        next(ps);
        if (expect_punct(ps, HN_P_LPAREN) && (a = expr_prec(ps, 0)) != NULL &&
            expect_punct(ps, HN_P_COMMA) && (b = expr_prec(ps, 0)) != NULL &&
            expect_punct(ps, HN_P_RPAREN)) {
            if ((e = hn_ex_call(k, a, b)) == NULL)
                oom(ps);
        } else {
            hn_expr_free(a);
            hn_expr_free(b);
        }
    } else if (t.kind == HN_T_IDENT && !is_reserved(t.s, t.len)) {
        int var = name(ps, "a name");
        if (var >= 0 && (e = hn_ex_var(var)) == NULL)
            oom(ps);
    } else {
        expected(ps, "an expression");
    }
    ps->depth--;
    return located(e, t.line, t.col);
}

static int binop_of(const hn_token *t, hn_binop *op)
{
    static const struct {
        hn_punct p;
        hn_binop op;
    } map[] = {
        {HN_P_OR, HN_B_OR},   {HN_P_AND, HN_B_AND}, {HN_P_EQ, HN_B_EQ},
        {HN_P_NE, HN_B_NE},   {HN_P_LT, HN_B_LT},   {HN_P_LE, HN_B_LE},
        {HN_P_GT, HN_B_GT},   {HN_P_GE, HN_B_GE},   {HN_P_PLUS, HN_B_ADD},
        {HN_P_MINUS, HN_B_SUB}, {HN_P_STAR, HN_B_MUL}, {HN_P_SLASH, HN_B_DIV},
        {HN_P_PERCENT, HN_B_MOD},
    };
    if (t->kind != HN_T_PUNCT)
        return 0;
    for (int i = 0; i < HN_ARRAY_LEN(map); i++)
        if (map[i].p == t->punct) {
            *op = map[i].op;
            return 1;
        }
    return 0;
}

/* expr := primary { BINOP expr }   (precedence climbing, left assoc.)
 * precedence: || < && < == != < < <= > >= < + - < * / % */
static hn_expr *expr_prec(parser *ps, int minprec)
{
    hn_expr *lhs = primary(ps);
    hn_binop op;
    while (lhs != NULL && !ps->failed && binop_of(&ps->tok, &op) && hn_binop_prec(op) >= minprec) {
        hn_token t = ps->tok;
        hn_expr *rhs;
        next(ps);
        rhs = expr_prec(ps, hn_binop_prec(op) + 1);
        if (rhs == NULL) {
            hn_expr_free(lhs);
            return NULL;
        }
        lhs = located(hn_ex_bin(op, lhs, rhs), t.line, t.col);
        if (lhs == NULL)
            oom(ps);
    }
    return lhs;
}

static hn_expr *expr(parser *ps) { return expr_prec(ps, 0); }

/* number := ['-'] FLOAT | expr */
static hn_expr *number(parser *ps)
{
    hn_token t = ps->tok;
    int neg = 0;
    if (is_punct(ps, HN_P_MINUS) && peek2(ps).kind == HN_T_FLOAT) {
        neg = 1;
        next(ps);
    }
    if (ps->tok.kind == HN_T_FLOAT) {
        hn_expr *e = hn_ex_float(neg ? -ps->tok.fval : ps->tok.fval);
        if (e == NULL)
            oom(ps);
        next(ps);
        return located(e, t.line, t.col);
    }
    return expr(ps);
}

/* ---- operands ---- */

/* tref := NAME { '[' expr ']' } */
static int tref(parser *ps, hn_tref *t)
{
    t->line = ps->tok.line;
    t->col = ps->tok.col;
    if ((t->var = name(ps, "a tensor name")) < 0)
        return 0;
    while (is_punct(ps, HN_P_LBRACK)) {
        hn_token lb = ps->tok;
        if (t->nidx == HN_MAX_DIMS) {
            error_at(ps, &lb, "too many indices (at most %d)", HN_MAX_DIMS);
            return 0;
        }
        next(ps);
        if ((t->idx[t->nidx] = expr(ps)) == NULL)
            return 0;
        t->nidx++;
        if (!expect_punct(ps, HN_P_RBRACK))
            return 0;
    }
    return 1;
}

/* shape := '[' [expr {',' expr}] ']' */
static int shape(parser *ps, hn_type *ty)
{
    if (!expect_punct(ps, HN_P_LBRACK))
        return 0;
    if (accept_punct(ps, HN_P_RBRACK))
        return 1;
    do {
        if (ty->ndim == HN_MAX_DIMS) {
            error_at(ps, &ps->tok, "too many dimensions (at most %d)", HN_MAX_DIMS);
            return 0;
        }
        if ((ty->shape[ty->ndim] = expr(ps)) == NULL)
            return 0;
        ty->ndim++;
    } while (accept_punct(ps, HN_P_COMMA));
    return expect_punct(ps, HN_P_RBRACK);
}

/* type := DTYPE shape */
static int type(parser *ps, hn_type *ty)
{
    int dt = ps->tok.kind == HN_T_IDENT ? hn_dtype_parse(ps->tok.s, ps->tok.len) : -1;
    if (dt < 0) {
        expected(ps, "a dtype (f32, bf16, f16, i32, i64)");
        return 0;
    }
    ty->dtype = (hn_dtype)dt;
    next(ps);
    return shape(ps, ty);
}

/* streamref := NAME | 'stream' '(' expr ')' */
static int streamref(parser *ps, hn_instr *in)
{
    if (is_word(ps, "stream")) {
        next(ps);
        return expect_punct(ps, HN_P_LPAREN) && (in->sref_index = expr(ps)) != NULL &&
               expect_punct(ps, HN_P_RPAREN);
    }
    return (in->sref_var = name(ps, "a stream name or 'stream(index)'")) >= 0;
}

static int comma_exprs(parser *ps, hn_instr *in, int n)
{
    for (int i = 0; i < n; i++)
        if (!expect_punct(ps, HN_P_COMMA) || (in->e[i] = expr(ps)) == NULL)
            return 0;
    return 1;
}

static int block(parser *ps, hn_block *b);

/* team := '[' expr {',' expr} ']' | 'range' '(' expr ',' expr [',' expr] ')' */
static int team(parser *ps, hn_instr *in)
{
    int is_range = is_word(ps, "range");
    hn_punct close = is_range ? HN_P_RPAREN : HN_P_RBRACK;
    if (is_range)
        next(ps);
    if (!expect_punct(ps, is_range ? HN_P_LPAREN : HN_P_LBRACK))
        return 0;
    in->team_kind = is_range ? HN_TEAM_RANGE : HN_TEAM_LIST;
    do {
        hn_expr *e, **grown;
        if ((e = expr(ps)) == NULL)
            return 0;
        grown = hn_realloc(in->team, (size_t)(in->nteam + 1) * sizeof(*in->team));
        if (grown == NULL) {
            hn_expr_free(e);
            oom(ps);
            return 0;
        }
        in->team = grown;
        in->team[in->nteam++] = e;
    } while (accept_punct(ps, HN_P_COMMA));
    if (is_range && (in->nteam < 2 || in->nteam > 3)) {
        error_at(ps, &ps->tok, "team range takes (start, count) or (start, count, stride)");
        return 0;
    }
    return expect_punct(ps, close);
}

/* via := 'via' ('nccl' | 'p2p' ['get' | 'put'] | 'default') */
static int via(parser *ps, hn_instr *in)
{
    for (int b = 0; b < HN_VIA_COUNT; b++)
        if (is_word(ps, hn_backend_name((hn_backend_kind)b))) {
            in->via = (hn_backend_kind)b;
            next(ps);
            if (in->via == HN_VIA_P2P && (is_word(ps, "get") || is_word(ps, "put"))) {
                in->get = is_word(ps, "get");
                next(ps);
            }
            return 1;
        }
    expected(ps, "a backend (nccl, p2p, default)");
    return 0;
}

/* coll := OP tref '<-' tref { 'op' REDOP | 'root' expr | 'team' team | 'via' BACKEND } */
static int coll(parser *ps, hn_instr *in)
{
    int flags = hn_op_table[in->op].flags;
    int seen_op = 0, seen_root = 0, seen_team = 0, seen_via = 0;
    if (!tref(ps, &in->a) || !expect_punct(ps, HN_P_ARROW) || !tref(ps, &in->b))
        return 0;
    while (!ps->failed && ps->tok.kind == HN_T_IDENT) {
        hn_token t = ps->tok;
        if (is_word(ps, "op") && (flags & HN_OPF_REDOP) && !seen_op) {
            int found = 0;
            next(ps);
            for (int r = 0; r < HN_RED_COUNT; r++)
                if (is_word(ps, hn_redop_name((hn_redop)r))) {
                    in->redop = (hn_redop)r;
                    found = 1;
                }
            if (!found) {
                expected(ps, "a reduction (sum, prod, max, min, avg)");
                return 0;
            }
            next(ps);
            seen_op = 1;
        } else if (is_word(ps, "root") && (flags & HN_OPF_ROOT) && !seen_root) {
            next(ps);
            if ((in->e[0] = expr(ps)) == NULL)
                return 0;
            seen_root = 1;
        } else if (is_word(ps, "team") && !seen_team) {
            next(ps);
            if (!team(ps, in))
                return 0;
            seen_team = 1;
        } else if (is_word(ps, "via") && !seen_via) {
            next(ps);
            if (!via(ps, in))
                return 0;
            seen_via = 1;
        } else {
            char what[160];
            describe(&t, what, sizeof(what));
            error_at(ps, &t, "unexpected option %s for %s", what, hn_op_table[in->op].keyword);
            return 0;
        }
    }
    return 1;
}

/* compute := OP tref '<-' operand {',' operand}   (operands per ops.def) */
static int compute(parser *ps, hn_instr *in)
{
    const char *sig = hn_op_table[in->op].sig;
    int optional = 0;
    if (!tref(ps, &in->a))
        return 0;
    /* `iota t`: with every operand optional, `<-` may go too */
    if (sig[0] == '?' && (ps->tok.kind == HN_T_NL || ps->tok.kind == HN_T_EOF ||
                          is_punct(ps, HN_P_RBRACE) || is_punct(ps, HN_P_SEMI)))
        return 1;
    if (!expect_punct(ps, HN_P_ARROW))
        return 0;
    for (const char *s = sig; *s; s++) {
        hn_arg *arg;
        if (*s == '?') {
            optional = 1;
            continue;
        }
        if (in->nargs > 0 || optional) {
            /* optional operands start only where a comma (or, first, a token) is */
            int more = in->nargs > 0 ? is_punct(ps, HN_P_COMMA)
                                     : !(ps->tok.kind == HN_T_NL || ps->tok.kind == HN_T_EOF ||
                                         is_punct(ps, HN_P_RBRACE) || is_punct(ps, HN_P_SEMI));
            if (!more && optional)
                break;
            if (in->nargs > 0 && !expect_punct(ps, HN_P_COMMA))
                return 0;
        }
        /* counted before it is parsed, so that a half-parsed operand is freed */
        arg = &in->args[in->nargs++];
        arg->t.var = -1;
        if (*s == 't') {
            arg->is_tensor = 1;
            if (!tref(ps, &arg->t))
                return 0;
        } else if ((arg->e = (*s == 'n' ? number(ps) : expr(ps))) == NULL) {
            return 0;
        }
    }
    return 1;
}

/* Parses the part of an instruction after its keyword, by form. */
static int instr_body(parser *ps, hn_instr *in)
{
    switch (hn_op_table[in->op].form) {
    case HN_FORM_ALLOC: return type(ps, &in->type);
    case HN_FORM_FREE: return (in->a.var = name(ps, "a tensor name")) >= 0;
    case HN_FORM_VIEW: /* view tref 'as' shape */
        return tref(ps, &in->a) && expect_word(ps, "as") && shape(ps, &in->type);
    case HN_FORM_SELECT: return tref(ps, &in->a) && comma_exprs(ps, in, 2);
    case HN_FORM_CHUNK: return tref(ps, &in->a) && comma_exprs(ps, in, 3);
    case HN_FORM_TRANSPOSE: return tref(ps, &in->a) && comma_exprs(ps, in, 2);
    case HN_FORM_LET: return (in->e[0] = expr(ps)) != NULL;
    case HN_FORM_CURRENT_STREAM:
    case HN_FORM_BARE: return 1;
    case HN_FORM_STREAM:
        return expect_punct(ps, HN_P_LPAREN) && (in->e[0] = expr(ps)) != NULL &&
               expect_punct(ps, HN_P_RPAREN);
    case HN_FORM_STREAMREF: return streamref(ps, in);
    case HN_FORM_FOR: /* for NAME 'in' expr '..' expr ['step' expr] block */
        if ((in->dst = name(ps, "a loop variable")) < 0 || !expect_word(ps, "in") ||
            (in->e[0] = expr(ps)) == NULL || !expect_punct(ps, HN_P_DOTDOT) ||
            (in->e[1] = expr(ps)) == NULL)
            return 0;
        if (is_word(ps, "step")) {
            next(ps);
            if ((in->e[2] = expr(ps)) == NULL)
                return 0;
        }
        return block(ps, &in->body);
    case HN_FORM_IF: /* if expr block ['else' (block | if ...)] */
        if ((in->e[0] = expr(ps)) == NULL || !block(ps, &in->body))
            return 0;
        if (!is_word(ps, "else"))
            return 1;
        next(ps);
        if (is_word(ps, "if")) {
            hn_instr *elif = hn_instr_new(HN_OP_IF, ps->tok.line, ps->tok.col);
            if (elif == NULL || hn_block_push(&in->orelse, elif) != 0) {
                hn_instr_free(elif);
                oom(ps);
                return 0;
            }
            in->else_if = 1;
            next(ps);
            return instr_body(ps, elif);
        }
        return block(ps, &in->orelse);
    case HN_FORM_COLL: return coll(ps, in);
    case HN_FORM_P2P: /* send tref 'to' expr ['via' B] | recv tref 'from' expr ['via' B] */
        if (!tref(ps, &in->a) || !expect_word(ps, in->op == HN_OP_SEND ? "to" : "from") ||
            (in->e[0] = expr(ps)) == NULL)
            return 0;
        if (is_word(ps, "via")) {
            next(ps);
            return via(ps, in);
        }
        return 1;
    case HN_FORM_GROUP: {
        int ok;
        if (ps->in_group) {
            error_at(ps, &ps->tok, "groups do not nest");
            return 0;
        }
        ps->in_group = 1;
        ok = block(ps, &in->body);
        ps->in_group = 0;
        return ok;
    }
    case HN_FORM_WAIT:
        if (ps->tok.kind == HN_T_IDENT)
            return (in->wait_var = name(ps, "a communication name")) >= 0;
        return 1;
    case HN_FORM_COMPUTE: return compute(ps, in);
    }
    return 0;
}

static int end_of_statement(parser *ps)
{
    if (ps->tok.kind == HN_T_NL || is_punct(ps, HN_P_SEMI)) {
        next(ps);
        return 1;
    }
    if (ps->tok.kind == HN_T_EOF || is_punct(ps, HN_P_RBRACE))
        return 1;
    expected(ps, "end of line");
    return 0;
}

/* stmt := NAME '=' (DEFOP ... | COMMOP ... | expr) | OP ... */
static hn_instr *statement(parser *ps)
{
    hn_token t = ps->tok;
    hn_instr *in = NULL;
    int op, dst = -1;
    if (t.kind != HN_T_IDENT) {
        expected(ps, "an instruction");
        return NULL;
    }
    op = hn_op_lookup(t.s, t.len);
    if (op < 0 || op == HN_OP_LET) {
        if ((dst = name(ps, "an instruction or a name to define")) < 0 || !expect_punct(ps, HN_P_ASSIGN))
            return NULL;
        op = ps->tok.kind == HN_T_IDENT ? hn_op_lookup(ps->tok.s, ps->tok.len) : -1;
        if (op >= 0 && !(hn_op_table[op].flags & (HN_OPF_DEF | HN_OPF_COMM))) {
            char what[160];
            describe(&ps->tok, what, sizeof(what));
            error_at(ps, &ps->tok, "%s defines no value", what);
            return NULL;
        }
        if (op < 0 || op == HN_OP_LET) {
            op = HN_OP_LET;
        } else {
            next(ps);
        }
    } else {
        if (hn_op_table[op].flags & HN_OPF_DEF) {
            error_at(ps, &t, "'%s' must be assigned: name = %s ...", hn_op_table[op].keyword,
                     hn_op_table[op].keyword);
            return NULL;
        }
        next(ps);
    }
    if (ps->in_group && op != HN_OP_SEND && op != HN_OP_RECV) {
        error_at(ps, &t, "only send and recv may appear in a group");
        return NULL;
    }
    if ((in = hn_instr_new((hn_op)op, t.line, t.col)) == NULL) {
        oom(ps);
        return NULL;
    }
    if (op != HN_OP_FOR)
        in->dst = dst;
    if (!instr_body(ps, in) || !end_of_statement(ps)) {
        hn_instr_free(in);
        return NULL;
    }
    return in;
}

static void skip_newlines(parser *ps)
{
    while (ps->tok.kind == HN_T_NL || is_punct(ps, HN_P_SEMI))
        next(ps);
}

/* block := '{' { stmt } '}' */
static int block(parser *ps, hn_block *b)
{
    hn_token open = ps->tok;
    if (!expect_punct(ps, HN_P_LBRACE))
        return 0;
    if (++ps->depth > MAX_DEPTH) {
        error_at(ps, &open, "blocks nested too deeply");
        return 0;
    }
    for (;;) {
        hn_instr *in;
        skip_newlines(ps);
        if (ps->failed)
            return 0;
        if (accept_punct(ps, HN_P_RBRACE))
            break;
        if (ps->tok.kind == HN_T_EOF) {
            error_at(ps, &open, "unclosed '{'");
            return 0;
        }
        if ((in = statement(ps)) == NULL)
            return 0;
        if (hn_block_push(b, in) != 0) {
            hn_instr_free(in);
            oom(ps);
            return 0;
        }
    }
    ps->depth--;
    return 1;
}

/* param := 'param' NAME '=' expr {',' NAME '=' expr} */
static int param_decl(parser *ps)
{
    do {
        hn_token t = ps->tok;
        int var = name(ps, "a parameter name");
        hn_expr *e;
        if (var < 0 || !expect_punct(ps, HN_P_ASSIGN) || (e = expr(ps)) == NULL)
            return 0;
        if (hn_prog_add_param(ps->prog, var, e, t.line, t.col) != 0) {
            oom(ps);
            return 0;
        }
    } while (accept_punct(ps, HN_P_COMMA));
    return end_of_statement(ps);
}

/* io := ('input'|'output') NAME ':' type ('replicated' | 'shard' '(' 'axis' INT ')') */
static int io_decl(parser *ps, int is_output)
{
    hn_token t = ps->tok;
    hn_type ty;
    int var, axis = -1;
    memset(&ty, 0, sizeof(ty));
    if ((var = name(ps, is_output ? "an output name" : "an input name")) < 0 ||
        !expect_punct(ps, HN_P_COLON) || !type(ps, &ty))
        goto fail;
    if (is_word(ps, "replicated")) {
        next(ps);
    } else if (is_word(ps, "shard")) {
        next(ps);
        if (!expect_punct(ps, HN_P_LPAREN) || !expect_word(ps, "axis"))
            goto fail;
        if (ps->tok.kind != HN_T_INT) {
            expected(ps, "an axis number");
            goto fail;
        }
        if (ps->tok.ival < 0 || ps->tok.ival >= ty.ndim) {
            error_at(ps, &ps->tok, "shard axis %lld is out of range for a %d-d tensor",
                     (long long)ps->tok.ival, ty.ndim);
            goto fail;
        }
        axis = (int)ps->tok.ival;
        next(ps);
        if (!expect_punct(ps, HN_P_RPAREN))
            goto fail;
    } else {
        expected(ps, "'replicated' or 'shard(axis N)'");
        goto fail;
    }
    if (hn_prog_output_index(ps->prog, var) >= 0 || hn_prog_input_index(ps->prog, var) >= 0) {
        error_at(ps, &t, "'%s' is declared twice", ps->prog->names[var]);
        goto fail;
    }
    if (hn_prog_add_io(ps->prog, is_output, var, &ty, axis, t.line, t.col) != 0) {
        oom(ps);
        return 0;
    }
    return end_of_statement(ps);
fail:
    hn_type_clear(&ty);
    return 0;
}

/* program := { param | io | 'reference' block | stmt } */
static void program(parser *ps)
{
    next(ps);
    for (;;) {
        skip_newlines(ps);
        if (ps->failed || ps->tok.kind == HN_T_EOF)
            return;
        if (is_word(ps, "param")) {
            next(ps);
            if (!param_decl(ps))
                return;
        } else if (is_word(ps, "input") || is_word(ps, "output")) {
            int is_output = is_word(ps, "output");
            next(ps);
            if (!io_decl(ps, is_output))
                return;
        } else if (is_word(ps, "reference")) {
            hn_token t = ps->tok;
            if (ps->prog->has_reference) {
                error_at(ps, &t, "a second reference block");
                return;
            }
            next(ps);
            ps->prog->has_reference = 1;
            if (!block(ps, &ps->prog->reference) || !end_of_statement(ps))
                return;
        } else {
            hn_instr *in = statement(ps);
            if (in == NULL)
                return;
            if (hn_block_push(&ps->prog->body, in) != 0) {
                hn_instr_free(in);
                oom(ps);
                return;
            }
        }
    }
}

hn_status_t hn_parse(const char *text, size_t len, const char *filename,
                     hn_program **out, hn_strbuf *diag)
{
    parser ps;
    hn_status_t st;
    memset(&ps, 0, sizeof(ps));
    ps.file = filename ? filename : "<input>";
    ps.diag = diag;
    ps.prog = hn_prog_new(ps.file);
    if (ps.prog == NULL) {
        hn_sb_printf(diag, "%s:1:1: error: out of memory\n", ps.file);
        return HN_ERR_NOMEM;
    }
    hn_lex_init(&ps.lx, text, len);
    program(&ps);
    if (!ps.failed && hn_prog_finish(ps.prog) != HN_OK)
        oom(&ps);
    if (ps.failed) {
        st = ps.nomem ? HN_ERR_NOMEM : HN_ERR_PARSE;
        hn_prog_free(ps.prog);
        return st;
    }
    *out = ps.prog;
    return HN_OK;
}
