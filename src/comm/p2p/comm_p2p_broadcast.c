/* The p2p communicator's broadcast: the root and every member directly —
 * the root copies into each member's buffer (put), or each member pulls
 * from the root's (get). */
#include "comm_p2p_int.h"

/* Broadcast, put: the root copies to every other member directly. */
void hn_p2p_broadcast_put(ctx *c, int me, int root, const void *send, void *recv, size_t cb)
{
    hn_comm_team *t = c->t;
    int n = t->base.n;
    uint64_t g = ++t->m[me].slot_ops, slot = g % SLOTS;
    uint32_t v = (uint32_t)g;
    if (me != root) {
        mbox_post(c->o, &t->sh[me]->mbox[slot], g, recv);
        signal_flag(c, root, slot_flag(t, slot, me), v); /* my buffer is free */
        wait_flag(c, root, slot_flag(t, slot, n), v);
        return;
    }
    copy(c, recv, send, cb);
    for (int p = 0; p < n && c->st == HN_OK; p++) {
        void *dst = NULL;
        if (p == root)
            continue;
        if ((c->st = hn_p2p_mbox_take(c->w, &t->sh[p]->mbox[slot], g, &dst, c->o, "broadcast", t->base.ranks[p])) !=
            HN_OK)
            return;
        wait_flag(c, p, slot_flag(t, slot, p), v);
        copy(c, dst, send, cb);
        signal_flag(c, p, slot_flag(t, slot, n), v);
    }
}

/* Broadcast, get: every member pulls from the root's buffer; the root's
 * operation ends when all have. */
void hn_p2p_broadcast_get(ctx *c, int me, int root, const void *send, void *recv, size_t cb)
{
    hn_comm_team *t = c->t;
    int n = t->base.n;
    uint64_t g = ++t->m[me].slot_ops, slot = g % SLOTS;
    uint32_t v = (uint32_t)g;
    if (me == root) {
        copy(c, recv, send, cb);
        mbox_post(c->o, &t->sh[me]->mbox[slot], g, (void *)send);
        for (int p = 0; p < n; p++)
            if (p != root)
                signal_flag(c, p, slot_flag(t, slot, n), v); /* the data is ready */
        for (int p = 0; p < n; p++)
            if (p != root)
                wait_flag(c, p, slot_flag(t, slot, p), v); /* p has pulled it */
        return;
    }
    {
        void *src = NULL;
        if ((c->st = hn_p2p_mbox_take(c->w, &t->sh[root]->mbox[slot], g, &src, c->o, "broadcast",
                                      t->base.ranks[root])) != HN_OK)
            return;
        wait_flag(c, root, slot_flag(t, slot, n), v);
        copy(c, recv, src, cb);
        signal_flag(c, root, slot_flag(t, slot, me), v);
    }
}
