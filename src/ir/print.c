/* Printer: hn_program -> canonical text that the parser reads back. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ir.h"
#include "parse.h"

static void expr_prec(hn_strbuf *sb, const hn_program *p, const hn_expr *e, int ctx, int right)
{
    switch (e->kind) {
    case HN_EX_INT:
        if (e->ival < 0) /* a negative literal only comes from the builder */
            hn_sb_printf(sb, "(%lld)", (long long)e->ival);
        else
            hn_sb_printf(sb, "%lld", (long long)e->ival);
        return;
    case HN_EX_FLOAT: {
        char buf[40];
        /* the shortest text that reads back as the same value (1e-06, not
         * 9.9999999999999995e-07) */
        for (int digits = 1; digits <= 17; digits++) {
            snprintf(buf, sizeof(buf), "%.*g", digits, e->fval);
            if (strtod(buf, NULL) == e->fval)
                break;
        }
        if (strpbrk(buf, ".eEn") == NULL) /* keep it a float literal */
            strcat(buf, ".0");
        hn_sb_append(sb, buf);
        return;
    }
    case HN_EX_VAR: hn_sb_append(sb, p->names[e->var]); return;
    case HN_EX_RANK: hn_sb_append(sb, "rank"); return;
    case HN_EX_WORLD: hn_sb_append(sb, "world"); return;
    case HN_EX_NSTREAMS: hn_sb_append(sb, "nstreams"); return;
    case HN_EX_NEG:
    case HN_EX_NOT:
        hn_sb_append(sb, e->kind == HN_EX_NEG ? "-" : "!");
        /* operands of unary ops are primaries */
        expr_prec(sb, p, e->a, 100, 0);
        return;
    case HN_EX_FLOOR:
        hn_sb_append(sb, "floor(");
        expr_prec(sb, p, e->a, 0, 0);
        hn_sb_append(sb, ")");
        return;
    case HN_EX_MIN:
    case HN_EX_MAX:
        hn_sb_append(sb, e->kind == HN_EX_MIN ? "min(" : "max(");
        expr_prec(sb, p, e->a, 0, 0);
        hn_sb_append(sb, ", ");
        expr_prec(sb, p, e->b, 0, 0);
        hn_sb_append(sb, ")");
        return;
    case HN_EX_BIN: {
        int prec = hn_binop_prec(e->op);
        /* left-associative: a right operand of equal precedence needs parens */
        int paren = prec < ctx || (right && prec == ctx);
        if (paren)
            hn_sb_append(sb, "(");
        expr_prec(sb, p, e->a, prec, 0);
        hn_sb_printf(sb, " %s ", hn_binop_text(e->op));
        expr_prec(sb, p, e->b, prec, 1);
        if (paren)
            hn_sb_append(sb, ")");
        return;
    }
    }
}

void hn_print_expr(hn_strbuf *sb, const hn_program *p, const hn_expr *e)
{
    expr_prec(sb, p, e, 0, 0);
}

static void tref(hn_strbuf *sb, const hn_program *p, const hn_tref *t)
{
    hn_sb_append(sb, p->names[t->var]);
    for (int i = 0; i < t->nidx; i++) {
        hn_sb_append(sb, "[");
        hn_print_expr(sb, p, t->idx[i]);
        hn_sb_append(sb, "]");
    }
}

void hn_print_tref(hn_strbuf *sb, const hn_program *p, const hn_tref *t) { tref(sb, p, t); }

static void shape(hn_strbuf *sb, const hn_program *p, const hn_type *ty)
{
    hn_sb_append(sb, "[");
    for (int i = 0; i < ty->ndim; i++) {
        if (i)
            hn_sb_append(sb, ", ");
        hn_print_expr(sb, p, ty->shape[i]);
    }
    hn_sb_append(sb, "]");
}

static void exprs(hn_strbuf *sb, const hn_program *p, hn_expr *const *e, int n)
{
    for (int i = 0; i < n; i++) {
        hn_sb_append(sb, ", ");
        hn_print_expr(sb, p, e[i]);
    }
}

static void block(hn_strbuf *sb, const hn_program *p, const hn_block *b, int indent, int oneline);

/* `out <- nested(operands), operands [op R] pipelined(options)`, the
 * operands laid out as the signature in ops.def says. */
static void pipelined(hn_strbuf *sb, const hn_program *p, const hn_instr *in)
{
    const char *sig = hn_op_table[in->op].sig;
    int arg = 0, first = 1, nopt = 0;
    hn_sb_append(sb, " ");
    tref(sb, p, &in->a);
    hn_sb_append(sb, " <- ");
    /* the nested keyword (if any), then its operands and the outer ones */
    size_t kw = strchr(sig, '(') != NULL ? strcspn(sig, "(") : 0;
    hn_sb_appendn(sb, sig, kw);
    for (const char *s = sig + kw; *s; s++) {
        if (*s == '(' || *s == ')') {
            hn_sb_printf(sb, "%c", *s);
            first = *s == '(';
        } else if (*s == 't' && arg < in->nargs) {
            hn_sb_append(sb, first ? "" : ", ");
            tref(sb, p, &in->args[arg++].t);
            first = 0;
        }
    }
    if ((hn_op_table[in->op].flags & HN_OPF_REDOP) && in->redop != HN_RED_SUM)
        hn_sb_printf(sb, " op %s", hn_redop_name(in->redop));
    hn_sb_append(sb, " pipelined(");
    if (in->strategy != HN_STRAT_AUTO)
        hn_sb_printf(sb, "%sstrategy=%s", nopt++ ? ", " : "", hn_strategy_name(in->strategy));
    for (int k = 0; k < 2; k++)
        if (in->e[k] != NULL) {
            hn_sb_printf(sb, "%s%s=", nopt++ ? ", " : "", k == 0 ? "chunks" : "streams");
            hn_print_expr(sb, p, in->e[k]);
        }
    if (in->via != HN_VIA_AUTO)
        hn_sb_printf(sb, "%svia=%s", nopt++ ? ", " : "", hn_via_name(in->via));
    if (in->algo != HN_ALGO_AUTO)
        hn_sb_printf(sb, "%sprotocol=%s", nopt++ ? ", " : "", in->algo == HN_ALGO_PULL ? "get" : "put");
    hn_sb_append(sb, ")");
}

/* Instruction text without the trailing newline; blocks at `indent`. */
static void instr(hn_strbuf *sb, const hn_program *p, const hn_instr *in, int indent, int oneline)
{
    const hn_op_info *info = &hn_op_table[in->op];
    if (in->dst >= 0 && in->op != HN_OP_FOR)
        hn_sb_printf(sb, "%s = ", p->names[in->dst]);
    if (in->op != HN_OP_LET)
        hn_sb_append(sb, info->keyword);
    switch (info->form) {
    case HN_FORM_ALLOC:
        hn_sb_printf(sb, " %s", hn_dtype_name(in->type.dtype));
        shape(sb, p, &in->type);
        break;
    case HN_FORM_FREE: hn_sb_printf(sb, " %s", p->names[in->a.var]); break;
    case HN_FORM_VIEW:
        hn_sb_append(sb, " ");
        tref(sb, p, &in->a);
        hn_sb_append(sb, " as ");
        shape(sb, p, &in->type);
        break;
    case HN_FORM_SELECT:
    case HN_FORM_TRANSPOSE:
    case HN_FORM_CHUNK:
        hn_sb_append(sb, " ");
        tref(sb, p, &in->a);
        exprs(sb, p, in->e, info->form == HN_FORM_CHUNK ? 3 : 2);
        break;
    case HN_FORM_LET: hn_print_expr(sb, p, in->e[0]); break;
    case HN_FORM_CURRENT_STREAM:
    case HN_FORM_BARE: break;
    case HN_FORM_STREAM:
        hn_sb_append(sb, "(");
        hn_print_expr(sb, p, in->e[0]);
        hn_sb_append(sb, ")");
        break;
    case HN_FORM_STREAMREF:
        if (in->sref_index != NULL) {
            hn_sb_append(sb, " stream(");
            hn_print_expr(sb, p, in->sref_index);
            hn_sb_append(sb, ")");
        } else {
            hn_sb_printf(sb, " %s", p->names[in->sref_var]);
        }
        break;
    case HN_FORM_FOR:
        hn_sb_printf(sb, " %s in ", p->names[in->dst]);
        hn_print_expr(sb, p, in->e[0]);
        hn_sb_append(sb, " .. ");
        hn_print_expr(sb, p, in->e[1]);
        if (in->e[2] != NULL) {
            hn_sb_append(sb, " step ");
            hn_print_expr(sb, p, in->e[2]);
        }
        if (in->on_streams)
            hn_sb_append(sb, " on streams");
        block(sb, p, &in->body, indent, oneline);
        break;
    case HN_FORM_IF:
        hn_sb_append(sb, " ");
        hn_print_expr(sb, p, in->e[0]);
        block(sb, p, &in->body, indent, oneline);
        if (in->else_if && in->orelse.n == 1 && in->orelse.items[0]->op == HN_OP_IF) {
            hn_sb_append(sb, " else ");
            instr(sb, p, in->orelse.items[0], indent, oneline);
        } else if (in->orelse.n > 0) {
            hn_sb_append(sb, " else");
            block(sb, p, &in->orelse, indent, oneline);
        }
        break;
    case HN_FORM_COLL: {
        /* the operands beyond `out <- in`: further outputs, then inputs */
        const char *lt = strchr(info->sig, '<');
        int nout = lt != NULL ? (int)(lt - info->sig) : 0;
        hn_sb_append(sb, " ");
        tref(sb, p, &in->a);
        for (int i = 0; i < nout && i < in->nargs; i++) {
            hn_sb_append(sb, ", ");
            tref(sb, p, &in->args[i].t);
        }
        hn_sb_append(sb, " <- ");
        tref(sb, p, &in->b);
        for (int i = nout; i < in->nargs; i++) {
            hn_sb_append(sb, ", ");
            tref(sb, p, &in->args[i].t);
        }
        if (info->flags & HN_OPF_REDOP)
            hn_sb_printf(sb, " op %s", hn_redop_name(in->redop));
        if ((info->flags & HN_OPF_ROOT) && in->e[0] != NULL) {
            hn_sb_append(sb, " root ");
            hn_print_expr(sb, p, in->e[0]);
        }
        if ((info->flags & HN_OPF_EPS) && in->e[1] != NULL) {
            hn_sb_append(sb, " eps ");
            hn_print_expr(sb, p, in->e[1]);
        }
        if (in->team_kind != HN_TEAM_ALL) {
            hn_sb_append(sb, in->team_kind == HN_TEAM_RANGE ? " team range(" : " team [");
            for (int i = 0; i < in->nteam; i++) {
                if (i)
                    hn_sb_append(sb, ", ");
                hn_print_expr(sb, p, in->team[i]);
            }
            hn_sb_append(sb, in->team_kind == HN_TEAM_RANGE ? ")" : "]");
        }
        if (in->via != HN_VIA_DEFAULT)
            hn_sb_printf(sb, " via %s%s", hn_via_name(in->via), hn_via_variant(in->via, (hn_coll_algo)in->algo));
        break;
    }
    case HN_FORM_P2P:
        hn_sb_append(sb, " ");
        tref(sb, p, &in->a);
        hn_sb_append(sb, in->op == HN_OP_SEND ? " to " : " from ");
        hn_print_expr(sb, p, in->e[0]);
        if (in->via != HN_VIA_DEFAULT)
            hn_sb_printf(sb, " via %s%s", hn_via_name(in->via), hn_via_variant(in->via, (hn_coll_algo)in->algo));
        break;
    case HN_FORM_GROUP: block(sb, p, &in->body, indent, oneline); break;
    case HN_FORM_WAIT:
        if (in->wait_var >= 0)
            hn_sb_printf(sb, " %s", p->names[in->wait_var]);
        break;
    case HN_FORM_COMPUTE:
        hn_sb_append(sb, " ");
        tref(sb, p, &in->a);
        if (in->nargs > 0)
            hn_sb_append(sb, " <-");
        for (int i = 0; i < in->nargs; i++) {
            hn_sb_append(sb, i ? ", " : " ");
            if (in->args[i].is_tensor)
                tref(sb, p, &in->args[i].t);
            else
                hn_print_expr(sb, p, in->args[i].e);
        }
        break;
    case HN_FORM_PIPELINED: pipelined(sb, p, in); break;
    }
}

static void block(hn_strbuf *sb, const hn_program *p, const hn_block *b, int indent, int oneline)
{
    if (oneline) {
        hn_sb_append(sb, " { ... }");
        return;
    }
    hn_sb_append(sb, " {\n");
    for (int i = 0; i < b->n; i++) {
        hn_sb_printf(sb, "%*s", (indent + 1) * 2, "");
        instr(sb, p, b->items[i], indent + 1, 0);
        hn_sb_append(sb, "\n");
    }
    hn_sb_printf(sb, "%*s}", indent * 2, "");
}

void hn_print_instr_short(hn_strbuf *sb, const hn_program *p, const hn_instr *in)
{
    /* generated code is named by the statement it was lowered from */
    if (in->origin >= 0 && in->origin < p->norigins)
        hn_sb_append(sb, p->origins[in->origin]);
    else
        instr(sb, p, in, 0, 1);
}

static void io(hn_strbuf *sb, const hn_program *p, const hn_io *x, const char *kw)
{
    hn_sb_printf(sb, "%s %s : %s", kw, p->names[x->var], hn_dtype_name(x->type.dtype));
    shape(sb, p, &x->type);
    if (x->shard_axis >= 0)
        hn_sb_printf(sb, " shard(axis %d)\n", x->shard_axis);
    else
        hn_sb_append(sb, " replicated\n");
}

char *hn_print_program(const hn_program *p)
{
    hn_strbuf sb;
    hn_sb_init(&sb);
    for (int i = 0; i < p->nparams; i++) {
        hn_sb_printf(&sb, "param %s = ", p->names[p->params[i].var]);
        hn_print_expr(&sb, p, p->params[i].value);
        hn_sb_append(&sb, "\n");
    }
    for (int i = 0; i < p->ninputs; i++)
        io(&sb, p, &p->inputs[i], "input");
    for (int i = 0; i < p->noutputs; i++)
        io(&sb, p, &p->outputs[i], "output");
    if (p->nparams + p->ninputs + p->noutputs > 0 && p->body.n > 0)
        hn_sb_append(&sb, "\n");
    for (int i = 0; i < p->body.n; i++) {
        instr(&sb, p, p->body.items[i], 0, 0);
        hn_sb_append(&sb, "\n");
    }
    if (p->has_reference) {
        hn_sb_append(&sb, "\nreference");
        block(&sb, p, &p->reference, 0, 0);
        hn_sb_append(&sb, "\n");
    }
    return hn_sb_take(&sb);
}
