/* A device's memory in a world across processes: one piece, handed out
 * first fit in blocks (offsets sorted), as both backends need it. */
#ifndef HN_ARENA_H
#define HN_ARENA_H

#include <pthread.h>
#include <stddef.h>

typedef struct hn_arena_block {
    size_t off, bytes;
} hn_arena_block;

typedef struct hn_arena {
    unsigned char *base;
    size_t bytes;
    pthread_mutex_t mu;
    hn_arena_block *b;
    int n, cap;
} hn_arena;

void hn_arena_init(hn_arena *a, void *base, size_t bytes);
void hn_arena_fini(hn_arena *a);
/* bytes (a multiple of 256) of a, first fit: the block's start, or NULL
 * when no free part is large enough. Any thread. */
void *hn_arena_take(hn_arena *a, size_t bytes);
/* The block at p back; its size into *bytes (0: p is no block of a). */
void hn_arena_give(hn_arena *a, void *p, size_t *bytes);

#endif
