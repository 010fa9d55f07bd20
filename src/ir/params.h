/* Parameter values and input/output tensors of a program for one
 * configuration (params.c). Pure: no runtime, any thread. */
#ifndef HN_SCHED_PARAMS_H
#define HN_SCHED_PARAMS_H

#include "../base/tensor.h"
#include "ir.h"

/* Parameter values: defaults, then overrides by name (the last of a name
 * wins); world and nstreams as the program sees them. out[nparams].
 * Errors (an unknown name, a default that does not evaluate) into err. */
hn_status_t hn_params_resolve(const hn_program *p, int world, int nstreams, int noverrides,
                              const char *const *names, const int64_t *values, int64_t *out,
                              hn_strbuf *err);

/* The tensor of input/output `io` on `rank` (global: the unsharded one of
 * --check), contiguous, data NULL; a shape that does not evaluate or
 * overflows is an error located at the declaration, into err. */
hn_status_t hn_io_tensor(const hn_program *p, const hn_io *io, const int64_t *params, int rank,
                         int world, int nstreams, int global, hn_tensor *out, hn_strbuf *err);

#endif
