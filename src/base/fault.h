/* Fault injection (HIRNODE_FAULT, `hirnode run --fault`): which rank fails
 * how at which instruction, so that the promises "never hang, never exit,
 * name the rank and instruction, stay usable" can be tested. */
#ifndef HN_FAULT_H
#define HN_FAULT_H

#include <stddef.h>

#include "util.h"

typedef enum hn_fault_kind {
    HN_FAULT_ISSUE, /* the device refuses the instruction when it is issued */
    HN_FAULT_ASYNC, /* an asynchronous device error, after the work before it */
    HN_FAULT_TRAP,  /* an asynchronous error that loses the device (a trapping kernel) */
    HN_FAULT_COMM,  /* the instruction's communicator fails (it is aborted and made anew) */
    HN_FAULT_STOP,  /* the rank stops issuing, as if its thread hung */
    HN_FAULT_SLOW,  /* the rank sleeps before the instruction (ms; default 200) */
    HN_FAULT_OOM,   /* the allocation fails (alloc instructions) */
    /* the kinds from here act on the rank's whole process, so they need
     * process mode (one rank per process): */
    HN_FAULT_KILL,    /* the process kills itself (SIGKILL), as if it crashed */
    HN_FAULT_SIGSTOP, /* the process stops (SIGSTOP), as if the machine froze it */
    /* a rank's thread again (after the process kinds, so that the kinds
     * before HN_FAULT_FIRST_PROCESS_KIND stay those a sweep samples): */
    HN_FAULT_SKIP, /* the rank does not issue the communication: its peers wait for it in vain; a capture
                      takes the program whole, and the rank does not launch its part of the replays */
    HN_FAULT_KIND_COUNT
} hn_fault_kind;

/* Kinds below it act on a rank's thread; from it to HN_FAULT_SIGSTOP, on
 * its process. */
#define HN_FAULT_FIRST_PROCESS_KIND HN_FAULT_KILL
#define HN_FAULT_IS_PROCESS_KIND(k) ((k) >= HN_FAULT_FIRST_PROCESS_KIND && (k) <= HN_FAULT_SIGSTOP)

#define HN_MAX_FAULTS 16

typedef struct hn_fault {
    int rank;
    int line;       /* of the instruction in the program text */
    int occurrence; /* the n-th time this rank issues an instruction of
                       that line in a run, from 1; 0 = every time */
    hn_fault_kind kind;
    double ms;      /* slow: how long */
} hn_fault;

typedef struct hn_fault_plan {
    int n;
    hn_fault f[HN_MAX_FAULTS];
} hn_fault_plan;

/* Parses "RANK:LINE[:OCCURRENCE]:KIND[:MS][,...]" (empty or NULL: no
 * faults). On error writes why into err and returns HN_ERR_INVALID. */
hn_status_t hn_fault_parse(const char *spec, hn_fault_plan *out, char *err, size_t errlen);
const char *hn_fault_kind_name(hn_fault_kind k);
/* A fault as a plan writes it ("9:99:stop"), for messages. */
void hn_fault_text(const hn_fault *f, char *buf, size_t n);
/* HN_ERR_INVALID with why into err when a fault names a rank that a
 * runtime of nranks does not have ("fault '9:99:stop': rank 9 does not
 * exist (ranks 0 to 3)"). */
hn_status_t hn_fault_plan_check_ranks(const hn_fault_plan *plan, int nranks, char *err, size_t errlen);
/* HN_ERR_INVALID with why into err when a fault would kill or stop the
 * process of its rank (kill, sigstop) while one process holds every rank
 * of the world (nlocal == world): it would take every rank with it. */
hn_status_t hn_fault_plan_check_process(const hn_fault_plan *plan, int world, int nlocal, char *err, size_t errlen);

#endif
