/* Text format: parser and printer entry points. */
#ifndef HN_PARSE_H
#define HN_PARSE_H

#include "ir.h"

/* Parses `text` (len bytes, need not be NUL-terminated). On error appends
 * `file:line:col: error: ...` lines to diag and returns HN_ERR_PARSE (or
 * HN_ERR_NOMEM); *out is written only on success. */
hn_status_t hn_parse(const char *text, size_t len, const char *filename,
                     hn_program **out, hn_strbuf *diag);

/* Canonical text of a program; parse(print(p)) equals p. NULL on OOM. */
char *hn_print_program(const hn_program *p);
void hn_print_expr(hn_strbuf *sb, const hn_program *p, const hn_expr *e);
/* One instruction on one line (blocks shown as `{ ... }`), for messages. */
void hn_print_instr_short(hn_strbuf *sb, const hn_program *p, const hn_instr *in);

#endif
