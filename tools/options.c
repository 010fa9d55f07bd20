/* The command line's one options parser: every subcommand's table read the
 * same way, values through the strict parsers of src/base/util.c (tools.h), one
 * message format for what is wrong. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "hirnode/runtime.h"

#include "../src/runtime/tools.h"
#include "options.h"

int hn_cli_usage_error(const hn_command *c, const char *fmt, ...)
{
    hn_strbuf sb;
    va_list ap;
    hn_sb_init(&sb);
    hn_sb_printf(&sb, "%s: ", c->name);
    va_start(ap, fmt);
    hn_sb_vprintf(&sb, fmt, ap);
    va_end(ap);
    fprintf(stderr, "%s\n(%s --help lists the options)\n", sb.data != NULL ? sb.data : c->name, c->name);
    hn_sb_free(&sb);
    return HN_EXIT_USAGE;
}

int hn_cli_check_settings(const hn_command *c)
{
    hn_strbuf bad;
    int rc = -1;
    hn_sb_init(&bad);
    if (hn_settings_check(&bad) != HN_OK) {
        for (const char *line = bad.data; line != NULL && *line;) {
            const char *nl = strchr(line, '\n');
            int n = nl != NULL ? (int)(nl - line) : (int)strlen(line);
            fprintf(stderr, "%s: %.*s\n", c->name, n, line);
            line = nl != NULL ? nl + 1 : NULL;
        }
        fprintf(stderr, "(hirnode info lists the settings)\n");
        rc = HN_EXIT_USAGE;
    }
    hn_sb_free(&bad);
    return rc;
}

void hn_cli_usage(const hn_command *c, FILE *out)
{
    int width = 0;
    fprintf(out, "usage: %s%s%s\n", c->name, c->nopts > 0 ? " [options]" : "", c->synopsis);
    for (int i = 0; i < c->nopts; i++) {
        const hn_option *o = &c->opts[i];
        int w = (int)strlen(o->name) + (o->value != NULL ? 1 + (int)strlen(o->value) : 0);
        width = w > width && w <= 24 ? w : width;
    }
    fprintf(out, "\noptions:\n");
    for (int i = 0; i < c->nopts; i++) {
        const hn_option *o = &c->opts[i];
        char head[128];
        const char *line = o->help;
        snprintf(head, sizeof(head), "%s%s%s", o->name, o->value != NULL ? " " : "", o->value ? o->value : "");
        /* the help's further lines under its first */
        for (int first = 1; line != NULL; first = 0) {
            const char *nl = strchr(line, '\n');
            int n = nl != NULL ? (int)(nl - line) : (int)strlen(line);
            if (first && (int)strlen(head) > width)
                fprintf(out, "  %s\n  %-*s  %.*s\n", head, width, "", n, line);
            else
                fprintf(out, "  %-*s  %.*s\n", width, first ? head : "", n, line);
            line = nl != NULL ? nl + 1 : NULL;
        }
    }
    fprintf(out, "  %-*s  %s\n", width, "-h, --help", "this text");
    if (c->more != NULL)
        fprintf(out, "\n%s", c->more);
}

int hn_cli_take_devices(const char *value, void *dest, hn_strbuf *err)
{
    hn_cli_devices *d = dest;
    const char *at = value;
    d->n = 0;
    for (;;) {
        size_t len = strcspn(at, ",");
        char item[32];
        int64_t v;
        if (d->n == HN_ARRAY_LEN(d->ord)) {
            hn_sb_printf(err, "--devices: more than %d ordinals", HN_ARRAY_LEN(d->ord));
            return 0;
        }
        if (len >= sizeof(item)) {
            hn_sb_printf(err, "--devices: expected ordinals from 0 to 4095, not '%s'", value);
            return 0;
        }
        memcpy(item, at, len);
        item[len] = '\0';
        if (hn_parse_int64("--devices", item, 0, 4095, &v, err) != HN_OK)
            return 0;
        d->ord[d->n++] = (int)v;
        if (at[len] == '\0')
            return 1;
        at += len + 1;
    }
}

int hn_cli_use_devices(const char *name, hn_cli_devices *d, hn_runtime_config *cfg)
{
    hn_command c = {name, "", NULL, 0, NULL, 0, NULL, NULL};
    if (d->n == 0)
        return 1;
    if (d->n != cfg->ndev) {
        hn_cli_usage_error(&c, "--devices: %d ordinal%s for %d ranks (--gpus): give one per rank", d->n,
                           d->n == 1 ? "" : "s", cfg->ndev);
        return 0;
    }
    cfg->devices = d->ord;
    return 1;
}

int hn_cli_shapes(const char *s, const char *what, int64_t (*shapes)[3], int max, int *n, hn_strbuf *err)
{
    *n = 0;
    for (;;) {
        size_t len = strcspn(s, ",");
        char item[64], *k, *x;
        const char *part[3];
        if (*n == max) {
            hn_sb_printf(err, "%s: at most %d shapes", what, max);
            return 0;
        }
        if (len >= sizeof(item))
            return 0;
        memcpy(item, s, len);
        item[len] = '\0';
        if ((k = strchr(item, 'x')) == NULL || (x = strchr(k + 1, 'x')) == NULL)
            return 0; /* not MxKxN */
        *k = *x = '\0';
        part[0] = item;
        part[1] = k + 1;
        part[2] = x + 1;
        for (int d = 0; d < 3; d++)
            if (hn_parse_int64(what, part[d], 1, 1 << 20, &shapes[*n][d], err) != HN_OK)
                return 0;
        (*n)++;
        s += len;
        if (*s == '\0')
            return 1;
        s++;
    }
}

/* "a|b|c" as its words (at most cap; NUL-separated copies in buf). */
static int split_choices(const char *choices, char *buf, size_t size, const char **words, int cap)
{
    int n = 0;
    snprintf(buf, size, "%s", choices);
    for (char *p = buf; n < cap; p++) {
        words[n++] = p;
        if ((p = strchr(p, '|')) == NULL)
            break;
        *p = '\0';
    }
    return n;
}

/* Stores value by o's kind; 0 with why in err if it is not one. */
static int take(const hn_option *o, const char *value, hn_strbuf *err)
{
    int64_t i64;
    uint64_t u64;
    double d;
    switch (o->kind) {
    case HN_OPT_FLAG: *(int *)o->dest = 1; return 1;
    case HN_OPT_INT:
    case HN_OPT_INT64:
        if (hn_parse_int64(o->name, value, o->lo, o->hi, &i64, err) != HN_OK)
            return 0;
        if (o->kind == HN_OPT_INT)
            *(int *)o->dest = (int)i64; /* lo and hi of an int option are ints */
        else
            *(int64_t *)o->dest = i64;
        return 1;
    case HN_OPT_SIZE:
        if (hn_parse_size(o->name, value, (uint64_t)o->lo, (uint64_t)o->hi, &u64, err) != HN_OK)
            return 0;
        *(size_t *)o->dest = (size_t)u64;
        return 1;
    case HN_OPT_DOUBLE:
        if (hn_parse_double(o->name, value, o->dlo, o->dhi, &d, err) != HN_OK)
            return 0;
        *(double *)o->dest = d;
        return 1;
    case HN_OPT_TEXT:
        if (*value == '\0') {
            hn_sb_printf(err, "%s: expected %s, not ''", o->name, o->value);
            return 0;
        }
        *(const char **)o->dest = value;
        return 1;
    case HN_OPT_CHOICE: {
        char buf[256];
        const char *words[16];
        int n = split_choices(o->choices, buf, sizeof(buf), words, HN_ARRAY_LEN(words)), i;
        if (hn_parse_word(o->name, value, words, n, &i, err) != HN_OK)
            return 0;
        *(const char **)o->dest = value;
        return 1;
    }
    case HN_OPT_CALL: {
        size_t before = err->len;
        if (o->call(value, o->dest, err))
            return 1;
        if (err->len == before) /* the function said nothing: say what it wanted */
            hn_sb_printf(err, "%s: expected %s, not '%s'", o->name, o->value, value);
        return 0;
    }
    }
    return 0;
}

/* The option that arg names, and its joined value ("--x=V", "-DV") into *joined. */
static const hn_option *find(const hn_command *c, const char *arg, const char **joined)
{
    *joined = NULL;
    for (int i = 0; i < c->nopts; i++) {
        const hn_option *o = &c->opts[i];
        size_t n = strlen(o->name);
        if (strncmp(arg, o->name, n) != 0)
            continue;
        if (arg[n] == '\0')
            return o;
        if (o->value != NULL && arg[n] == '=' && o->name[1] == '-') {
            *joined = arg + n + 1;
            return o;
        }
        if (o->value != NULL && n == 2) { /* -DNAME=VAL */
            *joined = arg + n;
            return o;
        }
    }
    return NULL;
}

static int unknown(const hn_command *c, const char *arg)
{
    const char *names[64];
    const char *near;
    size_t len = strcspn(arg, "=");
    int n = 0;
    for (int i = 0; i < c->nopts && n < HN_ARRAY_LEN(names) - 1; i++)
        names[n++] = c->opts[i].name;
    names[n++] = "--help";
    near = hn_nearest_word(arg, len, names, n);
    if (near != NULL)
        return hn_cli_usage_error(c, "unknown option '%s' \u2014 did you mean '%s'?", arg, near);
    return hn_cli_usage_error(c, "unknown option '%s'", arg);
}

int hn_cli_parse(const hn_command *c, int argc, char **argv, int first)
{
    int options_end = 0;
    *c->nargs = 0;
    for (int i = first; i < argc; i++) {
        const char *a = argv[i], *value;
        const hn_option *o;
        hn_strbuf err;
        int ok;
        if (options_end || a[0] != '-' || a[1] == '\0') {
            if (*c->nargs == c->max_args)
                return hn_cli_usage_error(c, "unexpected argument '%s'", a);
            c->args[(*c->nargs)++] = a;
            continue;
        }
        if (strcmp(a, "--") == 0) {
            options_end = 1;
            continue;
        }
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            hn_cli_usage(c, stdout);
            return HN_EXIT_OK;
        }
        if ((o = find(c, a, &value)) == NULL)
            return unknown(c, a);
        if (o->value == NULL) {
            value = NULL;
        } else if (value == NULL) {
            if (i + 1 >= argc)
                return hn_cli_usage_error(c, "%s needs a value (%s)", o->name, o->value);
            value = argv[++i];
        }
        hn_sb_init(&err);
        ok = take(o, value, &err);
        if (!ok)
            hn_cli_usage_error(c, "%s", err.data != NULL ? err.data : "out of memory");
        hn_sb_free(&err);
        if (!ok)
            return HN_EXIT_USAGE;
    }
    return -1;
}
