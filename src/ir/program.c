/* Public program API: parse (with static verification), load, print. */
#include <stdio.h>
#include <string.h>

#include "hirnode/runtime.h"
#include "parse.h"
#include "verify.h"

static void hand_over(hn_strbuf *sb, char **diag)
{
    if (diag != NULL)
        *diag = hn_sb_take(sb);
    else
        hn_sb_free(sb);
}

/* Parses and checks statically; consumable: text, the caller's to lose
 * (hn_parse_consuming), or NULL. */
static hn_status_t parse_verify(const char *text, size_t len, const char *filename, hn_program **out, char **diag,
                                char *consumable)
{
    hn_strbuf sb;
    hn_program *p = NULL;
    hn_status_t st;
    if (text == NULL || out == NULL)
        return HN_ERR_INVALID;
    hn_sb_init(&sb);
    st = consumable != NULL ? hn_parse_consuming(consumable, len, filename, &p, &sb)
                            : hn_parse(text, len, filename, &p, &sb);
    if (st == HN_OK && (st = hn_verify_static(p, &sb)) != HN_OK) {
        hn_prog_free(p);
        p = NULL;
    }
    hand_over(&sb, diag);
    if (st == HN_OK)
        *out = p;
    return st;
}

hn_status_t hn_program_parse(const char *text, size_t len, const char *filename, hn_program **out,
                             char **diag)
{
    return parse_verify(text, len, filename, out, diag, NULL);
}

hn_status_t hn_program_load(const char *path, hn_program **out, char **diag)
{
    hn_strbuf why;
    char *text = NULL;
    size_t len = 0;
    hn_status_t st;
    if (path == NULL || out == NULL)
        return HN_ERR_INVALID;
    hn_sb_init(&why);
    st = hn_file_read(path, "a program file", HN_PROGRAM_MAX_BYTES, &text, &len, &why);
    if (st != HN_OK) {
        hn_strbuf sb;
        hn_sb_init(&sb);
        hn_sb_printf(&sb, "%s: error: %s\n", path, why.data != NULL ? why.data : "cannot read");
        hand_over(&sb, diag);
        hn_sb_free(&why);
        return st;
    }
    hn_sb_free(&why);
    /* the text read for it: given back as it is parsed */
    st = parse_verify(text, len, path, out, diag, text);
    hn_free(text);
    return st;
}

void hn_program_destroy(hn_program *p) { hn_prog_free(p); }

char *hn_program_print(const hn_program *p) { return p != NULL ? hn_print_program(p) : NULL; }

void hn_string_free(char *s) { hn_free(s); }
