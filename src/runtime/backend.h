/* Which device backend a runtime configuration takes (runtime.c):
 * hn_runtime_create asks this, and so do the tools that must know it
 * without starting a runtime (the profile a lowering reads, default rank
 * counts), so that both always agree. */
#ifndef HN_RUNTIME_BACKEND_H
#define HN_RUNTIME_BACKEND_H

#include "../device/device.h"
#include "hirnode/runtime.h"

/* The backend of cfg->backend (NULL or "auto": the first registered
 * backend that is not emulated and has a device for every rank's ordinal,
 * else the emulated one — unless cfg->devices names ordinals on a machine
 * whose GPU backend has too few), or NULL with why (an unknown name, too
 * few devices). Quiet: hn_runtime_create's info line about falling back
 * to the emulation is not said here. Any thread; starts nothing. */
const hn_device_ops *hn_runtime_pick_backend(const hn_runtime_config *cfg, hn_strbuf *why);

#endif
