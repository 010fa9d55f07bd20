/* Device-layer helpers shared by every backend: fault reporting. (A
 * tensor's geometry is base's: tensor.c.) */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "device.h"

void hn_origin_fail(const hn_origin *o, hn_status_t st, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    if (o != NULL && o->graph != NULL) { /* work of a captured graph: its replay (or capture) is named */
        size_t k = strlen(msg);
        snprintf(msg + k, sizeof(msg) - k, " (in graph %llu)", (unsigned long long)o->graph->id);
    }
    if (o != NULL && o->sink != NULL && o->sink->report != NULL)
        o->sink->report(o->sink->ctx, o->rank, o->instr, st, msg);
    else
        HN_ERROR("%s", msg);
}
