/* The runtime's error slot and the devices' health (run_error.c). The
 * first failure of a run wins: it is kept (rank, instruction, message) in
 * the world's error slot (src/world/world.h) and copied into the
 * runtime's text, the world's abort word, which every rank and stream
 * worker polls, is raised, and the caller reads it with hn_runtime_error.
 * Any thread: the copy is locked. */
#ifndef HN_SCHED_RUN_ERROR_H
#define HN_SCHED_RUN_ERROR_H

#include "runtime_int.h"

/* The world (of rt->world ranks, with the run's deadline), the slot and
 * the fault sink the device backend and the communicators report to (errors of rt);
 * at creation, HN_ERR_NOMEM when the world cannot be made. Undone by fini
 * (also after a failed init). */
hn_status_t hn_run_error_init(hn_runtime *rt);
/* The world's shared regions (the p2p members' mailboxes and event slots):
 * reserved, backed only where used. */
#define HN_RUNTIME_SHARED_BYTES ((size_t)1 << 30)
void hn_run_error_fini(hn_runtime *rt);
/* Records an error of a rank (the first one wins over later ones and over
 * the "aborted" echoes it causes) and raises the abort flag. */
void hn_runtime_fail(hn_runtime *rt, int rank, int instr, hn_status_t st, const char *msg);
/* A failure another node's process posted (its text as it wrote it),
 * heard through the world's link: into this node's slot, and the world
 * aborted here; not passed on again. */
void hn_runtime_fail_posted(hn_runtime *rt, hn_status_t st, int rank, int instr, const char *text);
/* Empties the slot and lowers the abort flag. */
void hn_runtime_clear_error(hn_runtime *rt);
/* Which program's instructions later errors name (work of a launch still
 * in flight may report a failure while the next is issued). */
void hn_runtime_set_err_prog(hn_runtime *rt, const hn_program *p);
/* The error text of a call that fails before issuing anything, while
 * launches may be in flight (their failures write it too). */
void hn_runtime_set_error_text(hn_runtime *rt, const char *text);
/* Formats "file:line:col: error: rank R: <instr>: msg". */
void hn_format_fault(hn_strbuf *sb, const hn_program *p, int rank, int instr, const char *msg);
/* HN_ERR_DEVICE_LOST (lost_text says which and why) once any device's
 * context is lost: nothing can run on it again in this process, so the
 * runtime refuses every later run. Polls every device until one is. */
hn_status_t hn_runtime_check_devices(hn_runtime *rt);

#endif
