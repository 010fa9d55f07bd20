/* The command line's one options parser: a table per subcommand (name,
 * value, kind and range, help line), every value parsed strictly by the
 * hn_parse_* functions of src/base/util.c, `--help` / `-h` everywhere. */
#ifndef HN_TOOLS_OPTIONS_H
#define HN_TOOLS_OPTIONS_H

#include <stdint.h>
#include <stdio.h>

struct hn_strbuf;

/* Exit codes of every command. */
enum { HN_EXIT_OK = 0, HN_EXIT_FAIL = 1, HN_EXIT_USAGE = 2 };

typedef enum hn_opt_kind {
    HN_OPT_FLAG,   /* no value: *(int *)dest = 1 */
    HN_OPT_INT,    /* *(int *)dest, an integer from lo to hi */
    HN_OPT_INT64,  /* *(int64_t *)dest, from lo to hi */
    HN_OPT_SIZE,   /* *(size_t *)dest, bytes from lo to hi ("8K", "16M") */
    HN_OPT_DOUBLE, /* *(double *)dest, a number from dlo to dhi */
    HN_OPT_TEXT,   /* *(const char **)dest, any text but "" */
    HN_OPT_CHOICE, /* *(const char **)dest, one of `choices` ("device|host") */
    HN_OPT_CALL,   /* call(value, dest, err): 0 with why in err when it refuses */
} hn_opt_kind;

typedef struct hn_option {
    const char *name;  /* "--gpus"; a one-letter one ("-D") also takes its value joined: -DN=4 */
    const char *value; /* the value's name in the usage ("N"); NULL for a flag */
    hn_opt_kind kind;
    int64_t lo, hi;    /* integers and sizes */
    double dlo, dhi;   /* numbers */
    const char *choices;
    int (*call)(const char *value, void *dest, struct hn_strbuf *err);
    void *dest;
    const char *help; /* one line (or more, "\n"-separated) for the usage */
} hn_option;

#define HN_FLAG(name, dest, help) {name, NULL, HN_OPT_FLAG, 0, 0, 0, 0, NULL, NULL, dest, help}
#define HN_INT(name, value, dest, lo, hi, help) {name, value, HN_OPT_INT, lo, hi, 0, 0, NULL, NULL, dest, help}
#define HN_INT64(name, value, dest, lo, hi, help) {name, value, HN_OPT_INT64, lo, hi, 0, 0, NULL, NULL, dest, help}
#define HN_SIZE(name, value, dest, lo, hi, help) {name, value, HN_OPT_SIZE, lo, hi, 0, 0, NULL, NULL, dest, help}
#define HN_DOUBLE(name, value, dest, lo, hi, help) {name, value, HN_OPT_DOUBLE, 0, 0, lo, hi, NULL, NULL, dest, help}
#define HN_TEXT(name, value, dest, help) {name, value, HN_OPT_TEXT, 0, 0, 0, 0, NULL, NULL, dest, help}
#define HN_CHOICE(name, choices, dest, help) {name, choices, HN_OPT_CHOICE, 0, 0, 0, 0, choices, NULL, dest, help}
#define HN_CALL(name, value, fn, dest, help) {name, value, HN_OPT_CALL, 0, 0, 0, 0, NULL, fn, dest, help}

/* A subcommand: its name as typed ("hirnode run"), what follows the
 * options in its usage ("FILE"), its options, up to max_args arguments
 * that are not options (into args, their count into *nargs), and text
 * after the options' list (or NULL). */
typedef struct hn_command {
    const char *name;
    const char *synopsis;
    const hn_option *opts;
    int nopts;
    const char **args;
    int max_args;
    int *nargs;
    const char *more;
} hn_command;

/* Parses argv[first .. argc) by the table: `--name VALUE`, `--name=VALUE`,
 * flags, arguments, `--` before arguments that start with '-'. Returns -1
 * when the command should go on; else the exit code to return: HN_EXIT_OK
 * after --help or -h printed the usage on stdout, HN_EXIT_USAGE after one
 * line on stderr saying what is wrong ("hirnode run: --iters: expected an
 * integer from 1 to 1000000, not '5x'") and where the usage is. */
int hn_cli_parse(const hn_command *c, int argc, char **argv, int first);

/* For a command that reads the HIRNODE_* settings (src/base/settings.c):
 * -1 when every one is good; else each bad one on stderr in the options'
 * format ("hirnode run: HIRNODE_STREAMS: expected an integer from 1 to
 * 16, not '5x'"), where they are listed, and HN_EXIT_USAGE. */
int hn_cli_check_settings(const hn_command *c);

/* --devices 0,2,1: the device ordinal of each rank (HN_CALL with
 * hn_cli_take_devices and a hn_cli_devices as its dest). */
typedef struct hn_cli_devices {
    int ord[256];
    int n; /* 0: not given */
} hn_cli_devices;
int hn_cli_take_devices(const char *value, void *dest, struct hn_strbuf *err);
/* cfg->devices from d when it was given, one ordinal per rank (cfg->ndev):
 * 1; else 0 after a usage error of command `name` on stderr. d must live
 * until the runtime is made (it copies the ordinals). */
struct hn_runtime_config;
int hn_cli_use_devices(const char *name, hn_cli_devices *d, struct hn_runtime_config *cfg);

/* "MxKxN[,MxKxN...]" into shapes[0 .. max), each size from 1 to 2^20, their
 * count into *n. 0 when it is not that: with a message into err (`what`:
 * the option) for a size out of range or too many shapes; nothing for
 * text of another form (the parser then says what the option takes). */
int hn_cli_shapes(const char *s, const char *what, int64_t (*shapes)[3], int max, int *n, struct hn_strbuf *err);

/* The usage of c, options listed with their help. */
void hn_cli_usage(const hn_command *c, FILE *out);

/* An error of usage found after parsing (a missing argument, options that
 * do not go together): "NAME: message" and where the usage is, on stderr;
 * returns HN_EXIT_USAGE. */
int hn_cli_usage_error(const hn_command *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif
