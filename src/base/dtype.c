/* Element type table. */
#include "dtype.h"

static const struct {
    const char *name;
    int size;
    int is_float;
} dtypes[] = {
#define X(e, n, s, f) {n, s, f},
    HN_DTYPE_LIST(X)
#undef X
};

const char *hn_dtype_name(hn_dtype t)
{
    return (unsigned)t < HN_DTYPE_COUNT ? dtypes[t].name : "?";
}

int hn_dtype_size(hn_dtype t) { return (unsigned)t < HN_DTYPE_COUNT ? dtypes[t].size : 0; }

int hn_dtype_is_float(hn_dtype t)
{
    return (unsigned)t < HN_DTYPE_COUNT ? dtypes[t].is_float : 0;
}

int hn_dtype_parse(const char *name, int n)
{
    for (int i = 0; i < HN_DTYPE_COUNT; i++)
        if ((int)strlen(dtypes[i].name) == n && strncmp(dtypes[i].name, name, (size_t)n) == 0)
            return i;
    return -1;
}
