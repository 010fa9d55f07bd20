/* The machine profile as a file (profile.c; docs/SCHEDULER.md "The
 * machine profile"): what `hirnode tune` measured, as versioned JSON with
 * the machine it was measured on, and which profile a runtime uses — the
 * file HIRNODE_PROFILE names, else the default file for the GPU model and
 * count, else the built-in default. Reading and writing are pure; the
 * profile in use is looked up once per process and kept. */
#ifndef HN_SCHED_PROFILE_H
#define HN_SCHED_PROFILE_H

#include "../device/device.h"
#include "cost.h"

/* The largest profile file read. */
#define HN_PROFILE_MAX_BYTES (4u << 20)

/* Appends p as a profile file's text (JSON, one trailing newline). */
void hn_profile_write(const hn_cost_profile *p, hn_strbuf *sb);

/* Reads a profile file's text into *out. `model` and `count`: the machine
 * it must have been measured on (model NULL or count 0: any). On failure
 * one line into why, without the file's name: HN_ERR_PARSE for a file that
 * is not a profile of this version (malformed, truncated, a value out of
 * range, another version), HN_ERR_INVALID for one measured on another
 * machine (GPU model or count), HN_ERR_NOMEM. *out is written only on
 * success. Its `source` is left empty. */
hn_status_t hn_profile_parse(const char *text, size_t len, const char *model, int count, hn_cost_profile *out,
                             hn_strbuf *why);
/* The same from a file (a regular file of at most HN_PROFILE_MAX_BYTES);
 * HN_ERR_IO when it cannot be read. `source` is the path. */
hn_status_t hn_profile_read(const char *path, const char *model, int count, hn_cost_profile *out, hn_strbuf *why);

/* The default file of a model and count:
 * $XDG_CACHE_HOME/hirnode/profile-<model>-x<count>.json, else
 * $HOME/.cache/hirnode/...; the model's characters other than letters,
 * digits, '.' and '_' become '-'. 0 when neither variable is set (or the
 * path does not fit in n). */
int hn_profile_default_path(const char *model, int count, char *buf, size_t n);

/* The built-in default for a model (the H200's measurements, labelled in
 * `source` with what it is for and what it is made of); emulated: the
 * model is an emulated backend's (hn_device_ops.emulated). */
void hn_profile_builtin_for(const char *model, int emulated, hn_cost_profile *out);

/* The model of a device backend's devices (an emulated backend's name:
 * "host"), and the CUDA version its driver supports (or "-"). */
void hn_profile_device_model(const hn_device_ops *dev, char *model, size_t n, char *cuda, size_t cn);

/* The profile a runtime of `count` devices of `model` on backend dev uses:
 * the file HIRNODE_PROFILE names; else, on GPUs (a backend not emulated),
 * the default file if it exists; else the built-in default. A file that cannot be used — not
 * readable, malformed, truncated, another version, measured on another GPU
 * model or count — gets one warning naming it and what is wrong, and the
 * built-in default is used. Looked up once per process for each (backend,
 * model, count, file) and kept for the process's life (never freed); any
 * thread. */
const hn_cost_profile *hn_profile_get(const hn_device_ops *dev, const char *model, int count);
/* The same for a device backend (its model looked up). */
const hn_cost_profile *hn_profile_for(const hn_device_ops *dev, int count);

/* One line saying what p is: "FILE (measured DATE on MODEL x COUNT)" or
 * its built-in label. */
void hn_profile_describe(const hn_cost_profile *p, char *buf, size_t n);

#endif
