/* The runtime's settings (config.c): one table of name, variable, default
 * and help. Pure: any thread. */
#ifndef HN_SCHED_CONFIG_H
#define HN_SCHED_CONFIG_H

#include "../core/util.h"
#include "hirnode/runtime.h"

typedef struct hn_setting {
    const char *name, *env, *def, *help;
} hn_setting;
int hn_settings_count(void);
const hn_setting *hn_setting_at(int i);
/* Effective value: the variable if set, else the default. */
const char *hn_setting_get(const char *name);

#endif
