/* First-fit blocks of one piece of memory (arena.h). */
#include <string.h>

#include "arena.h"
#include "../base/util.h"

void hn_arena_init(hn_arena *a, void *base, size_t bytes)
{
    memset(a, 0, sizeof(*a));
    a->base = base;
    a->bytes = bytes;
    pthread_mutex_init(&a->mu, NULL);
}

void hn_arena_fini(hn_arena *a)
{
    pthread_mutex_destroy(&a->mu);
    hn_free(a->b);
    a->b = NULL;
    a->n = a->cap = 0;
}

void *hn_arena_take(hn_arena *a, size_t bytes)
{
    size_t at = 0;
    int i;
    void *p = NULL;
    pthread_mutex_lock(&a->mu);
    for (i = 0; i < a->n; i++) {
        if (a->b[i].off - at >= bytes)
            break;
        at = a->b[i].off + a->b[i].bytes;
    }
    if (a->bytes - at >= bytes && hn_grow((void **)&a->b, &a->cap, a->n, sizeof(*a->b)) == 0) {
        memmove(&a->b[i + 1], &a->b[i], (size_t)(a->n - i) * sizeof(*a->b));
        a->b[i].off = at;
        a->b[i].bytes = bytes;
        a->n++;
        p = a->base + at;
    }
    pthread_mutex_unlock(&a->mu);
    return p;
}

void hn_arena_give(hn_arena *a, void *p, size_t *bytes)
{
    size_t off = (size_t)((unsigned char *)p - a->base);
    *bytes = 0;
    pthread_mutex_lock(&a->mu);
    for (int i = 0; i < a->n; i++)
        if (a->b[i].off == off) {
            *bytes = a->b[i].bytes;
            memmove(&a->b[i], &a->b[i + 1], (size_t)(a->n - i - 1) * sizeof(*a->b));
            a->n--;
            break;
        }
    pthread_mutex_unlock(&a->mu);
}
