/* The runtime's settings (settings.c): one typed table of name, variable,
 * default, kind and range, help; one getter per kind. Pure: any thread. */
#ifndef HN_BASE_SETTINGS_H
#define HN_BASE_SETTINGS_H

#include "fault.h"
#include "util.h"
#include "hirnode/runtime.h"

/* The most pool streams a runtime has: the `streams` setting's upper
 * bound (nstreams of programs), the size of a rank's stream arrays. */
#define HN_MAX_STREAMS 16

/* What a setting's text must be. */
typedef enum hn_setting_kind {
    HN_SET_WORD,   /* one of `words` */
    HN_SET_FLAG,   /* 0 or 1 */
    HN_SET_INT,    /* an integer from lo to hi (decimal or 0x) */
    HN_SET_NUMBER, /* a decimal number from dlo to dhi */
    HN_SET_FAULTS, /* a fault plan (src/base/fault.h) */
    HN_SET_PATH,   /* a file's path: below 4096 bytes, no control characters (its reader checks the file) */
    HN_SET_ADDRESS, /* host:port (a port from 1 to 65535; a host below 256 bytes, no spaces), or empty */
} hn_setting_kind;

typedef struct hn_setting {
    const char *name, *env, *def;
    hn_setting_kind kind;
    const char *const *words; /* HN_SET_WORD: NULL-terminated */
    int64_t lo, hi;    /* HN_SET_INT */
    double dlo, dhi;   /* HN_SET_NUMBER */
    const char *help;
} hn_setting;

int hn_settings_count(void);
const hn_setting *hn_setting_at(int i);
/* The setting called name; NULL if there is none. */
const hn_setting *hn_setting_find(const char *name);
/* Its text: the variable if it is set and not empty, else the default
 * (unchecked: what `hirnode info` shows). NULL for an unknown name. */
const char *hn_setting_get(const char *name);

/* The getters, one per kind: the setting's effective value, checked.
 * HN_ERR_INVALID for a variable that is not of its kind and range (or a
 * name of another kind): *out is then the default's value, and one line
 * without a newline is appended to err (when not NULL), in the options'
 * format: "HIRNODE_STREAMS: expected an integer from 1 to 16, not '5x'".
 * Callers after hn_runtime_create, which refuses bad variables, pass
 * err = NULL. Words come back as the table's own strings. */
hn_status_t hn_setting_word(const char *name, const char **out, hn_strbuf *err);
hn_status_t hn_setting_path(const char *name, const char **out, hn_strbuf *err);
hn_status_t hn_setting_address(const char *name, const char **out, hn_strbuf *err);
hn_status_t hn_setting_flag(const char *name, int *out, hn_strbuf *err);
hn_status_t hn_setting_int(const char *name, int64_t *out, hn_strbuf *err);
hn_status_t hn_setting_number(const char *name, double *out, hn_strbuf *err);
hn_status_t hn_setting_faults(const char *name, hn_fault_plan *out, hn_strbuf *err);

/* Whether setting s's text is good; the line above into err if not. */
hn_status_t hn_setting_check(const hn_setting *s, hn_strbuf *err);
/* Every setting checked: HN_ERR_INVALID with a line ending in '\n' for
 * each bad variable, in the table's order. */
hn_status_t hn_settings_check(hn_strbuf *err);

/* What hn_runtime_create reads from the settings besides the
 * hn_runtime_config, for a runtime of `ndev` ranks. */
typedef struct hn_runtime_settings {
    double spin_us, watchdog_grace_s;
    int join_spin;
    const char *replay; /* bells, jobs or caller (graph.c's hn_replay_path) */
    size_t host_mem_bytes; /* 0: the backend's default */
    size_t shared_mem_bytes; /* a world across processes: each rank's shared device memory (0: default) */
    hn_fault_plan faults;  /* HIRNODE_FAULT, its ranks below world */
} hn_runtime_settings;
/* Reads them after checking every setting: HN_ERR_INVALID with one line
 * ending in '\n' per bad variable (or a fault naming a rank the runtime
 * will not have) into err. */
hn_status_t hn_settings_read_runtime(int world, hn_runtime_settings *out, hn_strbuf *err);

#endif
