/* Fuzz target: trace files through the reader (src/trace/trace_read.c),
 * then what `hirnode trace summary` and `trace svg` compute from them —
 * busy time, the overlap figure, the critical path, the picture — for
 * every run and for all runs (make fuzz). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "trace/trace.h"

static void broken(hn_fuzz_file_outcome *out, const char *what, const char *detail)
{
    if (out->broken[0] == '\0')
        snprintf(out->broken, sizeof(out->broken), "%s%s%.300s", what, detail ? ": " : "", detail ? detail : "");
}

/* The figures of one run (-1: all) and ranks, as the tool prints them. */
static void figures(const hn_trace_data *t, int run, hn_fuzz_file_outcome *out)
{
    hn_track_busy *busy = NULL;
    hn_path_seg *seg = NULL;
    hn_overlap ov;
    hn_strbuf svg;
    int n = 0;
    if (hn_trace_busy(t->spans, t->nspans, run, &busy, &n) != HN_OK)
        broken(out, "busy time failed", NULL);
    for (int i = 0; i < n; i++)
        if (busy[i].busy < 0 || busy[i].nspans <= 0)
            broken(out, "a track busy for a negative time or without spans", NULL);
    hn_free(busy);
    for (int r = -1; r < t->nranks && r < 8; r++) {
        if (hn_trace_overlap(t->spans, t->nspans, r, run, &ov) != HN_OK)
            broken(out, "the overlap figure failed", NULL);
        else if (ov.hidden < 0 || ov.hidden > ov.comm)
            broken(out, "more communication hidden than there is", NULL);
    }
    if (run >= 0) {
        if (hn_trace_critical_path(t->spans, t->nspans, t->keys, run, &seg, &n) != HN_OK)
            broken(out, "the critical path failed", NULL);
        for (int i = 0; i < n; i++)
            if (seg[i].from > seg[i].to || (i > 0 && seg[i - 1].to > seg[i].from) || seg[i].span >= t->nspans)
                broken(out, "the critical path is not a sequence of segments in time order", NULL);
        hn_free(seg);
    }
    hn_sb_init(&svg);
    if (hn_trace_svg(t, run, 600, &svg) != HN_OK || svg.data == NULL || strstr(svg.data, "</svg>") == NULL)
        broken(out, "the picture failed", NULL);
    hn_sb_free(&svg);
}

void hn_fuzz_trace(const uint8_t *data, size_t size, hn_fuzz_file_outcome *out)
{
    hn_trace_data t;
    hn_strbuf err;
    hn_status_t st;
    memset(out, 0, sizeof(*out));
    hn_sb_init(&err);
    st = hn_trace_load((const char *)data, size, &t, &err);
    if (st != HN_OK) {
        if (err.data == NULL || err.data[0] == '\0')
            broken(out, "refused without saying why", NULL);
        if (t.nspans != 0 || t.spans != NULL || t.strings != NULL)
            broken(out, "refused, and something is left to free", err.data);
    } else {
        out->accepted = 1;
        for (int i = 0; i < t.nspans; i++)
            if (t.spans[i].end < t.spans[i].begin || t.spans[i].rank >= t.nranks || t.spans[i].run >= t.nruns ||
                (i > 0 && hn_span_order(&t.spans[i - 1], &t.spans[i]) > 0))
                broken(out, "a span out of order or past the trace's ranks and runs", NULL);
        for (int i = 0; i < t.ntracks; i++)
            (void)hn_trace_track_name(&t, t.tracks[i].rank, t.tracks[i].track);
        figures(&t, -1, out);
        for (int run = 0; run < t.nruns && run < 4; run++)
            figures(&t, run, out);
        hn_trace_data_free(&t);
    }
    hn_sb_free(&err);
}

#ifdef HN_FUZZ_ENTRY
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    hn_fuzz_file_outcome out;
    hn_fuzz_trace(data, size, &out);
    if (out.broken[0] != '\0') {
        fprintf(stderr, "fuzz trace: %s\n", out.broken);
        abort();
    }
    return 0;
}
#endif
