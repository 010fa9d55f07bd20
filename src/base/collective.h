/* What a collective is asked to do, in the words every layer passes on
 * unchanged — the IR's statements, the evaluator's arguments, the
 * communicators, the compute kernels (C and CUDA): its reduction and its
 * algorithm. Plain enumerations, for C and C++ alike. */
#ifndef HN_BASE_COLLECTIVE_H
#define HN_BASE_COLLECTIVE_H

/* A reduction: `op sum` ... `op avg` of a statement, hn_coll_args.redop,
 * the latency path's kernels (ll.h), and as an elementwise op (the compute
 * table's `binary`: HN_RED_SUM adds, HN_RED_PROD multiplies, HN_RED_MAX and
 * HN_RED_MIN take the larger and the smaller; avg is a sum, divided once
 * at the end). */
typedef enum hn_redop { HN_RED_SUM, HN_RED_PROD, HN_RED_MAX, HN_RED_MIN, HN_RED_AVG, HN_RED_COUNT } hn_redop;

/* How a communicator moves a collective or a send/recv: the variant a
 * statement writes after its `via` (`via p2p get`, `via ll twoshot`), a
 * pipelined statement's `protocol=`, hn_coll_args.algo, hn_p2p_op.algo,
 * the latency path's kernels (ll.h).
 *  - HN_ALGO_AUTO: the chooser's pick. A statement's: the evaluator picks
 *    (p2p pushes; the latency path goes one-shot or two-shot by size,
 *    src/model/cost.c) and hands the communicator an explicit one; a
 *    pipelined statement's: the cost model picks put or get. Handed to a
 *    communicator: p2p pushes, the latency path takes one-shot where its
 *    registered buffer holds the call, else two-shot; NCCL and the host
 *    communicator take no algorithm (auto is all they are handed).
 *  - p2p: senders push into the receivers' buffers (put) or receivers
 *    pull from the senders' (get).
 *  - the latency path: one-shot or two-shot (allgather and reduce_scatter
 *    are one push by either name). */
typedef enum hn_coll_algo {
    HN_ALGO_AUTO,
    HN_ALGO_PUSH,
    HN_ALGO_PULL,
    HN_ALGO_ONESHOT,
    HN_ALGO_TWOSHOT,
    HN_ALGO_COUNT
} hn_coll_algo;

#endif
