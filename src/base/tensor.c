/* A strided tensor's geometry (tensor.h): strides, sizes, overflow and
 * shape texts. Pure. */
#include <stdio.h>

#include "tensor.h"
#include "util.h"

int hn_tensor_make_contiguous(hn_tensor *t)
{
    int64_t s = 1, bytes;
    for (int i = t->ndim - 1; i >= 0; i--) {
        t->stride[i] = s;
        if (hn_mul_overflows(s, t->shape[i], &s))
            return 1;
    }
    return hn_mul_overflows(s, hn_dtype_size(t->dtype), &bytes);
}

void hn_shape_overflow_text(const hn_tensor *t, char *buf, size_t n)
{
    size_t k = 0;
    int64_t s = 1;
    int elems = 0;
    buf[0] = '\0';
    for (int i = 0; i < t->ndim && k < n; i++) {
        k += (size_t)snprintf(buf + k, n - k, i ? " \u00d7 %lld" : "%lld", (long long)t->shape[i]);
        elems |= hn_mul_overflows(s, t->shape[i], &s);
    }
    if (k < n)
        snprintf(buf + k, n - k, elems ? " elements overflows" : " elements of %d bytes overflows",
                 hn_dtype_size(t->dtype));
}

void hn_tensor_shape_text(const hn_tensor *t, char *buf, size_t n)
{
    size_t k = (size_t)snprintf(buf, n, "%s[", hn_dtype_name(t->dtype));
    for (int i = 0; i < t->ndim && k < n; i++)
        k += (size_t)snprintf(buf + k, n - k, i ? ", %lld" : "%lld", (long long)t->shape[i]);
    if (k < n)
        snprintf(buf + k, n - k, "]");
}

int64_t hn_tensor_numel(const hn_tensor *t)
{
    /* a zero dimension first: a view may permute a checked shape so that
     * larger dimensions meet before the zero does */
    int64_t n = 1;
    for (int i = 0; i < t->ndim; i++)
        if (t->shape[i] == 0)
            return 0;
    for (int i = 0; i < t->ndim; i++)
        n *= t->shape[i];
    return n;
}

int hn_tensor_is_contiguous(const hn_tensor *t)
{
    int64_t expect = 1;
    if (hn_tensor_numel(t) == 0) /* no element to address */
        return 1;
    for (int i = t->ndim - 1; i >= 0; i--) {
        if (t->shape[i] != 1 && t->stride[i] != expect)
            return 0;
        expect *= t->shape[i];
    }
    return 1;
}

size_t hn_tensor_bytes(const hn_tensor *t)
{
    return (size_t)hn_tensor_numel(t) * (size_t)hn_dtype_size(t->dtype);
}
