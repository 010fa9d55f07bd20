/* Parser: text -> hn_program. Stops at the first error, reported as
 * `file:line:col: error: message`; frees everything it built on failure.
 * The grammar rule is written above each function (docs/SYNTAX.md has all). */
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "ir.h"
#include "lex.h"
#include "parse.h"

#define MAX_DEPTH 200       /* nesting of expressions */
#define MAX_BLOCK_DEPTH 200 /* nesting of blocks, counted apart: a condition deep in blocks is no deep expression */

typedef struct parser {
    hn_lexer lx;
    hn_token tok; /* current token */
    hn_program *prog;
    const char *file;
    hn_strbuf *diag;
    int failed;
    int nomem;
    int depth;       /* expressions being parsed, one inside the other */
    int block_depth; /* blocks being parsed, one inside the other */
    int in_group;
    int rank_positions; /* > 0: where 'rank' is not allowed (the message names each one) */
    /* hn_parse_consuming: the text's whole pages from `given` to `end` may be
     * given back once parsed (given == NULL: none) */
    char *given, *end;
} parser;

static const char *reserved[] = {
    "rank", "world", "nstreams", "min",   "max",    "floor",  "in",    "step",
    "else", "op",    "root",     "team",  "via",    "to",     "from",  "as",    "range",
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

int hn_name_reserved(const char *name) { return is_reserved(name, (int)strlen(name)); }

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
    if (e != NULL && e->line == 0 && e->pooled != 2) { /* a shared leaf has no position */
        e->line = line;
        e->col = col;
    }
    return e;
}

/* primary := INT | IDENT | 'rank' | 'world' | 'nstreams'
 *          | ('min'|'max') '(' expr ',' expr ')' | 'floor' '(' expr ')'
 *          | '(' expr ')' | ('-'|'!') primary */
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
        /* one node for all uses, but where a rank must be named in a message */
        if ((e = k == HN_EX_RANK && ps->rank_positions > 0 ? hn_ex_leaf(k) : hn_ex_leaf_shared(k)) == NULL)
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
    } else if (is_word(ps, "floor")) {
        hn_expr *a = NULL;
        next(ps);
        if (expect_punct(ps, HN_P_LPAREN) && (a = expr_prec(ps, 0)) != NULL && expect_punct(ps, HN_P_RPAREN)) {
            if ((e = hn_ex_unary(HN_EX_FLOOR, a)) == NULL)
                oom(ps);
        } else {
            hn_expr_free(a);
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
        hn_expr *e;
        if (t->nidx == HN_MAX_DIMS) {
            error_at(ps, &lb, "too many indices (at most %d)", HN_MAX_DIMS);
            return 0;
        }
        next(ps);
        if ((e = expr(ps)) == NULL)
            return 0;
        if (hn_tref_push_idx(t, e) != 0) {
            oom(ps);
            return 0;
        }
        if (!expect_punct(ps, HN_P_RBRACK))
            return 0;
    }
    return 1;
}

/* shape := '[' [expr {',' expr}] ']' */
static int shape(parser *ps, hn_type *ty)
{
    hn_expr *e;
    if (!expect_punct(ps, HN_P_LBRACK))
        return 0;
    if (accept_punct(ps, HN_P_RBRACK))
        return 1;
    do {
        if (ty->ndim == HN_MAX_DIMS) {
            error_at(ps, &ps->tok, "too many dimensions (at most %d)", HN_MAX_DIMS);
            return 0;
        }
        if ((e = expr(ps)) == NULL)
            return 0;
        if (hn_type_push_dim(ty, e) != 0) {
            oom(ps);
            return 0;
        }
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

/* via := 'via' ('nccl' | 'p2p' ['get' | 'put'] | 'll' ['oneshot' | 'twoshot'] | 'auto' | 'default') */
static int via(parser *ps, hn_instr *in)
{
    for (int v = 0; v < HN_VIA_COUNT; v++)
        if (is_word(ps, hn_via_name((hn_via)v))) {
            in->via = (hn_via)v;
            next(ps);
            /* put is p2p's default push: the same statement as none */
            if (in->via == HN_VIA_P2P && (is_word(ps, "get") || is_word(ps, "put"))) {
                in->algo = is_word(ps, "get") ? HN_ALGO_PULL : HN_ALGO_AUTO;
                next(ps);
            } else if (in->via == HN_VIA_LL && (is_word(ps, "oneshot") || is_word(ps, "twoshot"))) {
                in->algo = is_word(ps, "oneshot") ? HN_ALGO_ONESHOT : HN_ALGO_TWOSHOT;
                next(ps);
            }
            return 1;
        }
    expected(ps, "a communicator (nccl, p2p, ll, auto, default)");
    return 0;
}

/* ---- pipelined statements ---- */

/* The pipelined pattern of ops.def written `KW out <- NESTED(...) ...`
 * (nested: the nested keyword, or NULL for `KW out <- in pipelined(...)`);
 * -1 if there is none. */
static int pipe_lookup(const char *kw, const hn_token *nested)
{
    for (int op = 0; op < HN_OP_COUNT; op++) {
        const hn_op_info *info = &hn_op_table[op];
        size_t n = strcspn(info->sig, "(");
        if (info->form != HN_FORM_PIPELINED || strcmp(info->keyword, kw) != 0)
            continue;
        if (nested == NULL ? info->sig[0] == 't'
                           : info->sig[n] == '(' && (int)n == nested->len &&
                                 strncmp(info->sig, nested->s, n) == 0)
            return op;
    }
    return -1;
}

/* A tensor operand appended to in->args: of a pipelined statement, or a
 * collective's beyond `out <- in`. */
static int arg_operand(parser *ps, hn_instr *in)
{
    hn_arg *arg;
    if (in->nargs == HN_MAX_ARGS) {
        error_at(ps, &ps->tok, "too many operands");
        return 0;
    }
    /* counted before it is parsed, so that a half-parsed operand is freed */
    if ((arg = hn_instr_push_arg(in)) == NULL) {
        oom(ps);
        return 0;
    }
    arg->is_tensor = 1;
    return tref(ps, &arg->t);
}

/* The operands after the nested keyword, as the signature in ops.def says:
 * sig "(tt?t)t" reads `(A, B [, bias]), C`; `?` makes the rest of its
 * group optional. */
static int pipe_operands(parser *ps, hn_instr *in, const char *sig)
{
    int optional = 0, first = 1;
    for (const char *s = sig; *s && !ps->failed; s++) {
        switch (*s) {
        case '(':
            if (!expect_punct(ps, HN_P_LPAREN))
                return 0;
            first = 1;
            optional = 0;
            break;
        case ')':
            if (!expect_punct(ps, HN_P_RPAREN))
                return 0;
            first = optional = 0;
            break;
        case '?': optional = 1; break;
        default: /* 't' */
            if (optional && !is_punct(ps, HN_P_COMMA)) {
                while (s[1] != '\0' && s[1] != ')')
                    s++; /* the rest of this group is omitted */
                break;
            }
            if ((!first && !expect_punct(ps, HN_P_COMMA)) || !arg_operand(ps, in))
                return 0;
            first = 0;
            break;
        }
    }
    return !ps->failed;
}

static int pipe_count(parser *ps, hn_expr **slot)
{
    if (is_word(ps, "auto")) { /* the cost model chooses */
        next(ps);
        return 1;
    }
    ps->rank_positions++; /* chunks and streams are fixed before a run: no rank */
    *slot = expr(ps);
    ps->rank_positions--;
    return *slot != NULL;
}

/* Picks one of `n` words; -1 after an error listing them. */
static int pipe_choice(parser *ps, const char *what, const char *const *words, int n)
{
    char list[160], found[160];
    size_t k = 0;
    for (int i = 0; i < n; i++)
        if (is_word(ps, words[i])) {
            next(ps);
            return i;
        }
    for (int i = 0; i < n && k < sizeof(list); i++)
        k += (size_t)snprintf(list + k, sizeof(list) - k, i ? ", %s" : "%s", words[i]);
    describe(&ps->tok, found, sizeof(found));
    error_at(ps, &ps->tok, "expected %s (%s) but found %s", what, list, found);
    return -1;
}

/* pipe_opts := 'pipelined' '(' [ pipe_opt { ',' pipe_opt } ] ')'
 * pipe_opt  := 'strategy' '=' ('auto' | 'sequential' | 'ring' | 'collective' | 'broadcast')
 *            | ('chunks' | 'streams') '=' ('auto' | expr)
 *            | 'via' '=' ('default' | 'nccl' | 'p2p' | 'auto')
 *            | 'protocol' '=' ('auto' | 'put' | 'get') */
static int pipe_options(parser *ps, hn_instr *in)
{
    static const char *const keys[] = {"strategy", "chunks", "streams", "via", "protocol"};
    static const char *const protocols[] = {"auto", "put", "get"};
    static const hn_coll_algo protocol_algos[] = {HN_ALGO_AUTO, HN_ALGO_PUSH, HN_ALGO_PULL};
    const char *strategies[HN_STRAT_COUNT], *vias[HN_VIA_COUNT];
    int seen[HN_ARRAY_LEN(keys)] = {0};
    for (int i = 0; i < HN_STRAT_COUNT; i++)
        strategies[i] = hn_strategy_name((hn_strategy)i);
    for (int i = 0; i < HN_VIA_COUNT; i++)
        vias[i] = hn_via_name((hn_via)i);
    if (!expect_word(ps, "pipelined") || !expect_punct(ps, HN_P_LPAREN))
        return 0;
    if (accept_punct(ps, HN_P_RPAREN))
        return 1;
    do {
        hn_token key = ps->tok;
        int k = -1, v;
        for (int i = 0; i < HN_ARRAY_LEN(keys); i++)
            if (is_word(ps, keys[i]))
                k = i;
        if (k < 0) {
            char what[160];
            describe(&key, what, sizeof(what));
            error_at(ps, &key, "unknown option %s of pipelined (strategy, chunks, streams, via, protocol)",
                     what);
            return 0;
        }
        if (seen[k]++) {
            error_at(ps, &key, "option '%s' given twice", keys[k]);
            return 0;
        }
        next(ps);
        if (!expect_punct(ps, HN_P_ASSIGN))
            return 0;
        switch (k) {
        case 0:
            if ((v = pipe_choice(ps, "a strategy", strategies, HN_STRAT_COUNT)) < 0)
                return 0;
            in->strategy = (hn_strategy)v;
            break;
        case 1:
        case 2:
            if (!pipe_count(ps, &in->e[k - 1]))
                return 0;
            break;
        case 3:
            /* not ll: the latency path serves plain collectives */
            if ((v = pipe_choice(ps, "a communicator", vias, HN_VIA_LL)) < 0)
                return 0;
            in->via = (hn_via)v;
            break;
        default:
            if ((v = pipe_choice(ps, "a protocol", protocols, HN_ARRAY_LEN(protocols))) < 0)
                return 0;
            in->algo = protocol_algos[v];
            break;
        }
    } while (accept_punct(ps, HN_P_COMMA));
    return expect_punct(ps, HN_P_RPAREN);
}

/* Turns `in` into the pipelined pattern `op` (its options not yet read). */
static void become_pipelined(hn_instr *in, int op)
{
    in->op = (hn_op)op;
    in->via = HN_VIA_AUTO;
    in->algo = HN_ALGO_AUTO;
}

/* pipelined := KW tref '<-' NESTED pipe_operands [ 'op' REDOP ] pipe_opts
 * where NESTED is the nested keyword of an ops.def pattern, e.g.
 *   matmul C <- allgather(A), B pipelined(...)
 *   reduce_scatter C <- linear(A, W, bias) pipelined(...)
 * The current token is NESTED (followed by '('). */
static int pipelined_nested(parser *ps, hn_instr *in)
{
    hn_token nested = ps->tok;
    int op = pipe_lookup(hn_op_table[in->op].keyword, &nested);
    if (op < 0) {
        error_at(ps, &nested, "%.*s(...) as an operand of %s: no pipelined statement reads it "
                 "(docs/SYNTAX.md lists them)", nested.len, nested.s, hn_op_table[in->op].keyword);
        return 0;
    }
    become_pipelined(in, op);
    next(ps);
    if (!pipe_operands(ps, in, hn_op_table[op].sig + strcspn(hn_op_table[op].sig, "(")))
        return 0;
    if (is_word(ps, "op")) {
        error_at(ps, &ps->tok, "a pipelined %s sums its partial products: no 'op'", hn_op_table[op].keyword);
        return 0;
    }
    return pipe_options(ps, in);
}

/* Whether the current token starts a nested operation: KEYWORD '('. */
static int at_nested(parser *ps)
{
    return ps->tok.kind == HN_T_IDENT && hn_op_lookup(ps->tok.s, ps->tok.len) >= 0 &&
           peek2(ps).kind == HN_T_PUNCT && peek2(ps).punct == HN_P_LPAREN;
}

/* coll := OP tref { ',' tref } '<-' tref { ',' tref }
 *         { 'op' REDOP | 'root' expr | 'eps' number | 'team' team | 'via' BACKEND }
 * with as many operands beyond `out <- in` as the signature in ops.def says
 * (allreduce_rmsnorm's "t<tt" reads `Y, R <- X, R, W`); `eps` where it takes
 * one */
static int coll(parser *ps, hn_instr *in)
{
    const char *sig = hn_op_table[in->op].sig, *lt = strchr(sig, '<');
    int flags = hn_op_table[in->op].flags, nout = lt != NULL ? (int)(lt - sig) : 0;
    int nin = lt != NULL ? (int)strlen(lt + 1) : 0;
    int seen_op = 0, seen_root = 0, seen_team = 0, seen_via = 0, seen_eps = 0;
    hn_arg *arg;
    if (!tref(ps, &in->a))
        return 0;
    for (int i = 0; i < nout; i++)
        if (!expect_punct(ps, HN_P_COMMA) || !arg_operand(ps, in))
            return 0;
    if (!expect_punct(ps, HN_P_ARROW))
        return 0;
    if (at_nested(ps))
        return pipelined_nested(ps, in);
    if (!tref(ps, &in->b))
        return 0;
    for (int i = 0; i < nin; i++)
        if (!expect_punct(ps, HN_P_COMMA) || !arg_operand(ps, in))
            return 0;
    while (!ps->failed && ps->tok.kind == HN_T_IDENT) {
        hn_token t = ps->tok;
        if (is_word(ps, "pipelined")) {
            int op = pipe_lookup(hn_op_table[in->op].keyword, NULL);
            if (op < 0 || seen_root || seen_team || seen_via) {
                error_at(ps, &t, op < 0 ? "%s has no pipelined form"
                                        : "a pipelined %s spans all ranks and takes its communicator "
                                          "in pipelined(via=...): no root, team or via before it",
                         hn_op_table[in->op].keyword);
                return 0;
            }
            become_pipelined(in, op);
            /* the input becomes the one operand */
            if ((arg = hn_instr_push_arg(in)) == NULL) {
                oom(ps);
                return 0;
            }
            arg->is_tensor = 1;
            arg->t = in->b;
            memset(&in->b, 0, sizeof(in->b));
            in->b.var = -1;
            return pipe_options(ps, in);
        }
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
        } else if (is_word(ps, "eps") && (flags & HN_OPF_EPS) && !seen_eps) {
            next(ps);
            if ((in->e[1] = number(ps)) == NULL)
                return 0;
            seen_eps = 1;
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
    if (at_nested(ps))
        return pipelined_nested(ps, in);
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
        if ((arg = hn_instr_push_arg(in)) == NULL) {
            oom(ps);
            return 0;
        }
        if (*s == 't') {
            arg->is_tensor = 1;
            if (!tref(ps, &arg->t))
                return 0;
        } else if ((arg->e = (*s == 'n' ? number(ps) : expr(ps))) == NULL) {
            return 0;
        }
    }
    if (is_word(ps, "pipelined") && pipe_lookup(hn_op_table[in->op].keyword, NULL) < 0) {
        error_at(ps, &ps->tok, "%s is pipelined with a nested communication as an operand, e.g. "
                 "matmul C <- allgather(A), B pipelined(...)", hn_op_table[in->op].keyword);
        return 0;
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
    case HN_FORM_FOR: /* for NAME 'in' expr '..' expr ['step' expr] ['on' 'streams'] block */
        if ((in->dst = name(ps, "a loop variable")) < 0 || !expect_word(ps, "in") ||
            (in->e[0] = expr(ps)) == NULL || !expect_punct(ps, HN_P_DOTDOT) ||
            (in->e[1] = expr(ps)) == NULL)
            return 0;
        if (is_word(ps, "step")) {
            next(ps);
            if ((in->e[2] = expr(ps)) == NULL)
                return 0;
        }
        if (is_word(ps, "on")) { /* a stream-parallel loop (src/sched/lower.c) */
            next(ps);
            if (!expect_word(ps, "streams"))
                return 0;
            in->on_streams = 1;
        }
        return block(ps, &in->body);
    case HN_FORM_PIPELINED: /* only reached through the compute and collective forms */
        error_at(ps, &ps->tok, "internal: a pipelined form has no keyword of its own");
        return 0;
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
            if (!instr_body(ps, elif))
                return 0;
            if (hn_block_seal(&in->orelse) != 0) {
                oom(ps);
                return 0;
            }
            return 1;
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

/* Whether the current token is a word that is neither a keyword nor a
 * name seen so far, followed by a word (before_word) or by anything but
 * '=': then it was meant as an instruction. */
static int unknown_word(parser *ps, int before_word)
{
    hn_token after;
    if (ps->tok.kind != HN_T_IDENT || is_reserved(ps->tok.s, ps->tok.len))
        return 0;
    if (hn_prog_lookup_var(ps->prog, ps->tok.s, ps->tok.len) >= 0)
        return 0;
    after = peek2(ps);
    if (before_word)
        return after.kind == HN_T_IDENT;
    return after.kind != HN_T_PUNCT || after.punct != HN_P_ASSIGN;
}

/* "unknown instruction 'allreduc' — did you mean 'allreduce'?", the
 * nearest of the keywords that may stand here (`defining`: after
 * NAME =, the instructions that define a value) */
static void unknown_instruction(parser *ps, int defining)
{
    static const char *const decls[] = {"param", "input", "output", "reference"};
    const char *words[HN_OP_COUNT + HN_ARRAY_LEN(decls)];
    const char *near;
    char what[160];
    int n = 0;
    for (int i = 0; i < HN_OP_COUNT; i++)
        if (!defining || (hn_op_table[i].flags & (HN_OPF_DEF | HN_OPF_COMM)))
            words[n++] = hn_op_table[i].keyword;
    for (int i = 0; !defining && ps->block_depth == 0 && i < HN_ARRAY_LEN(decls); i++)
        words[n++] = decls[i];
    describe(&ps->tok, what, sizeof(what));
    near = hn_nearest_word(ps->tok.s, (size_t)ps->tok.len, words, n);
    if (near != NULL)
        error_at(ps, &ps->tok, "unknown instruction %s \u2014 did you mean '%s'?", what, near);
    else
        error_at(ps, &ps->tok, "unknown instruction %s (docs/SYNTAX.md lists them)", what);
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
    if (op < 0 && unknown_word(ps, 0)) {
        unknown_instruction(ps, 0);
        return NULL;
    }
    if (op < 0 || op == HN_OP_LET) {
        if ((dst = name(ps, "an instruction or a name to define")) < 0 || !expect_punct(ps, HN_P_ASSIGN))
            return NULL;
        if (ps->tok.kind == HN_T_IDENT && hn_op_lookup(ps->tok.s, ps->tok.len) < 0 &&
            unknown_word(ps, 1)) {
            unknown_instruction(ps, 1);
            return NULL;
        }
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
    if (!instr_body(ps, in)) {
        hn_instr_free(in);
        return NULL;
    }
    if (dst >= 0 && hn_op_table[in->op].form == HN_FORM_PIPELINED) {
        error_at(ps, &t, "a pipelined statement defines no value: it ends when its work is done");
        hn_instr_free(in);
        return NULL;
    }
    if (!end_of_statement(ps)) {
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
    if (++ps->block_depth > MAX_BLOCK_DEPTH) {
        error_at(ps, &open, "blocks nested too deeply (at most %d)", MAX_BLOCK_DEPTH);
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
    ps->block_depth--;
    if (hn_block_seal(b) != 0) { /* its items, exactly, in the program's pool */
        oom(ps);
        return 0;
    }
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

/* Gives back the text's whole pages before the current token, 4 MiB at a
 * time (hn_parse_consuming): no token before it is read again. */
static void give_back_text(parser *ps)
{
    const size_t batch = (size_t)4 << 20;
    uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
    uintptr_t upto = (uintptr_t)ps->tok.s & ~(page - 1);
    if (ps->given == NULL || ps->tok.s == NULL || (char *)upto > ps->end || upto < (uintptr_t)ps->given + batch)
        return;
    (void)madvise(ps->given, (size_t)(upto - (uintptr_t)ps->given), MADV_DONTNEED);
    ps->given = (char *)upto;
}

/* program := { param | io | 'reference' block | stmt } */
static void program(parser *ps)
{
    next(ps);
    for (;;) {
        skip_newlines(ps);
        if (ps->failed || ps->tok.kind == HN_T_EOF)
            return;
        give_back_text(ps);
        if (is_word(ps, "param")) {
            int ok;
            next(ps);
            ps->rank_positions++; /* parameters and shapes of inputs and outputs: no rank */
            ok = param_decl(ps);
            ps->rank_positions--;
            if (!ok)
                return;
        } else if (is_word(ps, "input") || is_word(ps, "output")) {
            int is_output = is_word(ps, "output"), ok;
            next(ps);
            ps->rank_positions++;
            ok = io_decl(ps, is_output);
            ps->rank_positions--;
            if (!ok)
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

static hn_status_t parse_text(const char *text, size_t len, const char *filename, hn_program **out,
                              hn_strbuf *diag, char *consumable);

hn_status_t hn_parse(const char *text, size_t len, const char *filename,
                     hn_program **out, hn_strbuf *diag)
{
    return parse_text(text, len, filename, out, diag, NULL);
}

hn_status_t hn_parse_consuming(char *text, size_t len, const char *filename, hn_program **out, hn_strbuf *diag)
{
    return parse_text(text, len, filename, out, diag, text);
}

static hn_status_t parse_text(const char *text, size_t len, const char *filename, hn_program **out,
                              hn_strbuf *diag, char *consumable)
{
    parser ps;
    hn_status_t st;
    memset(&ps, 0, sizeof(ps));
    if (consumable != NULL) { /* the whole pages inside it, never the one its start shares */
        uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
        ps.given = (char *)(((uintptr_t)consumable + page - 1) & ~(page - 1));
        ps.end = (char *)(((uintptr_t)consumable + len) & ~(page - 1));
        if (ps.given >= ps.end)
            ps.given = ps.end = NULL;
    }
    ps.file = filename ? filename : "<input>";
    ps.diag = diag;
    ps.prog = hn_prog_new(ps.file);
    if (ps.prog == NULL) {
        hn_sb_printf(diag, "%s:1:1: error: out of memory\n", ps.file);
        return HN_ERR_NOMEM;
    }
    hn_lex_init(&ps.lx, text, len);
    /* the program's nodes in its pool: no malloc header each */
    if (hn_prog_pool_begin(ps.prog) != 0)
        oom(&ps);
    else
        program(&ps);
    if (!ps.failed && hn_block_seal(&ps.prog->body) != 0)
        oom(&ps);
    hn_prog_pool_end(ps.prog);
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
