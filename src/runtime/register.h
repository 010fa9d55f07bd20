/* Caller memory registered across processes (register.c);
 * hn_runtime_register itself is public (hirnode/runtime.h), the table's
 * lookups are the communicators' (src/ranks/teams.h). */
#ifndef HN_RUNTIME_REGISTER_H
#define HN_RUNTIME_REGISTER_H

#include "../ranks/runtime_int.h"

/* At teardown, on the rank threads still running: the mappings closed. */
void hn_reg_fini(hn_runtime *rt);

#endif
