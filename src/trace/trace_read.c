/* Reading a trace file back: the strict JSON reader, then the events
 * hirnode writes (complete events of the five categories, track names)
 * into spans, their strings and match keys interned. */
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../base/json.h"
#include "trace.h"

/* Strings interned into one table: the same text is stored once. */
typedef struct intern {
    char **str; /* by id */
    int n, cap;
    int *slot;  /* hash slots: id + 1, 0 empty */
    int nslots;
} intern;

static uint64_t hash(const char *s)
{
    uint64_t h = 1469598103934665603ull;
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

static int intern_rehash(intern *t)
{
    int n = t->nslots ? t->nslots * 2 : 256;
    int *slot = hn_calloc((size_t)n, sizeof(int));
    if (slot == NULL)
        return -1;
    for (int id = 0; id < t->n; id++) {
        size_t k = (size_t)(hash(t->str[id]) & (uint64_t)(n - 1));
        while (slot[k] != 0)
            k = (k + 1) & (size_t)(n - 1);
        slot[k] = id + 1;
    }
    hn_free(t->slot);
    t->slot = slot;
    t->nslots = n;
    return 0;
}

/* The id of s, added if new; -1 when out of memory. */
static int intern_id(intern *t, const char *s)
{
    size_t k;
    if ((t->n + 1) * 2 > t->nslots && intern_rehash(t) != 0)
        return -1;
    k = (size_t)(hash(s) & (uint64_t)(t->nslots - 1));
    while (t->slot[k] != 0) {
        if (strcmp(t->str[t->slot[k] - 1], s) == 0)
            return t->slot[k] - 1;
        k = (k + 1) & (size_t)(t->nslots - 1);
    }
    if (hn_grow((void **)&t->str, &t->cap, t->n, sizeof(char *)) != 0 || (t->str[t->n] = hn_strdup(s)) == NULL)
        return -1;
    t->slot[k] = t->n + 1;
    return t->n++;
}

/* The hash slots go; the strings stay, handed over by the caller. */
static void intern_done(intern *t) { hn_free(t->slot); }

typedef struct loader {
    hn_trace_data *d;
    intern strings, keys;
    int spans_cap, keys_cap, tracks_cap;
    hn_strbuf *err;
} loader;

static hn_status_t bad(loader *l, int event, const char *what)
{
    if (l->err != NULL)
        hn_sb_printf(l->err, "event %d: %s", event, what);
    return HN_ERR_PARSE;
}

/* Bounds that keep every figure of a trace finite and its loops short: a
 * file may say anything, and `trace summary` loops over ranks and runs. */
#define MAX_RANK 65535
#define MAX_RUN 16777215
#define MAX_US 1e11 /* |ts| and dur in microseconds: some 28 hours */

static int as_int(const hn_json *v, int lo, int hi, int *out)
{
    if (v == NULL || v->type != HN_JSON_NUMBER || v->num != floor(v->num) || v->num < lo || v->num > hi)
        return 0;
    *out = (int)v->num;
    return 1;
}

/* a string kept with the trace, or NULL when out of memory */
static const char *keep(loader *l, const char *s)
{
    int id = intern_id(&l->strings, s);
    return id < 0 ? NULL : l->strings.str[id];
}

static hn_status_t add_track(loader *l, int rank, int track, const char *name)
{
    hn_trace_data *d = l->d;
    for (int i = 0; i < d->ntracks; i++)
        if (d->tracks[i].rank == rank && d->tracks[i].track == track) {
            if (name != NULL && d->tracks[i].name == NULL && (d->tracks[i].name = hn_strdup(name)) == NULL)
                return HN_ERR_NOMEM;
            return HN_OK;
        }
    if (hn_grow((void **)&d->tracks, &l->tracks_cap, d->ntracks, sizeof(*d->tracks)) != 0)
        return HN_ERR_NOMEM;
    d->tracks[d->ntracks].rank = rank;
    d->tracks[d->ntracks].track = track;
    d->tracks[d->ntracks].name = name != NULL ? hn_strdup(name) : NULL;
    if (name != NULL && d->tracks[d->ntracks].name == NULL)
        return HN_ERR_NOMEM;
    d->ntracks++;
    return HN_OK;
}

/* The match keys of a communication: words of its "match" string. */
static hn_status_t add_keys(loader *l, hn_span *s, const char *match)
{
    hn_trace_data *d = l->d;
    char word[256];
    s->key0 = d->nkeys;
    s->nkeys = 0;
    while (*match != '\0') {
        size_t n = strcspn(match, " ");
        int id;
        if (n > 0) {
            if (n >= sizeof(word))
                return HN_ERR_PARSE;
            memcpy(word, match, n);
            word[n] = '\0';
            if ((id = intern_id(&l->keys, word)) < 0 ||
                hn_grow((void **)&d->keys, &l->keys_cap, s->key0 + s->nkeys, sizeof(int)) != 0)
                return HN_ERR_NOMEM;
            d->keys[s->key0 + s->nkeys++] = id;
        }
        match += n;
        match += *match == ' ';
    }
    d->nkeys = s->key0 + s->nkeys;
    return HN_OK;
}

static const char *const cats[HN_SPAN_KINDS] = {"compute", "comm", "wait", "issue", "run"};

static hn_status_t add_span(loader *l, const hn_json *ev, int i)
{
    hn_trace_data *d = l->d;
    const char *cat = hn_json_str(ev, "cat", ""), *match;
    const hn_json *args = hn_json_get(ev, "args"), *ts = hn_json_get(ev, "ts"), *dur = hn_json_get(ev, "dur");
    hn_span *s;
    int kind = -1;
    hn_status_t st;
    for (int k = 0; k < HN_SPAN_KINDS; k++)
        if (strcmp(cat, cats[k]) == 0)
            kind = k;
    if (kind < 0)
        return HN_OK; /* another tool's events: not ours to read */
    if (hn_grow((void **)&d->spans, &l->spans_cap, d->nspans, sizeof(*d->spans)) != 0)
        return HN_ERR_NOMEM;
    s = &d->spans[d->nspans];
    memset(s, 0, sizeof(*s));
    s->kind = (hn_span_kind)kind;
    s->id = s->dep = s->instr = -1;
    if (!as_int(hn_json_get(ev, "pid"), 0, MAX_RANK, &s->rank) ||
        !as_int(hn_json_get(ev, "tid"), 0, MAX_RANK, &s->track))
        return bad(l, i, "pid and tid must be integers >= 0 (up to 65535)");
    if (ts == NULL || ts->type != HN_JSON_NUMBER || dur == NULL || dur->type != HN_JSON_NUMBER || dur->num < 0 ||
        fabs(ts->num) > MAX_US || dur->num > MAX_US)
        return bad(l, i, "ts and dur must be numbers, dur >= 0 (microseconds, up to 1e11)");
    if (args == NULL || args->type != HN_JSON_OBJECT || !as_int(hn_json_get(args, "run"), 0, MAX_RUN, &s->run))
        return bad(l, i, "args.run must be an integer >= 0 (up to 16777215)");
    if (hn_json_get(ev, "name") == NULL || hn_json_get(ev, "name")->type != HN_JSON_STRING)
        return bad(l, i, "name must be a string");
    /* microseconds with nanosecond digits: exact in ns */
    s->begin = llround(ts->num * 1000.0);
    s->end = s->begin + llround(dur->num * 1000.0);
    if (hn_json_get(args, "id") != NULL && !as_int(hn_json_get(args, "id"), 0, INT_MAX, &s->id))
        return bad(l, i, "args.id must be an integer >= 0");
    if (hn_json_get(args, "dep") != NULL && !as_int(hn_json_get(args, "dep"), -1, INT_MAX, &s->dep))
        return bad(l, i, "args.dep must be an integer >= -1");
    if (hn_json_get(args, "instr") != NULL && !as_int(hn_json_get(args, "instr"), 0, INT_MAX, &s->instr))
        return bad(l, i, "args.instr must be an integer >= 0");
    if (hn_span_on_device(s->kind) && s->id < 0)
        return bad(l, i, "a device span needs args.id");
    if ((s->name = keep(l, hn_json_str(ev, "name", ""))) == NULL ||
        (s->text = keep(l, hn_json_str(args, "text", ""))) == NULL ||
        (s->src = keep(l, hn_json_str(args, "src", ""))) == NULL)
        return HN_ERR_NOMEM;
    match = hn_json_str(args, "match", "");
    if ((st = add_keys(l, s, match)) != HN_OK)
        return st == HN_ERR_PARSE ? bad(l, i, "a match key is too long") : st;
    d->nruns = HN_MAX(d->nruns, s->run + 1);
    d->nranks = HN_MAX(d->nranks, s->rank + 1);
    if (s->kind == HN_SPAN_RUN && d->program == NULL && hn_json_str(args, "program", NULL) != NULL &&
        (d->program = hn_strdup(hn_json_str(args, "program", ""))) == NULL)
        return HN_ERR_NOMEM;
    d->nspans++;
    return add_track(l, s->rank, s->track, NULL);
}

static int by_track_time(const void *a, const void *b)
{
    return hn_span_order(a, b);
}

static int by_track(const void *a, const void *b)
{
    const hn_trace_track *x = a, *y = b;
    if (x->rank != y->rank)
        return x->rank < y->rank ? -1 : 1;
    return x->track < y->track ? -1 : x->track > y->track;
}

/* Whether any sum of up to nspans lengths, each at most the trace's extent
 * (what the figures add up), fits in int64 nanoseconds. */
static int sums_fit(const hn_trace_data *d)
{
    int64_t lo = INT64_MAX, hi = INT64_MIN;
    for (int i = 0; i < d->nspans; i++) {
        lo = HN_MIN(lo, d->spans[i].begin);
        hi = HN_MAX(hi, d->spans[i].end);
    }
    return d->nspans == 0 || hi - lo <= INT64_MAX / d->nspans;
}

/* A device track's spans, sorted, do not overlap: each starts after the
 * one before it ended (what the critical path and the busy time assume).
 * Says which two overlap into err. */
static hn_status_t one_at_a_time(const hn_trace_data *d, hn_strbuf *err)
{
    const hn_span *last = NULL;
    for (int i = 0; i < d->nspans; i++) {
        const hn_span *s = &d->spans[i];
        if (!hn_span_on_device(s->kind))
            continue;
        if (last != NULL && last->rank == s->rank && last->track == s->track && last->end > s->begin) {
            if (err != NULL)
                hn_sb_printf(err, "rank %d, track %d: spans %d and %d overlap", s->rank, s->track, last->id, s->id);
            return HN_ERR_PARSE;
        }
        last = s;
    }
    return HN_OK;
}

static hn_status_t load_events(loader *l, const hn_json *root)
{
    const hn_json *events = hn_json_get(root, "traceEvents"), *other = hn_json_get(root, "otherData");
    hn_status_t st = HN_OK;
    if (events == NULL || events->type != HN_JSON_ARRAY) {
        if (l->err != NULL)
            hn_sb_append(l->err, "no traceEvents array");
        return HN_ERR_PARSE;
    }
    if (hn_json_str(other, "hirnode", NULL) == NULL) {
        if (l->err != NULL)
            hn_sb_append(l->err, "not a hirnode trace (no otherData.hirnode)");
        return HN_ERR_PARSE;
    }
    if ((l->d->backend = hn_strdup(hn_json_str(other, "backend", "?"))) == NULL)
        return HN_ERR_NOMEM;
    if (hn_json_get(other, "ranks") != NULL && !as_int(hn_json_get(other, "ranks"), 0, MAX_RANK + 1, &l->d->nranks)) {
        if (l->err != NULL)
            hn_sb_append(l->err, "otherData.ranks must be an integer from 0 to 65536");
        return HN_ERR_PARSE;
    }
    for (int i = 0; i < events->n && st == HN_OK; i++) {
        const hn_json *ev = &events->items[i];
        const char *ph = hn_json_str(ev, "ph", NULL);
        if (ev->type != HN_JSON_OBJECT || ph == NULL)
            return bad(l, i, "an event is an object with a string ph");
        if (strcmp(ph, "X") == 0) {
            st = add_span(l, ev, i);
        } else if (strcmp(ph, "M") == 0 && strcmp(hn_json_str(ev, "name", ""), "thread_name") == 0) {
            int rank, track;
            const char *name = hn_json_str(hn_json_get(ev, "args"), "name", NULL);
            if (!as_int(hn_json_get(ev, "pid"), 0, MAX_RANK, &rank) ||
                !as_int(hn_json_get(ev, "tid"), 0, MAX_RANK, &track) || name == NULL)
                return bad(l, i, "thread_name needs pid, tid and args.name");
            st = add_track(l, rank, track, name);
        }
    }
    if (st == HN_OK && !sums_fit(l->d)) {
        if (l->err != NULL)
            hn_sb_append(l->err, "the spans' times are too far apart for their number: their sums would overflow");
        return HN_ERR_PARSE;
    }
    /* qsort of nothing: its array may be NULL, which qsort may not take */
    if (st == HN_OK && l->d->nspans > 0)
        qsort(l->d->spans, (size_t)l->d->nspans, sizeof(hn_span), by_track_time);
    if (st == HN_OK && l->d->ntracks > 0)
        qsort(l->d->tracks, (size_t)l->d->ntracks, sizeof(hn_trace_track), by_track);
    if (st == HN_OK && (st = one_at_a_time(l->d, l->err)) != HN_OK && l->err != NULL)
        hn_sb_append(l->err, ": a stream runs one thing at a time (not a trace hirnode writes)");
    return st;
}

hn_status_t hn_trace_load(const char *text, size_t len, hn_trace_data *out, hn_strbuf *err)
{
    loader l;
    hn_json *root = NULL;
    hn_status_t st;
    memset(out, 0, sizeof(*out));
    memset(&l, 0, sizeof(l));
    l.d = out;
    l.err = err;
    if ((st = hn_json_parse(text, len, &root, err)) != HN_OK)
        return st;
    st = load_events(&l, root);
    hn_json_free(root);
    intern_done(&l.keys);
    intern_done(&l.strings);
    out->strings = l.strings.str;
    out->nstrings = l.strings.n;
    out->key_names = l.keys.str;
    out->nkey_names = l.keys.n;
    if (st != HN_OK) {
        if (st == HN_ERR_NOMEM && err != NULL)
            hn_sb_append(err, "out of memory");
        hn_trace_data_free(out);
    }
    return st;
}

hn_status_t hn_trace_load_file(const char *path, hn_trace_data *out, hn_strbuf *err)
{
    char *text = NULL;
    size_t len = 0;
    hn_status_t st;
    memset(out, 0, sizeof(*out));
    if ((st = hn_file_read(path, "a trace", HN_TRACE_MAX_BYTES, &text, &len, err)) != HN_OK)
        return st;
    st = hn_trace_load(text, len, out, err);
    hn_free(text);
    return st;
}

void hn_trace_data_free(hn_trace_data *t)
{
    for (int i = 0; i < t->nstrings; i++)
        hn_free(t->strings[i]);
    for (int i = 0; i < t->nkey_names; i++)
        hn_free(t->key_names[i]);
    hn_free(t->key_names);
    for (int i = 0; i < t->ntracks; i++)
        hn_free(t->tracks[i].name);
    hn_free(t->strings);
    hn_free(t->tracks);
    hn_free(t->spans);
    hn_free(t->keys);
    hn_free(t->backend);
    hn_free(t->program);
    memset(t, 0, sizeof(*t));
}

const char *hn_trace_track_name(const hn_trace_data *t, int rank, int track)
{
    for (int i = 0; i < t->ntracks; i++)
        if (t->tracks[i].rank == rank && t->tracks[i].track == track)
            return t->tracks[i].name != NULL ? t->tracks[i].name : "?";
    return "?";
}
