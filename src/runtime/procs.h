/* A runtime whose world spans processes (one rank per process on this
 * machine): the rendezvous at creation, the watch for processes that die,
 * and the collective end of every run — each process learns whether any
 * failed, recovers with the others and returns the world's first error. */
#ifndef HN_SCHED_PROCS_H
#define HN_SCHED_PROCS_H

#include "../ranks/runtime_int.h"

/* Joins the world of rt (rendezvous directory dir): maps the world's
 * memory and every rank's device memory (device_bytes each, made by the
 * backend's share ops; this rank's into *arena, *arena_bytes), within the
 * runtime's timeout. check_text describes what
 * every process must agree on. Before the devices start; undone by
 * hn_procs_leave. */
hn_status_t hn_procs_join(hn_runtime *rt, const char *dir, const char *check_text, size_t device_bytes, void **arena,
                          size_t *arena_bytes, hn_strbuf *why);
/* The nodes of a world of `world` ranks across processes: HIRNODE_NODES,
 * else torchrun's WORLD_SIZE / LOCAL_WORLD_SIZE or Slurm's SLURM_NNODES
 * where their world is this one, else 1. HN_ERR_INVALID (why) when the
 * ranks do not spread evenly. */
hn_status_t hn_procs_nodes(int world, int *nodes, hn_strbuf *why);
/* A world across nodes, once its memory is made: rank 0's process serves
 * the link (on host, the store's address, where given; else on every
 * address of its machine, published by its name) and publishes its
 * address through the store; every process connects to it, and the
 * world's exchanges between nodes, failures and deaths go through it.
 * Undone by hn_procs_leave. */
struct hn_world_store;
hn_status_t hn_procs_link(hn_runtime *rt, const struct hn_world_store *store, const char *host, hn_strbuf *why);
/* After the world is made: watch the others (a death fails the world). */
hn_status_t hn_procs_watch(hn_runtime *rt);
/* First thing of a teardown: goodbye said, the watch stopped. */
void hn_procs_quiet(hn_runtime *rt);
/* Before the world goes: the link closed (goodbye said). */
void hn_procs_unlink(hn_runtime *rt);
/* Last thing: the link's server closed (here, rank 0's process: once the
 * others left, within the deadline), the world's memory unmapped. */
void hn_procs_leave(hn_runtime *rt);

/* The end of a run in every process (hn_runtime_finish_run): st is this
 * process's. */
hn_status_t hn_procs_finish_run(hn_runtime *rt, hn_status_t st);
/* HN_ERR_PEER_LOST (the text set) once a process of the world died. */
hn_status_t hn_procs_check_lost(hn_runtime *rt);

/* An exchange among every process of the world, on the caller's thread
 * (acting for this process's rank): every process gives `bytes` bytes,
 * all receives world * bytes. what names it in errors. The same calls in
 * the same order in every process. HN_ERR_PEER_LOST / TIMEOUT / MISMATCH
 * with the runtime's error text set. */
hn_status_t hn_procs_xchg(hn_runtime *rt, const char *what, const void *mine, size_t bytes, void *all);

/* Across nodes, for bytes too many for an exchange: every process posts
 * `bytes` of its rank's (mine) for the processes of the other nodes
 * (*tag names it; the same calls in the same order in every process,
 * also on one node, where nothing is sent), and those take rank r's with
 * hn_procs_fetch into out. HN_ERR_PEER_LOST / TIMEOUT / MISMATCH with the
 * runtime's error text set. */
hn_status_t hn_procs_post(hn_runtime *rt, const char *what, const void *mine, size_t bytes, uint64_t *tag);
hn_status_t hn_procs_fetch(hn_runtime *rt, const char *what, uint64_t tag, int rank, void *out, size_t bytes);

/* The largest of every process's `mine` (a time; -1 anywhere: -1), for
 * the benchmarks' slowest rank; mine itself in one process. Collective
 * across processes. */
hn_status_t hn_procs_max(hn_runtime *rt, double mine, double *worst);

#endif
