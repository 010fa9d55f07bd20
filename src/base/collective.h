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

#endif
