/* The figures of a trace, as pure functions over spans: busy time per
 * track, the overlap figure (how much of the communications' time runs
 * under compute on another track of the same rank), and the critical path
 * of a run. docs/TRACING.md defines each. */
#include <stdlib.h>
#include <string.h>

#include "trace.h"

typedef struct interval {
    int64_t b, e;
} interval;

static int by_begin(const void *a, const void *b)
{
    const interval *x = a, *y = b;
    return x->b < y->b ? -1 : x->b > y->b;
}

/* Length of the union of v[0..n) (sorts v). */
static int64_t union_length(interval *v, int n)
{
    int64_t total = 0, cb = 0, ce = 0;
    qsort(v, (size_t)n, sizeof(*v), by_begin);
    for (int i = 0; i < n; i++) {
        if (i == 0 || v[i].b > ce) {
            total += ce - cb;
            cb = v[i].b;
            ce = v[i].e;
        } else if (v[i].e > ce) {
            ce = v[i].e;
        }
    }
    return n > 0 ? total + (ce - cb) : 0;
}

static int selected(const hn_span *s, int rank, int run)
{
    return hn_span_on_device(s->kind) && (rank < 0 || s->rank == rank) && (run < 0 || s->run == run);
}

/* spans by (rank, track, begin) */
static int by_place(const void *a, const void *b, void *ctx)
{
    const hn_span *s = ctx;
    return hn_span_order(&s[*(const int *)a], &s[*(const int *)b]);
}

/* The device spans of (rank, run), as indices sorted by place. */
static hn_status_t select_spans(const hn_span *s, int n, int rank, int run, int **out, int *nout)
{
    int *sel = hn_malloc((size_t)(n + 1) * sizeof(int)), k = 0;
    if (sel == NULL)
        return HN_ERR_NOMEM;
    for (int i = 0; i < n; i++)
        if (selected(&s[i], rank, run))
            sel[k++] = i;
    qsort_r(sel, (size_t)k, sizeof(int), by_place, (void *)s);
    *out = sel;
    *nout = k;
    return HN_OK;
}

hn_status_t hn_trace_busy(const hn_span *s, int n, int run, hn_track_busy **out, int *nout)
{
    int *sel, k, ntracks = 0;
    interval *work;
    hn_track_busy *b;
    hn_status_t st = select_spans(s, n, -1, run, &sel, &k);
    if (st != HN_OK)
        return st;
    work = hn_malloc((size_t)(k + 1) * sizeof(*work));
    b = hn_calloc((size_t)k + 1, sizeof(*b));
    if (work == NULL || b == NULL) {
        hn_free(sel);
        hn_free(work);
        hn_free(b);
        return HN_ERR_NOMEM;
    }
    for (int i = 0; i < k;) {
        int j = i, nw = 0;
        hn_track_busy *t = &b[ntracks++];
        t->rank = s[sel[i]].rank;
        t->track = s[sel[i]].track;
        for (; j < k && s[sel[j]].rank == t->rank && s[sel[j]].track == t->track; j++) {
            const hn_span *x = &s[sel[j]];
            int64_t d = x->end - x->begin;
            t->nspans++;
            if (x->kind == HN_SPAN_WAIT) {
                t->wait += d;
                continue;
            }
            if (x->kind == HN_SPAN_COMPUTE)
                t->compute += d;
            else
                t->comm += d;
            work[nw].b = x->begin;
            work[nw++].e = x->end;
        }
        t->busy = union_length(work, nw);
        i = j;
    }
    hn_free(sel);
    hn_free(work);
    *out = b;
    *nout = ntracks;
    return HN_OK;
}

hn_status_t hn_trace_overlap(const hn_span *s, int n, int rank, int run, hn_overlap *out)
{
    int *sel, k;
    interval *clip;
    hn_status_t st = select_spans(s, n, rank, run, &sel, &k);
    memset(out, 0, sizeof(*out));
    if (st != HN_OK)
        return st;
    if ((clip = hn_malloc((size_t)(k + 1) * sizeof(*clip))) == NULL) {
        hn_free(sel);
        return HN_ERR_NOMEM;
    }
    /* sel is grouped by rank: each communication looks at its own rank's
     * compute spans on the other tracks, clipped to it */
    for (int lo = 0; lo < k;) {
        int hi = lo;
        while (hi < k && s[sel[hi]].rank == s[sel[lo]].rank)
            hi++;
        for (int i = lo; i < hi; i++) {
            const hn_span *c = &s[sel[i]];
            int nc = 0;
            if (c->kind != HN_SPAN_COMM)
                continue;
            out->comm += c->end - c->begin;
            for (int j = lo; j < hi; j++) {
                const hn_span *w = &s[sel[j]];
                if (w->kind != HN_SPAN_COMPUTE || w->track == c->track || w->end <= c->begin || w->begin >= c->end)
                    continue;
                clip[nc].b = HN_MAX(w->begin, c->begin);
                clip[nc++].e = HN_MIN(w->end, c->end);
            }
            out->hidden += union_length(clip, nc);
        }
        lo = hi;
    }
    hn_free(clip);
    hn_free(sel);
    return HN_OK;
}

/* ---- the critical path ---- */

typedef struct path {
    const hn_span *s;
    const int *keys;
    int *sel, n;    /* the run's device spans, by place */
    int *prev;      /* [n]: the position before on the same track, -1 */
    int *byid;      /* positions by (rank, id) */
    int *kpos;      /* positions of (key, position) pairs, by key */
    int *kkey;
    int nk;
    hn_path_seg *seg; /* backwards */
    int nseg, cap;
} path;

static const hn_span *at(const path *p, int pos) { return &p->s[p->sel[pos]]; }

static int by_rank_id(const void *a, const void *b, void *ctx)
{
    const path *p = ctx;
    const hn_span *x = at(p, *(const int *)a), *y = at(p, *(const int *)b);
    if (x->rank != y->rank)
        return x->rank < y->rank ? -1 : 1;
    return x->id < y->id ? -1 : x->id > y->id;
}

/* The position of the span with this id in this rank, -1 if none. */
static int find_id(const path *p, int rank, int id)
{
    int lo = 0, hi = p->n;
    while (lo < hi) {
        int mid = (lo + hi) / 2;
        const hn_span *x = at(p, p->byid[mid]);
        if (x->rank < rank || (x->rank == rank && x->id < id))
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < p->n && at(p, p->byid[lo])->rank == rank && at(p, p->byid[lo])->id == id ? p->byid[lo] : -1;
}

static int by_key(const void *a, const void *b, void *ctx)
{
    const path *p = ctx;
    int x = p->kkey[*(const int *)a], y = p->kkey[*(const int *)b];
    return x < y ? -1 : x > y;
}

/* (key, position) pairs of every communication, sorted by key. */
static hn_status_t index_keys(path *p)
{
    int total = 0, *order;
    for (int i = 0; i < p->n; i++)
        total += at(p, i)->nkeys;
    p->kkey = hn_malloc((size_t)(total + 1) * sizeof(int));
    p->kpos = hn_malloc((size_t)(total + 1) * sizeof(int));
    order = hn_malloc((size_t)(total + 1) * sizeof(int));
    if (p->kkey == NULL || p->kpos == NULL || order == NULL) {
        hn_free(order);
        return HN_ERR_NOMEM;
    }
    for (int i = 0; i < p->n; i++)
        for (int k = 0; k < at(p, i)->nkeys; k++) {
            p->kkey[p->nk] = p->keys[at(p, i)->key0 + k];
            p->kpos[p->nk] = i;
            order[p->nk] = p->nk;
            p->nk++;
        }
    qsort_r(order, (size_t)p->nk, sizeof(int), by_key, p);
    {
        int *kk = hn_malloc((size_t)(total + 1) * sizeof(int)), *kp = hn_malloc((size_t)(total + 1) * sizeof(int));
        if (kk == NULL || kp == NULL) {
            hn_free(kk);
            hn_free(kp);
            hn_free(order);
            return HN_ERR_NOMEM;
        }
        for (int i = 0; i < p->nk; i++) {
            kk[i] = p->kkey[order[i]];
            kp[i] = p->kpos[order[i]];
        }
        hn_free(p->kkey);
        hn_free(p->kpos);
        p->kkey = kk;
        p->kpos = kp;
    }
    hn_free(order);
    return HN_OK;
}

/* Of the other ends of communication `pos`, the one that began last; -1. */
static int last_partner(const path *p, int pos)
{
    const hn_span *c = at(p, pos);
    int best = -1;
    for (int k = 0; k < c->nkeys; k++) {
        int key = p->keys[c->key0 + k], lo = 0, hi = p->nk;
        while (lo < hi) { /* the first pair of the key */
            int mid = (lo + hi) / 2;
            if (p->kkey[mid] < key)
                lo = mid + 1;
            else
                hi = mid;
        }
        for (; lo < p->nk && p->kkey[lo] == key; lo++) {
            int y = p->kpos[lo];
            if (y != pos && (best < 0 || at(p, y)->begin > at(p, best)->begin))
                best = y;
        }
    }
    return best;
}

static int push_seg(path *p, int pos, int64_t from, int64_t to)
{
    if (to <= from)
        return 0;
    if (hn_grow((void **)&p->seg, &p->cap, p->nseg, sizeof(*p->seg)) != 0)
        return -1;
    p->seg[p->nseg].span = pos >= 0 ? p->sel[pos] : -1;
    p->seg[p->nseg].from = from;
    p->seg[p->nseg].to = to;
    p->nseg++;
    return 0;
}

/* Walks back from the span that ends last; see hn_trace_critical_path. */
static hn_status_t walk(path *p, char *visited)
{
    int cur = 0;
    int64_t t;
    for (int i = 1; i < p->n; i++) /* the last to end; ties: the lowest rank, track */
        if (at(p, i)->end > at(p, cur)->end)
            cur = i;
    t = at(p, cur)->end;
    visited[cur] = 1;
    for (;;) {
        const hn_span *c = at(p, cur);
        int pred = p->prev[cur], partner = c->kind == HN_SPAN_COMM ? last_partner(p, cur) : -1, next;
        int64_t release;
        if (c->kind == HN_SPAN_WAIT && c->dep >= 0) {
            int d = find_id(p, c->rank, c->dep);
            if (d >= 0 && (pred < 0 || at(p, d)->end >= at(p, pred)->end))
                pred = d;
        }
        /* what held it: a partner that began later than its predecessor
         * ended, and not after the time the path has reached (a partner
         * that began later held nothing of it) */
        if (partner >= 0 && at(p, partner)->begin > c->begin && at(p, partner)->begin <= t &&
            (pred < 0 || at(p, partner)->begin > at(p, pred)->end)) {
            release = HN_MIN(at(p, partner)->begin, t);
            next = partner;
        } else if (pred >= 0) {
            release = HN_MIN(at(p, pred)->end, t);
            next = pred;
        } else {
            if (push_seg(p, cur, c->begin, t) != 0)
                return HN_ERR_NOMEM;
            return HN_OK;
        }
        if (release > c->begin) { /* it waited for `next` until release */
            if (push_seg(p, cur, release, t) != 0)
                return HN_ERR_NOMEM;
            t = release;
        } else { /* it ran from its begin; before that, idle since `release` */
            if (next == partner) /* the partner came earlier: its own predecessor held it */
                next = pred;
            if (push_seg(p, cur, c->begin, t) != 0 || (next >= 0 && push_seg(p, -1, HN_MIN(at(p, next)->end, c->begin),
                                                                             c->begin) != 0))
                return HN_ERR_NOMEM;
            if (next < 0)
                return HN_OK;
            t = HN_MIN(at(p, next)->end, c->begin);
        }
        if (visited[next])
            return HN_OK;
        visited[next] = 1;
        cur = next;
    }
}

hn_status_t hn_trace_critical_path(const hn_span *s, int n, const int *keys, int run, hn_path_seg **out,
                                   int *nout)
{
    path p;
    char *visited = NULL;
    hn_status_t st;
    memset(&p, 0, sizeof(p));
    p.s = s;
    p.keys = keys;
    *out = NULL;
    *nout = 0;
    if ((st = select_spans(s, n, -1, run, &p.sel, &p.n)) != HN_OK)
        return st;
    p.prev = hn_malloc((size_t)(p.n + 1) * sizeof(int));
    p.byid = hn_malloc((size_t)(p.n + 1) * sizeof(int));
    visited = hn_calloc((size_t)p.n + 1, 1);
    if (p.prev == NULL || p.byid == NULL || visited == NULL) {
        st = HN_ERR_NOMEM;
        goto done;
    }
    for (int i = 0; i < p.n; i++) {
        p.prev[i] = i > 0 && at(&p, i - 1)->rank == at(&p, i)->rank && at(&p, i - 1)->track == at(&p, i)->track
                        ? i - 1 : -1;
        p.byid[i] = i;
    }
    qsort_r(p.byid, (size_t)p.n, sizeof(int), by_rank_id, &p);
    if ((st = index_keys(&p)) != HN_OK || p.n == 0 || (st = walk(&p, visited)) != HN_OK)
        goto done;
    for (int i = 0; i < p.nseg / 2; i++) { /* into time order */
        hn_path_seg tmp = p.seg[i];
        p.seg[i] = p.seg[p.nseg - 1 - i];
        p.seg[p.nseg - 1 - i] = tmp;
    }
    *out = p.seg;
    *nout = p.nseg;
    p.seg = NULL;
done:
    hn_free(p.seg);
    hn_free(visited);
    hn_free(p.sel);
    hn_free(p.prev);
    hn_free(p.byid);
    hn_free(p.kkey);
    hn_free(p.kpos);
    return st;
}
