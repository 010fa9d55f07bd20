/* The p2p communicator's send/recv: a group of sends and receives, posted
 * together, on per-(sender, receiver) sequence numbers and the pair flags
 * of the team of all ranks. */
#include "comm_p2p_int.h"

/* A group of sends and receives. Put: receivers post their buffers and say
 * they are ready; senders copy into them and say the data has arrived.
 * Get: senders post their buffers and say the data is ready; receivers copy
 * from them and say they are done; senders wait for that. Inside a capture
 * a get is done as a put, as the rings do (comm_p2p.c): a replayed pull
 * stalled there too, on 4 H200s (the same bytes land either way; every
 * rank's part of a group is captured, so both ends agree). */
hn_status_t hn_p2p_sendrecv(hn_comm_world *w, int rank, const hn_p2p_op *ops, int n, hn_dstream *s, const hn_origin *o)
{
    hn_comm_team *t = w->base.teams.all;
    ctx c = {w, t, rank, s, o, HN_OK};
    int N = w->base.nranks;
    uint64_t *seq = hn_calloc((size_t)n + 1, sizeof(uint64_t));
    if (seq == NULL)
        return HN_ERR_NOMEM;
    if (hn_p2p_refuse_foreign_capture(w, s, o, "send/recv") != HN_OK) {
        hn_free(seq);
        return HN_ERR_UNSUPPORTED;
    }
    if (t == NULL) {
        hn_free(seq);
        hn_origin_fail(o, HN_ERR_RUNTIME, "p2p: no team of all ranks for send/recv");
        return HN_ERR_RUNTIME;
    }
    for (int i = 0; i < n; i++) /* sequence numbers per (sender, receiver), from 1 */
        seq[i] = ops[i].is_send ? ++w->send_seq[rank * N + ops[i].peer] : ++w->recv_seq[ops[i].peer * N + rank];
    if (n > 0 && ops[0].algo == HN_ALGO_PULL && (o == NULL || o->graph == NULL)) {
        /* 1: every send posts its buffer and tells its receiver */
        for (int i = 0; i < n; i++) {
            uint64_t slot = seq[i] % SLOTS;
            if (!ops[i].is_send)
                continue;
            mbox_post(o, &w->pair_mbox[((size_t)rank * N + ops[i].peer) * SLOTS + slot], seq[i], ops[i].buf);
            signal_flag(&c, ops[i].peer, pair_flag(t, rank, slot, PAIR_ARRIVED), (uint32_t)seq[i]);
        }
        /* 2: every receive pulls its data and says so */
        for (int i = 0; i < n && c.st == HN_OK; i++) {
            uint64_t slot = seq[i] % SLOTS;
            void *src = NULL;
            if (ops[i].is_send)
                continue;
            c.st = hn_p2p_mbox_take(w, &w->pair_mbox[((size_t)ops[i].peer * N + rank) * SLOTS + slot], seq[i], &src, o,
                                    "recv", ops[i].peer);
            wait_flag(&c, ops[i].peer, pair_flag(t, ops[i].peer, slot, PAIR_ARRIVED), (uint32_t)seq[i]);
            copy(&c, ops[i].buf, src, ops[i].bytes);
            signal_flag(&c, ops[i].peer, pair_flag(t, rank, slot, PAIR_READY), (uint32_t)seq[i]);
        }
        /* 3: a send's buffer is free once its receiver has pulled */
        for (int i = 0; i < n; i++)
            if (ops[i].is_send)
                wait_flag(&c, ops[i].peer, pair_flag(t, ops[i].peer, seq[i] % SLOTS, PAIR_READY), (uint32_t)seq[i]);
        hn_free(seq);
        return c.st;
    }
    /* 1: every receive posts its buffer and tells its sender */
    for (int i = 0; i < n; i++) {
        uint64_t slot = seq[i] % SLOTS;
        if (ops[i].is_send)
            continue;
        mbox_post(o, &w->pair_mbox[((size_t)ops[i].peer * N + rank) * SLOTS + slot], seq[i], ops[i].buf);
        signal_flag(&c, ops[i].peer, pair_flag(t, rank, slot, PAIR_READY), (uint32_t)seq[i]);
    }
    /* 2: every send copies into its receiver's buffer */
    for (int i = 0; i < n && c.st == HN_OK; i++) {
        uint64_t slot = seq[i] % SLOTS;
        void *dst = NULL;
        if (!ops[i].is_send)
            continue;
        c.st = hn_p2p_mbox_take(w, &w->pair_mbox[((size_t)rank * N + ops[i].peer) * SLOTS + slot], seq[i], &dst, o,
                                "send", ops[i].peer);
        wait_flag(&c, ops[i].peer, pair_flag(t, ops[i].peer, slot, PAIR_READY), (uint32_t)seq[i]);
        copy(&c, dst, ops[i].buf, ops[i].bytes);
        signal_flag(&c, ops[i].peer, pair_flag(t, rank, slot, PAIR_ARRIVED), (uint32_t)seq[i]);
    }
    /* 3: every receive waits for its data */
    for (int i = 0; i < n; i++)
        if (!ops[i].is_send)
            wait_flag(&c, ops[i].peer, pair_flag(t, ops[i].peer, seq[i] % SLOTS, PAIR_ARRIVED), (uint32_t)seq[i]);
    hn_free(seq);
    return c.st;
}
