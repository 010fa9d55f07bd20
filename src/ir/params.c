/* Parameter resolution and input/output shapes: a program's parameter
 * values (defaults, then overrides by name) and the tensor each input and
 * output is on a rank (or unsharded, for --check). Pure: no runtime. */
#include <stdio.h>
#include <string.h>

#include "parse.h"
#include "params.h"

hn_status_t hn_params_resolve(const hn_program *p, int world, int nstreams, int noverrides,
                              const char *const *names, const int64_t *values, int64_t *out,
                              hn_strbuf *err)
{
    int64_t *ivals = hn_calloc((size_t)p->nvars, sizeof(int64_t));
    hn_status_t st = HN_OK;
    if (ivals == NULL)
        return HN_ERR_NOMEM;
    for (int k = 0; k < noverrides; k++) {
        int found = 0;
        for (int i = 0; i < p->nparams; i++)
            found |= strcmp(p->names[p->params[i].var], names[k]) == 0;
        if (!found) {
            hn_sb_printf(err, "%s: error: no parameter named '%s'\n", p->filename, names[k]);
            st = HN_ERR_INVALID;
        }
    }
    for (int i = 0; i < p->nparams && st == HN_OK; i++) {
        const hn_param *pa = &p->params[i];
        int overridden = 0;
        for (int k = noverrides - 1; k >= 0 && !overridden; k--)
            if (strcmp(p->names[pa->var], names[k]) == 0) {
                out[i] = values[k];
                overridden = 1;
            }
        if (!overridden) {
            hn_scalar_env env = {ivals, 0, world, nstreams};
            char msg[160];
            if (hn_expr_eval(pa->value, &env, &out[i], msg, sizeof(msg)) != HN_OK) {
                hn_sb_printf(err, "%s:%d:%d: error: parameter %s: %s\n", p->filename, pa->line,
                             pa->col, p->names[pa->var], msg);
                st = HN_ERR_VERIFY;
            }
        }
        ivals[pa->var] = out[i];
    }
    hn_free(ivals);
    return st;
}

/* "M / world = 64 / 3 does not divide ...: give M a multiple of 3, or
 * write floor(M / world) ..." */
static void inexact_text(const hn_program *p, const hn_inexact *in, hn_strbuf *sb)
{
    const hn_expr *d = in->div;
    int64_t x = in->x, y = in->y, below = x - x % y, above;
    hn_print_expr(sb, p, d);
    hn_sb_printf(sb, " = %lld / %lld does not divide (the program floors it to %lld): ", (long long)x, (long long)y,
                 (long long)in->q);
    if (d->a->kind == HN_EX_VAR) {
        hn_sb_printf(sb, "give %s a multiple of %lld", p->names[d->a->var], (long long)y);
        if (x > 0 && y > 0 && below > 0 && !hn_add_overflows(below, y, &above))
            hn_sb_printf(sb, " (%lld or %lld)", (long long)below, (long long)above);
    } else if (d->a->kind == HN_EX_WORLD && y > 0) {
        hn_sb_printf(sb, "run on a multiple of %lld ranks", (long long)y);
    } else {
        hn_sb_append(sb, "make ");
        hn_print_expr(sb, p, d->a);
        hn_sb_printf(sb, " a multiple of %lld", (long long)y);
    }
    hn_sb_append(sb, ", or write floor(");
    hn_print_expr(sb, p, d);
    hn_sb_append(sb, ") if flooring is meant");
}

hn_status_t hn_io_tensor(const hn_program *p, const hn_io *io, const int64_t *params, int rank,
                         int world, int nstreams, int global, hn_tensor *out, hn_strbuf *err)
{
    int64_t *ivals = hn_calloc((size_t)p->nvars, sizeof(int64_t));
    hn_scalar_env env = {ivals, rank, world, nstreams};
    char msg[256], who[32];
    hn_status_t st = HN_OK;
    if (ivals == NULL)
        return HN_ERR_NOMEM;
    if (global)
        snprintf(who, sizeof(who), "the global tensor");
    else
        snprintf(who, sizeof(who), "rank %d", rank);
    for (int i = 0; i < p->nparams; i++)
        ivals[p->params[i].var] = params[i];
    memset(out, 0, sizeof(*out));
    out->dtype = io->type.dtype;
    out->ndim = io->type.ndim;
    for (int i = 0; i < out->ndim && st == HN_OK; i++) {
        hn_inexact inexact;
        if (hn_expr_eval_exact(io->type.shape[i], &env, &out->shape[i], &inexact, msg, sizeof(msg)) != HN_OK) {
            st = HN_ERR_VERIFY;
        } else if (inexact.div != NULL) {
            /* a shard that silently drops rows: said for the tensor, not a rank */
            hn_strbuf why;
            hn_sb_init(&why);
            inexact_text(p, &inexact, &why);
            hn_sb_printf(err, "%s:%d:%d: error: shape of '%s': %s\n", p->filename, io->line, io->col,
                         p->names[io->var], why.data != NULL ? why.data : "a division leaves a remainder");
            hn_sb_free(&why);
            hn_free(ivals);
            return HN_ERR_VERIFY;
        } else if (out->shape[i] < 0 && (st = HN_ERR_VERIFY) != HN_OK) {
            snprintf(msg, sizeof(msg), "dimension %d is negative (%lld)", i, (long long)out->shape[i]);
        }
    }
    hn_free(ivals);
    /* the unsharded tensor of --check: world shards along the axis */
    if (st == HN_OK && global && io->shard_axis >= 0 &&
        hn_mul_overflows(out->shape[io->shard_axis], world, &out->shape[io->shard_axis])) {
        snprintf(msg, sizeof(msg), "%d shards along axis %d overflow", world, io->shard_axis);
        st = HN_ERR_VERIFY;
    }
    if (st == HN_OK && hn_tensor_make_contiguous(out) != 0) {
        hn_shape_overflow_text(out, msg, sizeof(msg));
        st = HN_ERR_VERIFY;
    }
    if (st != HN_OK)
        hn_sb_printf(err, "%s:%d:%d: error: %s: shape of '%s': %s\n", p->filename, io->line, io->col, who,
                     p->names[io->var], msg);
    return st;
}
