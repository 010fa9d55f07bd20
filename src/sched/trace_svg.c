/* The timeline of a trace as one standalone SVG file, no dependency: a
 * row per rank and device track, compute and communication in two
 * colours (waits pale), a time axis, the overlap figure in the title;
 * each span's instruction in its tooltip. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "trace.h"

#define LEFT 190   /* the row labels */
#define RIGHT 24
#define TOP 64     /* title and legend */
#define ROW 18
#define RANK_GAP 10
#define BOTTOM 44  /* the axis */

static const char *const fill[HN_SPAN_KINDS] = {"#3b6fb6", "#e8822a", "#d9d9d9", "#999999", "#999999"};

static void put_text(hn_strbuf *sb, const char *s)
{
    for (; *s; s++) {
        switch (*s) {
        case '&': hn_sb_append(sb, "&amp;"); break;
        case '<': hn_sb_append(sb, "&lt;"); break;
        case '>': hn_sb_append(sb, "&gt;"); break;
        case '"': hn_sb_append(sb, "&quot;"); break;
        case '\'': hn_sb_append(sb, "&apos;"); break;
        default:
            /* XML 1.0 has no place for other control characters */
            if ((unsigned char)*s >= 0x20 || *s == '\t' || *s == '\n')
                hn_sb_appendn(sb, s, 1);
        }
    }
}

/* A time in the unit that suits `scale` (the tick step), in ns. */
static void fmt_time(char *buf, size_t n, double ns, double scale)
{
    if (scale >= 1e6)
        snprintf(buf, n, "%g ms", ns / 1e6);
    else if (scale >= 1e3)
        snprintf(buf, n, "%g us", ns / 1e3);
    else
        snprintf(buf, n, "%g ns", ns);
}

/* Ticks every 1, 2 or 5 x 10^k ns, about eight of them. */
static double tick_step(double range)
{
    double raw = range / 8, mag = pow(10, floor(log10(raw > 0 ? raw : 1)));
    return raw <= mag ? mag : raw <= 2 * mag ? 2 * mag : raw <= 5 * mag ? 5 * mag : 10 * mag;
}

typedef struct row {
    int rank, track;
} row;

hn_status_t hn_trace_svg(const hn_trace_data *t, int run, int width, hn_strbuf *out)
{
    row *rows = hn_malloc((size_t)(t->ntracks + 1) * sizeof(*rows));
    int nrows = 0, height, y, ranks_seen = 0;
    int64_t t0 = INT64_MAX, t1 = INT64_MIN;
    double scale, step;
    hn_overlap ov;
    hn_status_t st;
    char a[48], b[48];
    if (rows == NULL)
        return HN_ERR_NOMEM;
    if ((st = hn_trace_overlap(t->spans, t->nspans, -1, run, &ov)) != HN_OK) {
        hn_free(rows);
        return st;
    }
    if (width < LEFT + RIGHT + 100)
        width = LEFT + RIGHT + 100;
    /* rows: the device tracks with spans in the picture, in (rank, track) order */
    for (int i = 0; i < t->nspans; i++) {
        const hn_span *s = &t->spans[i];
        if (run >= 0 && s->run != run)
            continue;
        if (s->kind == HN_SPAN_RUN || hn_span_on_device(s->kind)) {
            t0 = HN_MIN(t0, s->begin);
            t1 = HN_MAX(t1, s->end);
        }
        if (hn_span_on_device(s->kind) &&
            (nrows == 0 || rows[nrows - 1].rank != s->rank || rows[nrows - 1].track != s->track)) {
            ranks_seen += nrows == 0 || rows[nrows - 1].rank != s->rank;
            rows[nrows].rank = s->rank;
            rows[nrows++].track = s->track;
        }
    }
    if (t0 > t1)
        t0 = t1 = 0;
    if (t1 == t0)
        t1 = t0 + 1;
    scale = (double)(width - LEFT - RIGHT) / (double)(t1 - t0);
    height = TOP + nrows * ROW + (ranks_seen > 0 ? ranks_seen - 1 : 0) * RANK_GAP + BOTTOM;
    hn_sb_printf(out, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
                      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\" "
                      "font-family=\"sans-serif\" font-size=\"11\">\n"
                      "<rect x=\"0\" y=\"0\" width=\"%d\" height=\"%d\" fill=\"white\"/>\n",
                 width, height, width, height, width, height);
    /* title: what, and the overlap figure */
    hn_sb_append(out, "<text x=\"10\" y=\"20\" font-size=\"14\" font-weight=\"bold\">");
    put_text(out, t->program != NULL ? t->program : "trace");
    hn_sb_printf(out, " \xc2\xb7 %d rank%s, %s backend", t->nranks, t->nranks == 1 ? "" : "s",
                 t->backend != NULL ? t->backend : "?");
    if (run >= 0)
        hn_sb_printf(out, ", run %d", run);
    if (ov.comm > 0)
        hn_sb_printf(out, " \xe2\x80\x94 overlap %.1f%%: of %.1f us of communication, %.1f us hidden under compute",
                     100.0 * hn_overlap_figure(&ov), (double)ov.comm / 1e3, (double)ov.hidden / 1e3);
    else
        hn_sb_append(out, " \xe2\x80\x94 overlap: no communication");
    hn_sb_append(out, "</text>\n");
    /* legend */
    {
        static const char *const label[3] = {"compute", "communication", "wait"};
        for (int k = 0; k < 3; k++) {
            hn_sb_printf(out, "<rect x=\"%d\" y=\"32\" width=\"12\" height=\"12\" fill=\"%s\"/>"
                              "<text x=\"%d\" y=\"42\">%s</text>\n", 10 + k * 130, fill[k], 26 + k * 130, label[k]);
        }
    }
    /* rows, drawn in one pass over the spans (sorted by rank and track) */
    y = TOP - ROW;
    for (int i = 0, r = -1; i < t->nspans; i++) {
        const hn_span *s = &t->spans[i];
        double x, w;
        if (!hn_span_on_device(s->kind) || (run >= 0 && s->run != run))
            continue;
        if (r < 0 || rows[r].rank != s->rank || rows[r].track != s->track) {
            r++;
            y += ROW;
            if (r > 0 && rows[r].rank != rows[r - 1].rank)
                y += RANK_GAP;
            if (r == 0 || rows[r].rank != rows[r - 1].rank)
                hn_sb_printf(out, "<line x1=\"10\" x2=\"%d\" y1=\"%d\" y2=\"%d\" stroke=\"#bbbbbb\"/>\n",
                             width - RIGHT, y - RANK_GAP / 2, y - RANK_GAP / 2);
            hn_sb_printf(out, "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" fill=\"%s\"/>\n", LEFT, y,
                         width - LEFT - RIGHT, ROW, r % 2 ? "#f4f4f4" : "#fbfbfb");
            hn_sb_printf(out, "<text x=\"10\" y=\"%d\">rank %d \xc2\xb7 ", y + ROW - 5, s->rank);
            put_text(out, hn_trace_track_name(t, s->rank, s->track));
            hn_sb_append(out, "</text>\n");
        }
        x = LEFT + (double)(s->begin - t0) * scale;
        w = (double)(s->end - s->begin) * scale;
        hn_sb_printf(out, "<rect class=\"%s\" x=\"%.2f\" y=\"%d\" width=\"%.2f\" height=\"%d\" fill=\"%s\">"
                          "<title>", s->kind == HN_SPAN_COMPUTE ? "compute" : s->kind == HN_SPAN_COMM ? "comm" : "wait",
                     x, y + (s->kind == HN_SPAN_WAIT ? 6 : 2), w < 0.5 ? 0.5 : w, s->kind == HN_SPAN_WAIT ? 6 : ROW - 4,
                     fill[s->kind]);
        put_text(out, s->text);
        hn_sb_printf(out, " (%.3f us, run %d) ", (double)(s->end - s->begin) / 1e3, s->run);
        put_text(out, s->src);
        hn_sb_append(out, "</title></rect>\n");
    }
    y += ROW;
    /* the time axis, from the picture's start */
    step = tick_step((double)(t1 - t0));
    hn_sb_printf(out, "<line x1=\"%d\" x2=\"%d\" y1=\"%d\" y2=\"%d\" stroke=\"black\"/>\n", LEFT, width - RIGHT,
                 y + 8, y + 8);
    for (double v = 0; v <= (double)(t1 - t0) + 1e-9; v += step) {
        double x = LEFT + v * scale;
        fmt_time(a, sizeof(a), v, step);
        hn_sb_printf(out, "<line x1=\"%.2f\" x2=\"%.2f\" y1=\"%d\" y2=\"%d\" stroke=\"black\"/>"
                          "<text x=\"%.2f\" y=\"%d\" text-anchor=\"middle\">%s</text>\n",
                     x, x, y + 8, y + 13, x, y + 26, a);
    }
    fmt_time(b, sizeof(b), (double)(t1 - t0), step);
    hn_sb_printf(out, "<text x=\"%d\" y=\"%d\" text-anchor=\"end\" fill=\"#555555\">time from the first span; "
                      "the picture spans %s</text>\n</svg>\n", width - RIGHT, y + 40, b);
    hn_free(rows);
    return out->failed ? HN_ERR_NOMEM : HN_OK;
}
