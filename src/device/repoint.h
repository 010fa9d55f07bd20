/* Rebinding a captured graph in place (device.h graph_repoint), the part
 * every backend shares. A backend describes each node of its graph as an
 * image: 8-byte words holding what the node does (its kind, function,
 * launch shape, arguments, copy addresses). A rebind moves bindings
 * (hn_moved); a pointer into a binding moves with it.
 *
 * Learning: the graph is captured again with moved bindings, and the new
 * images are compared word by word with the old. Every difference must be
 * a pointer into a binding that moved, at the same offset of the new one;
 * a word that points into a binding that moved but stayed, or any other
 * difference, means the backend's nodes hold the buffers in a way the
 * images do not show (a kernel picked for them, an address encoded, a
 * table of the backend's) and nothing is learned. What is learned: the
 * words that are pointers (slots), each with the bindings that explain it,
 * and which bindings this learning saw move (certified: every use of them
 * is a word that moved; a binding that stayed certifies nothing, since a
 * word at its end may point into whatever lies next). A later rebind moves
 * the slots of the images and nothing else, when every binding it moves is
 * certified and the candidates of every slot agree; otherwise the graph is
 * captured again (and learns again). */
#ifndef HN_REPOINT_H
#define HN_REPOINT_H

#include <stddef.h>
#include <stdint.h>

#include "device.h"

/* Most bindings one slot may be explained by (bindings that overlap). */
#define HN_SLOT_CANDS 4

typedef struct hn_images {
    uint64_t *w;  /* every node's words, one after another */
    size_t *at;   /* [n + 1]: node i is w[at[i] .. at[i + 1]) */
    int n;
    size_t nw, wcap;
    int ncap;
} hn_images;

typedef struct hn_slot {
    uint32_t node, word;            /* word: index into w */
    int n;                          /* candidates */
    uint32_t j[HN_SLOT_CANDS];      /* the bindings (index into the moves) */
    uint64_t off[HN_SLOT_CANDS];    /* the pointer's offset from each binding's start */
} hn_slot;

typedef struct hn_repoint {
    hn_images cur;             /* the graph as it runs now */
    int learned;               /* slots and certified hold */
    int nm;                    /* bindings of the moves learned from */
    unsigned char *certified;  /* [nm] */
    hn_slot *slots;
    int nslots, scap;
    int bad_node, bad_word; /* where the last learning failed (-1: nowhere or not a word): for logs */
} hn_repoint;

/* Appends a node's image: len bytes (zero-padded to whole words). 0, or
 * -1 out of memory. */
int hn_images_add(hn_images *im, const void *bytes, size_t len);
void hn_images_free(hn_images *im);

/* Learns from next (the new capture's images, taken over by r whatever
 * happens: r->cur is next afterwards) against r->cur (the graph before),
 * the bindings moved by m[0 .. nm). 1: learned; 0: not (why: a short
 * reason, for the log); -1: out of memory (nothing learned). */
int hn_repoint_learn(hn_repoint *r, hn_images *next, const hn_moved *m, int nm, const char **why);

/* Moves the slots of r->cur by m. 1: done, changed[node] set for every
 * node rewritten (changed: [r->cur.n], zeroed here); 0: not possible (not
 * learned, other bindings, a move not certified, candidates that now
 * disagree, a slot that no longer holds what it should; *why says which):
 * nothing changed. changed NULL: only whether it can (1 or 0), nothing
 * changed either way. */
int hn_repoint_move(hn_repoint *r, const hn_moved *m, int nm, unsigned char *changed, const char **why);

void hn_repoint_free(hn_repoint *r);

#endif
