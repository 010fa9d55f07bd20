/* Rebinding a captured graph in place: learning which words of its nodes
 * are pointers into the bindings, and moving them (repoint.h). */
#include "repoint.h"

#include <string.h>

/* Alignment a binding keeps when it moves in place: kernels and
 * libraries pick their code for the alignment of the pointers they get
 * (vector widths, cuBLASLt's algorithms, NCCL's protocols), so a move may
 * not change it below this. */
#define KEEP_ALIGN 256u

int hn_images_add(hn_images *im, const void *bytes, size_t len)
{
    size_t words = (len + 7) / 8;
    if (hn_grow((void **)&im->at, &im->ncap, im->n + 1, sizeof(*im->at)) != 0)
        return -1;
    if (im->nw + words > im->wcap) {
        size_t wcap = im->wcap ? 2 * im->wcap : 1024;
        uint64_t *w;
        while (wcap < im->nw + words)
            wcap *= 2;
        if ((w = hn_realloc(im->w, wcap * sizeof(*w))) == NULL)
            return -1;
        im->w = w;
        im->wcap = wcap;
    }
    if (im->n == 0)
        im->at[0] = 0;
    if (words > 0) {
        im->w[im->nw + words - 1] = 0;
        memcpy(im->w + im->nw, bytes, len);
    }
    im->nw += words;
    im->at[++im->n] = im->nw;
    return 0;
}

void hn_images_free(hn_images *im)
{
    hn_free(im->w);
    hn_free(im->at);
    memset(im, 0, sizeof(*im));
}

static int inside(const hn_moved *m, uint64_t v)
{
    return m->bytes > 0 && v >= m->from && v - m->from <= m->bytes;
}

static int add_slot(hn_repoint *r, const hn_slot *s)
{
    if (hn_grow((void **)&r->slots, &r->scap, r->nslots, sizeof(*r->slots)) != 0)
        return -1;
    r->slots[r->nslots++] = *s;
    return 0;
}

/* Word w (of node `node`): old before, new_ after. 1 explained (a slot
 * added where it points into a binding), 0 not, -1 out of memory. */
static int learn_word(hn_repoint *r, uint32_t node, uint32_t w, uint64_t old, uint64_t new_, const hn_moved *m,
                      int nm, const char **why)
{
    hn_slot s = {.node = node, .word = w};
    int moved_in = 0;
    for (int j = 0; j < nm; j++) {
        uint64_t off;
        if (!inside(&m[j], old))
            continue;
        off = old - m[j].from;
        if (m[j].to + off != new_) { /* not a pointer into j, or one that did not move with it */
            moved_in |= m[j].from != m[j].to && off < m[j].bytes; /* j's end may be where another begins */
            continue;
        }
        if (s.n == HN_SLOT_CANDS) {
            *why = "a word points into more bindings than are kept";
            return 0;
        }
        s.j[s.n] = (uint32_t)j;
        s.off[s.n++] = off;
    }
    if (s.n == 0) {
        if (old == new_ && !moved_in)
            return 1; /* no pointer into a binding */
        *why = old == new_ ? "a word pointing into a binding that moved stayed (not a pointer, or one the node "
                             "reaches in a way the images do not show)"
                           : "a word changed that no move explains";
        return 0;
    }
    return add_slot(r, &s) < 0 ? -1 : 1;
}

int hn_repoint_learn(hn_repoint *r, hn_images *next, const hn_moved *m, int nm, const char **why)
{
    hn_images old = r->cur;
    int ok = 1;
    *why = NULL;
    r->cur = *next;
    memset(next, 0, sizeof(*next));
    r->nslots = 0;
    r->bad_node = r->bad_word = -1;
    if (r->nm != nm || r->certified == NULL) {
        hn_free(r->certified);
        r->nm = 0;
        r->learned = 0;
        if ((r->certified = hn_calloc((size_t)nm + 1, 1)) == NULL) {
            hn_images_free(&old);
            return -1;
        }
        r->nm = nm;
    }
    if (old.n != r->cur.n) {
        *why = old.n == 0 ? "the graph's nodes were not read before" : "the new capture has other nodes";
        ok = 0;
    }
    for (int i = 0; i < r->cur.n && ok == 1; i++) {
        size_t a = old.at[i], b = r->cur.at[i], len = r->cur.at[i + 1] - b;
        if (old.at[i + 1] - a != len) {
            *why = "a node's image changed its length";
            ok = 0;
        }
        for (size_t k = 0; k < len && ok == 1; k++)
            if ((ok = learn_word(r, (uint32_t)i, (uint32_t)(b + k), old.w[a + k], r->cur.w[b + k], m, nm, why)) == 0) {
                r->bad_node = i;
                r->bad_word = (int)k;
            }
        if (ok == 0 && r->bad_node < 0)
            r->bad_node = i;
    }
    hn_images_free(&old);
    if (ok != 1) {
        r->nslots = 0;
        r->learned = 0;
        memset(r->certified, 0, (size_t)nm);
        return ok;
    }
    /* exactly the bindings this learning saw move: a binding that stayed
     * may have taken a word that only lies at its end for a slot */
    for (int j = 0; j < nm; j++)
        r->certified[j] = m[j].from != m[j].to && m[j].bytes > 0;
    r->learned = 1;
    return 1;
}

/* Whether two bindings share a byte (one's end where the other begins
 * does not count: a pointer there is told apart by its candidates). */
static int overlap(uintptr_t a, size_t an, uintptr_t b, size_t bn)
{
    return a < b + bn && b < a + an;
}

/* The moves keep every binding's alignment and how bindings overlap. */
static int same_layout(const hn_moved *m, int nm)
{
    for (int j = 0; j < nm; j++) {
        if (m[j].bytes == 0)
            continue;
        if ((m[j].from - m[j].to) % KEEP_ALIGN != 0)
            return 0;
        for (int k = j + 1; k < nm; k++) {
            int was = overlap(m[j].from, m[j].bytes, m[k].from, m[k].bytes);
            if (m[k].bytes == 0)
                continue;
            if (was != overlap(m[j].to, m[j].bytes, m[k].to, m[k].bytes) ||
                (was && m[j].from - m[k].from != m[j].to - m[k].to))
                return 0;
        }
    }
    return 1;
}

int hn_repoint_move(hn_repoint *r, const hn_moved *m, int nm, unsigned char *changed, const char **why)
{
    uint64_t *val;
    *why = !r->learned ? "nothing learned" : r->nm != nm ? "other bindings" : !same_layout(m, nm)
           ? "a buffer at another alignment (mod 256), or buffers that overlap otherwise" : NULL;
    for (int j = 0; j < nm && *why == NULL; j++)
        if (m[j].from != m[j].to && !r->certified[j])
            *why = "a buffer moves that the last learning did not see move";
    if (*why != NULL)
        return 0;
    if ((val = hn_malloc(((size_t)r->nslots + 1) * sizeof(*val))) == NULL) {
        *why = "out of memory";
        return 0;
    }
    for (int i = 0; i < r->nslots; i++) {
        const hn_slot *s = &r->slots[i];
        val[i] = m[s->j[0]].to + s->off[0];
        for (int c = 0; c < s->n; c++)
            if (m[s->j[c]].bytes == 0 && m[s->j[c]].from != m[s->j[c]].to) {
                *why = "a buffer the graph's work points into moves to or from one of no bytes";
                hn_free(val);
                return 0;
            } else if (r->cur.w[s->word] != m[s->j[c]].from + s->off[c] || m[s->j[c]].to + s->off[c] != val[i]) {
                *why = r->cur.w[s->word] != m[s->j[c]].from + s->off[c]
                       ? "a pointer is not where the graph's buffers say"
                       : "a pointer into buffers that overlapped no longer says which";
                hn_free(val);
                return 0;
            }
    }
    if (changed == NULL) { /* only whether it can */
        hn_free(val);
        return 1;
    }
    memset(changed, 0, (size_t)r->cur.n);
    for (int i = 0; i < r->nslots; i++)
        if (r->cur.w[r->slots[i].word] != val[i]) {
            r->cur.w[r->slots[i].word] = val[i];
            changed[r->slots[i].node] = 1;
        }
    hn_free(val);
    return 1;
}

void hn_repoint_free(hn_repoint *r)
{
    hn_images_free(&r->cur);
    hn_free(r->certified);
    hn_free(r->slots);
    memset(r, 0, sizeof(*r));
}
