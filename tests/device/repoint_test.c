/* Tests of src/device/repoint.c on images made here: pointers into moved
 * bindings learned and moved; a change no move explains, a pointer that
 * did not move with its binding, and moves that change alignment or
 * overlap, or move a binding never seen moving, refused. */
#include <string.h>

#include "device/repoint.h"
#include "../test.h"

enum { A = 0, B = 1, C = 2, NB = 3 };

/* Three bindings of 4096 bytes at `base` + 0x10000 * j. */
static void bindings(hn_moved *m, uint64_t from, uint64_t to)
{
    for (int j = 0; j < NB; j++) {
        m[j].from = from + 0x10000u * (unsigned)j;
        m[j].to = to + 0x10000u * (unsigned)j;
        m[j].bytes = 4096;
    }
}

/* Two nodes: [kind, A + 16, 7, B + 4096 (B's end), C + 8] and [kind, 42, A].
 * `at` is where the bindings lie. */
static void images(hn_images *im, uint64_t at)
{
    uint64_t n0[5] = {1, at + 16, 7, at + 0x10000 + 4096, at + 0x20000 + 8};
    uint64_t n1[3] = {2, 42, at};
    CU_ASSERT_EQUAL(hn_images_add(im, n0, sizeof(n0)), 0);
    CU_ASSERT_EQUAL(hn_images_add(im, n1, sizeof(n1)), 0);
}

static const uint64_t X = 0x7f0000000000u, Y = 0x7f1000000000u, Z = 0x7f2000000000u;

static void learned(hn_repoint *r)
{
    hn_images a = {0}, b = {0};
    hn_moved m[NB];
    const char *why = NULL;
    images(&a, X);
    images(&b, Y);
    bindings(m, X, Y);
    CU_ASSERT_EQUAL(hn_repoint_learn(r, &a, m, NB, &why), 0); /* nothing before: not learned */
    CU_ASSERT_PTR_NOT_NULL(why);
    CU_ASSERT_EQUAL(hn_repoint_learn(r, &b, m, NB, &why), 1);
    CU_ASSERT_EQUAL(r->nslots, 4);
    hn_images_free(&a);
    hn_images_free(&b);
}

static void test_learn_and_move(void)
{
    hn_repoint r = {0};
    hn_images want = {0};
    hn_moved m[NB];
    unsigned char changed[2];
    const char *why = NULL;
    learned(&r);
    bindings(m, Y, Z);
    CU_ASSERT_EQUAL(hn_repoint_move(&r, m, NB, changed, &why), 1);
    CU_ASSERT(changed[0] && changed[1]);
    images(&want, Z);
    CU_ASSERT_EQUAL(r.cur.nw, want.nw);
    CU_ASSERT_EQUAL(memcmp(r.cur.w, want.w, want.nw * sizeof(uint64_t)), 0);
    /* only C moves: node 1 untouched */
    bindings(m, Z, Z);
    m[C].to = Z + 0x20000 + 0x100000;
    CU_ASSERT_EQUAL(hn_repoint_move(&r, m, NB, changed, &why), 1);
    CU_ASSERT(changed[0] && !changed[1]);
    CU_ASSERT_EQUAL(r.cur.w[4], Z + 0x20000 + 0x100000 + 8);
    CU_ASSERT_EQUAL(r.cur.w[2], 7);
    /* moves that do not start where the graph is: refused, nothing changed */
    bindings(m, X, Y);
    CU_ASSERT_EQUAL(hn_repoint_move(&r, m, NB, changed, &why), 0);
    CU_ASSERT_EQUAL(r.cur.w[1], Z + 16);
    hn_images_free(&want);
    hn_repoint_free(&r);
}

static void test_refused_moves(void)
{
    hn_repoint r = {0};
    hn_moved m[NB];
    unsigned char changed[2];
    const char *why = NULL;
    learned(&r);
    /* another alignment */
    bindings(m, Y, Z);
    m[B].to += 64;
    CU_ASSERT_EQUAL(hn_repoint_move(&r, m, NB, changed, &why), 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(why, "alignment"));
    /* two bindings that did not overlap made to */
    bindings(m, Y, Z);
    m[B].to = m[A].to + 1024;
    CU_ASSERT_EQUAL(hn_repoint_move(&r, m, NB, changed, &why), 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(why, "overlap"));
    /* made adjacent (one's end the other's start): no byte shared, moved */
    bindings(m, Y, Z);
    m[B].to = m[A].to + 4096;
    CU_ASSERT_EQUAL(hn_repoint_move(&r, m, NB, changed, &why), 1);
    CU_ASSERT_EQUAL(r.cur.w[3], Z + 4096 + 4096);
    bindings(m, Z, Y);
    m[B].from = Z + 4096;
    CU_ASSERT_EQUAL(hn_repoint_move(&r, m, NB, changed, &why), 1);
    CU_ASSERT_EQUAL(r.cur.w[3], Y + 0x10000 + 4096);
    /* the same move at another count of bindings */
    bindings(m, Y, Z);
    CU_ASSERT_EQUAL(hn_repoint_move(&r, m, NB - 1, changed, &why), 0);
    CU_ASSERT_EQUAL(r.cur.w[1], Y + 16);
    hn_repoint_free(&r);
}

/* Learning only certifies the bindings it saw move. */
static void test_certified(void)
{
    hn_repoint r = {0};
    hn_images a = {0}, b = {0};
    hn_moved m[NB];
    unsigned char changed[2];
    const char *why = NULL;
    images(&a, X);
    b = (hn_images){0};
    CU_ASSERT_EQUAL(hn_images_add(&b, (uint64_t[5]){1, Y + 16, 7, X + 0x10000 + 4096, X + 0x20000 + 8}, 40), 0);
    CU_ASSERT_EQUAL(hn_images_add(&b, (uint64_t[3]){2, 42, Y}, 24), 0);
    r.cur = a;
    bindings(m, X, X);
    m[A].to = Y; /* only A moves */
    CU_ASSERT_EQUAL(hn_repoint_learn(&r, &b, m, NB, &why), 1);
    bindings(m, Y, Z);
    m[A].from = Y;
    m[B].from = X + 0x10000;
    m[C].from = X + 0x20000;
    CU_ASSERT_EQUAL(hn_repoint_move(&r, m, NB, changed, &why), 0); /* B and C never seen moving */
    m[B].to = m[B].from;
    m[C].to = m[C].from;
    CU_ASSERT_EQUAL(hn_repoint_move(&r, m, NB, changed, &why), 1);
    CU_ASSERT_EQUAL(r.cur.w[1], Z + 16);
    CU_ASSERT_EQUAL(r.cur.w[3], X + 0x10000 + 4096);
    hn_images_free(&b);
    hn_repoint_free(&r);
}

/* What learning refuses: a change no move explains, a pointer into a
 * moved binding that stayed, images of other shapes. */
static void test_refused_learning(void)
{
    hn_moved m[NB];
    const char *why;
    bindings(m, X, Y);
    for (int c = 0; c < 3; c++) {
        hn_repoint r = {0};
        hn_images a = {0}, b = {0};
        uint64_t n0[5] = {1, Y + 16, 7, Y + 0x10000 + 4096, Y + 0x20000 + 8};
        images(&a, X);
        r.cur = a;
        if (c == 0)
            n0[2] = 8; /* a value changed */
        else if (c == 1)
            n0[1] = X + 16; /* a pointer into A that stayed */
        CU_ASSERT_EQUAL(hn_images_add(&b, n0, c == 2 ? 32 : sizeof(n0)), 0);
        CU_ASSERT_EQUAL(hn_images_add(&b, (uint64_t[3]){2, 42, Y}, 24), 0);
        why = NULL;
        CU_ASSERT_EQUAL(hn_repoint_learn(&r, &b, m, NB, &why), 0);
        CU_ASSERT_PTR_NOT_NULL(why);
        CU_ASSERT_FALSE(r.learned);
        CU_ASSERT_EQUAL(r.bad_node, 0);
        hn_images_free(&b);
        hn_repoint_free(&r);
    }
}

/* A binding's end is where the next one begins: a pointer there that stays
 * points into the next one (which stayed), not a pointer left behind. */
static void test_adjacent(void)
{
    hn_repoint r = {0};
    hn_images a = {0}, b = {0};
    hn_moved m[2] = {{X, Y, 4096}, {X + 4096, X + 4096, 4096}};
    unsigned char changed[1];
    const char *why = NULL;
    CU_ASSERT_EQUAL(hn_images_add(&a, (uint64_t[3]){X + 8, X + 4096, 5}, 24), 0);
    CU_ASSERT_EQUAL(hn_images_add(&b, (uint64_t[3]){Y + 8, X + 4096, 5}, 24), 0);
    r.cur = a;
    CU_ASSERT_EQUAL(hn_repoint_learn(&r, &b, m, 2, &why), 1);
    CU_ASSERT_EQUAL(r.nslots, 2);
    /* both move apart later: the second word follows the second binding */
    m[0] = (hn_moved){Y, Z, 4096};
    m[1] = (hn_moved){X + 4096, X + 0x100000 + 4096, 4096};
    CU_ASSERT_EQUAL(hn_repoint_move(&r, m, 2, changed, &why), 0); /* the second was never seen moving */
    m[1].to = m[1].from;
    CU_ASSERT_EQUAL(hn_repoint_move(&r, m, 2, changed, &why), 1);
    CU_ASSERT_EQUAL(r.cur.w[0], Z + 8);
    CU_ASSERT_EQUAL(r.cur.w[1], X + 4096);
    hn_images_free(&b);
    hn_repoint_free(&r);
}

/* A binding that stayed in the last learning is not moved, though an
 * earlier learning saw it move: a word at its end (whatever lies next, an
 * epoch word, say) became a slot of it then. */
static void test_certified_by_the_last_learning(void)
{
    hn_repoint r = {0};
    hn_images a = {0}, b = {0}, c = {0};
    hn_moved m[2] = {{X, Y, 4096}, {X + 0x10000, Y + 0x10000, 4096}};
    unsigned char changed[1];
    const char *why = NULL;
    /* word 0 points into A, word 1 at A's end: another buffer, which never moves */
    CU_ASSERT_EQUAL(hn_images_add(&a, (uint64_t[2]){X + 8, X + 4096}, 16), 0);
    CU_ASSERT_EQUAL(hn_images_add(&b, (uint64_t[2]){Y + 8, X + 4096}, 16), 0);
    r.cur = a;
    CU_ASSERT_EQUAL(hn_repoint_learn(&r, &b, m, 2, &why), 1); /* A and B moved */
    /* learned again with A back at X and staying, B moving */
    m[0] = (hn_moved){X, X, 4096};
    m[1] = (hn_moved){Y + 0x10000, Z + 0x10000, 4096};
    r.cur.w[0] = X + 8; /* as a capture at X would hold */
    CU_ASSERT_EQUAL(hn_images_add(&c, (uint64_t[2]){X + 8, X + 4096}, 16), 0);
    hn_images_free(&r.cur);
    CU_ASSERT_EQUAL(hn_images_add(&r.cur, (uint64_t[2]){X + 8, X + 4096}, 16), 0);
    CU_ASSERT_EQUAL(hn_repoint_learn(&r, &c, m, 2, &why), 1);
    /* A moves now: refused, the word at its end left alone */
    m[0] = (hn_moved){X, Z, 4096};
    m[1] = (hn_moved){Z + 0x10000, Z + 0x10000, 4096};
    CU_ASSERT_EQUAL(hn_repoint_move(&r, m, 2, changed, &why), 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(why, "did not see move"));
    CU_ASSERT_EQUAL(r.cur.w[1], X + 4096);
    hn_images_free(&b);
    hn_repoint_free(&r);
}

void hn_suite_repoint(void)
{
    static CU_TestInfo tests[] = {
        {"pointers into moved bindings learned, then moved (and only they)", test_learn_and_move},
        {"moves to another alignment or overlap, or of other bindings, refused", test_refused_moves},
        {"a binding never seen moving is not moved", test_certified},
        {"a change no move explains, a pointer left behind, another shape: nothing learned", test_refused_learning},
        {"a pointer where one binding ends and the next begins", test_adjacent},
        {"only the bindings the last learning saw move are moved", test_certified_by_the_last_learning},
        CU_TEST_INFO_NULL,
    };
    CU_SuiteInfo suites[] = {{"device/repoint", NULL, NULL, NULL, NULL, tests}, CU_SUITE_INFO_NULL};
    CU_register_suites(suites);
}
