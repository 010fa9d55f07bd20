/* Tests of src/trace/trace_svg.c: the picture is well-formed XML (a small
 * strict checker below), one rectangle per device span in the right
 * colour, the overlap figure in the title, special characters escaped. */
#include <stdio.h>
#include <string.h>

#include "trace/trace.h"
#include "../test.h"

/* ---- a small strict XML checker: one root element, tags balanced and
 * named alike, attributes quoted and unique, entities known, no '<' or
 * '&' loose in text ---- */

typedef struct xml {
    const char *s;
    size_t i, n;
    int elements;
    char err[160];
} xml;

static int xfail(xml *x, const char *msg)
{
    if (x->err[0] == '\0')
        snprintf(x->err, sizeof(x->err), "at %zu: %s", x->i, msg);
    return 0;
}

static int name_char(int c, int first)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == ':' ||
           (!first && ((c >= '0' && c <= '9') || c == '-' || c == '.'));
}

static size_t xname(xml *x)
{
    size_t start = x->i;
    if (x->i >= x->n || !name_char(x->s[x->i], 1))
        return 0;
    while (x->i < x->n && name_char(x->s[x->i], 0))
        x->i++;
    return x->i - start;
}

static void xspace(xml *x)
{
    while (x->i < x->n && (x->s[x->i] == ' ' || x->s[x->i] == '\n' || x->s[x->i] == '\t' || x->s[x->i] == '\r'))
        x->i++;
}

/* text or an attribute value up to `stop`: entities must be known */
static int xchars(xml *x, char stop)
{
    static const char *const ent[] = {"&amp;", "&lt;", "&gt;", "&quot;", "&apos;"};
    while (x->i < x->n && x->s[x->i] != stop) {
        char c = x->s[x->i];
        if (c == '<' && stop != '<')
            return xfail(x, "'<' in an attribute value");
        if (c == '&') {
            int ok = 0;
            for (int k = 0; k < 5 && !ok; k++)
                if (strncmp(x->s + x->i, ent[k], strlen(ent[k])) == 0) {
                    x->i += strlen(ent[k]);
                    ok = 1;
                }
            if (!ok && x->i + 2 < x->n && x->s[x->i + 1] == '#') {
                size_t j = x->i + 2;
                while (j < x->n && x->s[j] >= '0' && x->s[j] <= '9')
                    j++;
                if (j > x->i + 2 && j < x->n && x->s[j] == ';') {
                    x->i = j + 1;
                    ok = 1;
                }
            }
            if (!ok)
                return xfail(x, "unknown entity");
            continue;
        }
        if ((unsigned char)c < 0x20 && c != '\n' && c != '\t' && c != '\r')
            return xfail(x, "control character");
        x->i++;
    }
    return 1;
}

static int xelement(xml *x, int depth);

/* content of an element, up to and including its end tag */
static int xcontent(xml *x, const char *name, size_t len, int depth)
{
    for (;;) {
        if (!xchars(x, '<'))
            return 0;
        if (x->i >= x->n)
            return xfail(x, "unclosed element");
        if (x->i + 1 < x->n && x->s[x->i + 1] == '/') {
            size_t nlen;
            x->i += 2;
            nlen = xname(x);
            if (nlen != len || strncmp(x->s + x->i - nlen, name, len) != 0)
                return xfail(x, "end tag does not match");
            xspace(x);
            if (x->i >= x->n || x->s[x->i] != '>')
                return xfail(x, "bad end tag");
            x->i++;
            return 1;
        }
        if (!xelement(x, depth + 1))
            return 0;
    }
}

static int xelement(xml *x, int depth)
{
    const char *name, *attrs[64];
    size_t len, alen[64];
    int nattrs = 0;
    if (depth > 64)
        return xfail(x, "too deep");
    if (x->i >= x->n || x->s[x->i] != '<')
        return xfail(x, "expected '<'");
    x->i++;
    name = x->s + x->i;
    if ((len = xname(x)) == 0)
        return xfail(x, "bad element name");
    x->elements++;
    for (;;) {
        size_t before = x->i;
        xspace(x);
        if (x->i < x->n && x->s[x->i] == '/') {
            if (x->i + 1 >= x->n || x->s[x->i + 1] != '>')
                return xfail(x, "bad empty-element tag");
            x->i += 2;
            return 1;
        }
        if (x->i < x->n && x->s[x->i] == '>') {
            x->i++;
            return xcontent(x, name, len, depth);
        }
        if (x->i == before)
            return xfail(x, "attributes need space between them");
        attrs[nattrs] = x->s + x->i;
        if ((alen[nattrs] = xname(x)) == 0)
            return xfail(x, "bad attribute name");
        for (int k = 0; k < nattrs; k++)
            if (alen[k] == alen[nattrs] && strncmp(attrs[k], attrs[nattrs], alen[k]) == 0)
                return xfail(x, "duplicate attribute");
        if (++nattrs == 64)
            return xfail(x, "too many attributes");
        xspace(x);
        if (x->i >= x->n || x->s[x->i] != '=')
            return xfail(x, "expected '='");
        x->i++;
        xspace(x);
        if (x->i >= x->n || (x->s[x->i] != '"' && x->s[x->i] != '\''))
            return xfail(x, "attribute value not quoted");
        {
            char q = x->s[x->i++];
            if (!xchars(x, q) || x->i >= x->n)
                return xfail(x, "unterminated attribute value");
            x->i++;
        }
    }
}

/* 1 if s is a well-formed XML document (err says why not) */
static int xml_ok(const char *s, size_t n, int *elements, char *err, size_t errn)
{
    xml x;
    memset(&x, 0, sizeof(x));
    x.s = s;
    x.n = n;
    if (strncmp(s, "<?xml ", 6) == 0) {
        const char *end = strstr(s, "?>");
        x.i = end != NULL ? (size_t)(end - s) + 2 : n;
    }
    xspace(&x);
    if (xelement(&x, 0)) {
        xspace(&x);
        if (x.i != x.n)
            xfail(&x, "text after the root element");
    }
    snprintf(err, errn, "%s", x.err);
    *elements = x.elements;
    return x.err[0] == '\0';
}

static void test_checker(void)
{
    static const char *ok[] = {"<a/>", "<?xml version=\"1.0\"?>\n<a x=\"1\" y='2'><b>t &amp; &#955;</b><c/></a>\n"};
    static const char *bad[] = {"<a>", "<a></b>", "<a x=1/>", "<a x=\"1\" x=\"2\"/>", "<a>&nbsp;</a>", "<a>1 < 2</a>",
                                "<a/><b/>", "<a x=\"<\"/>", "text", "<a><b></a></b>"};
    char err[160];
    int el;
    for (int i = 0; i < HN_ARRAY_LEN(ok); i++)
        CU_ASSERT_TRUE(xml_ok(ok[i], strlen(ok[i]), &el, err, sizeof(err)));
    for (int i = 0; i < HN_ARRAY_LEN(bad); i++)
        CU_ASSERT_FALSE(xml_ok(bad[i], strlen(bad[i]), &el, err, sizeof(err)));
}

static int count(const char *s, const char *what)
{
    int n = 0;
    for (const char *p = strstr(s, what); p != NULL; p = strstr(p + 1, what))
        n++;
    return n;
}

/* A hand-made trace: two ranks; names and text with characters XML must
 * escape; the overlap figure (rank 0: comm [0, 100) half under compute on
 * track 2) in the title. */
static void test_picture(void)
{
    hn_span s[6];
    hn_trace_track tracks[4] = {{0, 1, "caller <stream>"}, {0, 2, "stream 0"}, {1, 1, "caller stream"},
                                {1, 32, "p2p lane 0"}};
    char prog[] = "a&b.hir", backend[] = "host", err[160];
    hn_trace_data t;
    hn_strbuf sb;
    int el;
    memset(&t, 0, sizeof(t));
    memset(s, 0, sizeof(s));
    for (int i = 0; i < 6; i++) {
        s[i].name = "x";
        s[i].text = "copy A[i < 2] <- \"B\" & C";
        s[i].src = "a&b.hir:1:1";
        s[i].dep = -1;
        s[i].id = i;
    }
    s[0] = (hn_span){0, 0, HN_SPAN_RUN, 0, 200000, 0, -1, -1, -1, 0, 0, "run 0", "", ""};
    s[1].rank = 0, s[1].track = 1, s[1].kind = HN_SPAN_COMM, s[1].begin = 0, s[1].end = 100000;
    s[2].rank = 0, s[2].track = 2, s[2].kind = HN_SPAN_COMPUTE, s[2].begin = 50000, s[2].end = 150000;
    s[3].rank = 1, s[3].track = 1, s[3].kind = HN_SPAN_WAIT, s[3].begin = 0, s[3].end = 10000;
    s[4].rank = 1, s[4].track = 1, s[4].kind = HN_SPAN_COMPUTE, s[4].begin = 10000, s[4].end = 20000;
    s[5].rank = 1, s[5].track = 32, s[5].kind = HN_SPAN_COMM, s[5].begin = 20000, s[5].end = 20000;
    t.spans = s;
    t.nspans = 6;
    t.tracks = tracks;
    t.ntracks = 4;
    t.nranks = 2;
    t.nruns = 1;
    t.program = prog;
    t.backend = backend;
    hn_sb_init(&sb);
    CU_ASSERT_EQUAL_FATAL(hn_trace_svg(&t, -1, 900, &sb), HN_OK);
    if (!xml_ok(sb.data, sb.len, &el, err, sizeof(err)))
        fprintf(stderr, "\n  %s\n", err);
    CU_ASSERT_TRUE(xml_ok(sb.data, sb.len, &el, err, sizeof(err)));
    CU_ASSERT_PTR_NOT_NULL(strstr(sb.data, "a&amp;b.hir"));
    CU_ASSERT_PTR_NOT_NULL(strstr(sb.data, "overlap 50.0%"));
    CU_ASSERT_PTR_NOT_NULL(strstr(sb.data, "caller &lt;stream&gt;"));
    CU_ASSERT_PTR_NOT_NULL(strstr(sb.data, "rank 1 \xc2\xb7 p2p lane 0"));
    CU_ASSERT_EQUAL(count(sb.data, "<rect class=\"compute\""), 2);
    CU_ASSERT_EQUAL(count(sb.data, "<rect class=\"comm\""), 2);
    CU_ASSERT_EQUAL(count(sb.data, "<rect class=\"wait\""), 1);
    CU_ASSERT_EQUAL(count(sb.data, "<title>"), 5);
    CU_ASSERT_EQUAL(count(sb.data, "rank 0 \xc2\xb7"), 2); /* a row per device track */
    CU_ASSERT_EQUAL(count(sb.data, "rank 1 \xc2\xb7"), 2);
    CU_ASSERT_PTR_NOT_NULL(strstr(sb.data, ">0 us<")); /* the axis, in microseconds here */
    CU_ASSERT_PTR_NOT_NULL(strstr(sb.data, ">200 us<"));
    hn_sb_free(&sb);
    /* two traces, one above the other: the same rows twice, one scale
     * (the second, half as long, ends at the middle of the axis) */
    {
        hn_trace_data half = t;
        hn_span hs[6];
        const hn_trace_data *both[2] = {&t, &half};
        int runs[2] = {-1, -1};
        char *second;
        memcpy(hs, s, sizeof(hs));
        for (int i = 0; i < 6; i++) {
            hs[i].begin /= 2;
            hs[i].end /= 2;
        }
        half.spans = hs;
        hn_sb_init(&sb);
        CU_ASSERT_EQUAL_FATAL(hn_trace_svg_stack(both, runs, 2, 900, &sb), HN_OK);
        CU_ASSERT_TRUE(xml_ok(sb.data, sb.len, &el, err, sizeof(err)));
        CU_ASSERT_EQUAL(count(sb.data, "<rect class=\"compute\""), 4);
        CU_ASSERT_EQUAL(count(sb.data, "overlap 50.0%"), 2);
        /* the compute span of rank 0 ends at 150 of 200 us in the first
         * block, 75 in the second: x = 190 + 686 * 50 / 200 .. */
        CU_ASSERT_PTR_NOT_NULL(strstr(sb.data, "class=\"compute\" x=\"361.50\" y=\"86\" width=\"343.00\""));
        second = strstr(sb.data, "a&amp;b.hir \xc2\xb7");
        CU_ASSERT_PTR_NOT_NULL_FATAL(second);
        second = strstr(second + 1, "a&amp;b.hir \xc2\xb7");
        CU_ASSERT_PTR_NOT_NULL_FATAL(second);
        CU_ASSERT_PTR_NOT_NULL(strstr(second, "class=\"compute\" x=\"275.75\""));
        CU_ASSERT_PTR_NOT_NULL(strstr(second, "width=\"171.50\""));
        CU_ASSERT_EQUAL(hn_trace_svg_stack(both, runs, 0, 900, &sb), HN_ERR_INVALID);
        hn_sb_free(&sb);
    }
    /* one run only; and a trace without spans still makes a picture */
    hn_sb_init(&sb);
    CU_ASSERT_EQUAL(hn_trace_svg(&t, 3, 900, &sb), HN_OK);
    CU_ASSERT_TRUE(xml_ok(sb.data, sb.len, &el, err, sizeof(err)));
    CU_ASSERT_EQUAL(count(sb.data, "<rect class="), 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(sb.data, "overlap: no communication"));
    hn_sb_free(&sb);
}

void hn_suite_trace_svg(void)
{
    static CU_TestInfo tests[] = {
        {"the XML checker itself", test_checker},
        {"a hand-made trace's picture, and two stacked", test_picture},
        CU_TEST_INFO_NULL,
    };
    hn_test_add_suite("trace/trace_svg", tests);
}
