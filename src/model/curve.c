/* The machine profile's collective curves: which curve answers a kind,
 * communicator and team size (and mode), and its time at a size — what
 * both the pipelines' model (cost.c) and `via auto` (via_auto.c) read. */
#include <math.h>
#include <stdlib.h>

#include "cost.h"

const hn_cost_curve *hn_cost_curve_of(const hn_cost_profile *p, hn_coll_kind kind, hn_cost_engine engine, int n)
{
    const hn_cost_curve *best = NULL;
    for (int c = 0; c < p->ncurves; c++) {
        const hn_cost_curve *cv = &p->curves[c];
        int d, bd;
        if (cv->kind != kind || cv->engine != engine || cv->npoints < 1 || cv->graph)
            continue;
        d = abs(cv->n - n);
        bd = best != NULL ? abs(best->n - n) : 0;
        if (best == NULL || d < bd || (d == bd && cv->n > best->n))
            best = cv;
    }
    if (best == NULL && engine == HN_ENGINE_CE_GET)
        return hn_cost_curve_of(p, kind, HN_ENGINE_CE_PUT, n);
    return best;
}

const hn_cost_curve *hn_cost_curve_exact(const hn_cost_profile *p, hn_coll_kind kind, hn_cost_engine engine, int n,
                                         int graph)
{
    for (int c = 0; c < p->ncurves; c++) {
        const hn_cost_curve *cv = &p->curves[c];
        if (cv->kind == kind && cv->engine == engine && cv->n == n && cv->graph == (graph != 0) && cv->npoints > 0)
            return cv;
    }
    return NULL;
}

double hn_cost_curve_at(const hn_cost_curve *cv, double bytes)
{
    int last = cv->npoints - 1;
    if (bytes <= cv->bytes[0]) /* latency-bound below the smallest size measured */
        return cv->us[0] * 1e-6;
    if (bytes >= cv->bytes[last])
        return cv->us[last] * 1e-6 * bytes / cv->bytes[last];
    for (int i = 0; i < last; i++)
        if (bytes < cv->bytes[i + 1]) {
            double f = log(bytes / cv->bytes[i]) / log(cv->bytes[i + 1] / cv->bytes[i]);
            return exp(log(cv->us[i]) * (1 - f) + log(cv->us[i + 1]) * f) * 1e-6;
        }
    return cv->us[last] * 1e-6;
}
