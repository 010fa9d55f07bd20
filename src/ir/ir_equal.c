/* Structural equality of programs, ignoring source positions (ir.h:
 * hn_prog_equal). */
#include <string.h>

#include "ir.h"

/* Variables are slots; programs are compared by the names behind them. */
typedef struct eq_ctx {
    const hn_program *pa, *pb;
} eq_ctx;

static int name_equal(const eq_ctx *c, int a, int b)
{
    if (a < 0 || b < 0)
        return a == b;
    return strcmp(c->pa->names[a], c->pb->names[b]) == 0;
}

static int expr_eq(const eq_ctx *c, const hn_expr *a, const hn_expr *b)
{
    if (a == NULL || b == NULL)
        return a == b;
    if (a->kind != b->kind)
        return 0;
    if (a->kind == HN_EX_VAR)
        return name_equal(c, a->var, b->var);
    if (a->kind == HN_EX_INT)
        return a->ival == b->ival;
    if (a->kind == HN_EX_FLOAT)
        return a->fval == b->fval;
    if (a->kind == HN_EX_BIN && a->op != b->op)
        return 0;
    return expr_eq(c, a->a, b->a) && expr_eq(c, a->b, b->b);
}

static int tref_eq(const eq_ctx *c, const hn_tref *a, const hn_tref *b)
{
    if (!name_equal(c, a->var, b->var) || a->nidx != b->nidx)
        return 0;
    for (int i = 0; i < a->nidx; i++)
        if (!expr_eq(c, a->idx[i], b->idx[i]))
            return 0;
    return 1;
}

static int type_eq(const eq_ctx *c, const hn_type *a, const hn_type *b)
{
    if (a->dtype != b->dtype || a->ndim != b->ndim)
        return 0;
    for (int i = 0; i < a->ndim; i++)
        if (!expr_eq(c, a->shape[i], b->shape[i]))
            return 0;
    return 1;
}

static int block_eq(const eq_ctx *c, const hn_block *a, const hn_block *b);

/* An instruction's parts, or what one without them holds (hn_instr_new). */
static const hn_tref no_tref = {-1, 0, NULL, 0, 0};
static const hn_type no_type;

static const hn_tref *part_a(const hn_instr *in) { return hn_instr_has_operands(in) ? &in->a : &no_tref; }
static const hn_tref *part_b(const hn_instr *in) { return hn_instr_has_all(in) ? &in->b : &no_tref; }
static const hn_type *part_type(const hn_instr *in) { return hn_instr_has_all(in) ? &in->type : &no_type; }
static const hn_expr *part_sref(const hn_instr *in) { return hn_instr_has_streamref(in) ? in->sref_index : NULL; }
static int part_sref_var(const hn_instr *in) { return hn_instr_has_streamref(in) ? in->sref_var : -1; }
static int part_wait_var(const hn_instr *in) { return hn_instr_has_streamref(in) ? in->wait_var : -1; }
static int part_nteam(const hn_instr *in) { return hn_instr_has_all(in) ? in->nteam : 0; }

static int instr_eq(const eq_ctx *c, const hn_instr *a, const hn_instr *b)
{
    if (a->op != b->op || !name_equal(c, a->dst, b->dst) || !tref_eq(c, part_a(a), part_a(b)) ||
        !tref_eq(c, part_b(a), part_b(b)) || !type_eq(c, part_type(a), part_type(b)) ||
        !name_equal(c, part_sref_var(a), part_sref_var(b)) || !expr_eq(c, part_sref(a), part_sref(b)) ||
        a->redop != b->redop || a->via != b->via || a->algo != b->algo || a->team_kind != b->team_kind ||
        a->strategy != b->strategy || a->on_streams != b->on_streams ||
        part_nteam(a) != part_nteam(b) || !name_equal(c, part_wait_var(a), part_wait_var(b)) ||
        a->nargs != b->nargs)
        return 0;
    for (int i = 0; i < 3; i++)
        if (!expr_eq(c, a->e[i], b->e[i]))
            return 0;
    /* nargs is 0 where the operands are missing */
    for (int i = 0; i < part_nteam(a); i++)
        if (!expr_eq(c, a->team[i], b->team[i]))
            return 0;
    for (int i = 0; i < a->nargs; i++)
        if (a->args[i].is_tensor != b->args[i].is_tensor ||
            !tref_eq(c, &a->args[i].t, &b->args[i].t) || !expr_eq(c, a->args[i].e, b->args[i].e))
            return 0;
    return block_eq(c, &a->body, &b->body) && block_eq(c, &a->orelse, &b->orelse);
}

static int block_eq(const eq_ctx *c, const hn_block *a, const hn_block *b)
{
    if (a->n != b->n)
        return 0;
    for (int i = 0; i < a->n; i++)
        if (!instr_eq(c, a->items[i], b->items[i]))
            return 0;
    return 1;
}

static int io_eq(const eq_ctx *c, const hn_io *a, int na, const hn_io *b, int nb)
{
    if (na != nb)
        return 0;
    for (int i = 0; i < na; i++)
        if (!name_equal(c, a[i].var, b[i].var) || a[i].shard_axis != b[i].shard_axis ||
            !type_eq(c, &a[i].type, &b[i].type))
            return 0;
    return 1;
}

int hn_prog_equal(const hn_program *a, const hn_program *b)
{
    eq_ctx c = {a, b};
    if (a->nparams != b->nparams || a->has_reference != b->has_reference)
        return 0;
    for (int i = 0; i < a->nparams; i++)
        if (!name_equal(&c, a->params[i].var, b->params[i].var) ||
            !expr_eq(&c, a->params[i].value, b->params[i].value))
            return 0;
    return io_eq(&c, a->inputs, a->ninputs, b->inputs, b->ninputs) &&
           io_eq(&c, a->outputs, a->noutputs, b->outputs, b->noutputs) &&
           block_eq(&c, &a->body, &b->body) && block_eq(&c, &a->reference, &b->reference);
}
