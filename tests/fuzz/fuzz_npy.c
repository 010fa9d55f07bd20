/* Fuzz target: .npy files through the decoder (src/device/npy.c) for a tensor
 * of the dtype and shape a program input would need; a file that decodes is
 * encoded again and decodes to the same values (make fuzz). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "device/npy.h"
#include "fuzz.h"

static void broken(hn_fuzz_file_outcome *out, const char *what, const char *detail)
{
    if (out->broken[0] == '\0')
        snprintf(out->broken, sizeof(out->broken), "%s%s%.300s", what, detail ? ": " : "", detail ? detail : "");
}

/* The same values: bit for bit, or both NaN (a NaN's payload may change
 * through float conversions). */
static int same(const hn_tensor *a, const hn_tensor *b)
{
    size_t es = (size_t)hn_dtype_size(a->dtype);
    for (int64_t i = 0; i < hn_tensor_numel(a); i++) {
        const char *x = (const char *)a->data + (size_t)i * es, *y = (const char *)b->data + (size_t)i * es;
        if (memcmp(x, y, es) != 0 && !(isnan(hn_load(a->dtype, a->data, i)) && isnan(hn_load(b->dtype, b->data, i))))
            return 0;
    }
    return 1;
}

/* A refusal says which file and why, on one line. */
static int located(const char *msg)
{
    static const char prefix[] = "fuzz.npy: error: ";
    size_t n = msg != NULL ? strlen(msg) : 0;
    return n > sizeof(prefix) && strncmp(msg, prefix, sizeof(prefix) - 1) == 0 && msg[n - 1] == '\n' &&
           strchr(msg, '\n') == msg + n - 1;
}

void hn_fuzz_npy(const uint8_t *data, size_t size, hn_fuzz_file_outcome *out)
{
    static const hn_dtype dtypes[] = {HN_F32, HN_BF16, HN_F16, HN_I32, HN_I64};
    static const uint8_t DEFAULT_HEADER[HN_FUZZ_NPY_HEADER] = {0, 0, 4, 0, 0};
    const uint8_t *h = size >= HN_FUZZ_NPY_HEADER ? data : DEFAULT_HEADER;
    size_t skip = size >= HN_FUZZ_NPY_HEADER ? HN_FUZZ_NPY_HEADER : 0;
    hn_tensor t, u;
    hn_strbuf err, again;
    size_t bytes;
    hn_status_t st;
    memset(out, 0, sizeof(*out));
    memset(&t, 0, sizeof(t));
    t.dtype = dtypes[h[0] % HN_ARRAY_LEN(dtypes)];
    t.ndim = 1 + h[1] % 3;
    for (int i = 0; i < t.ndim; i++)
        t.shape[i] = h[2 + i] % 17;
    hn_tensor_make_contiguous(&t); /* at most 16^3 elements: no overflow */
    u = t;
    bytes = hn_tensor_bytes(&t);
    t.data = malloc(bytes + 1);
    u.data = malloc(bytes + 1);
    if (t.data == NULL || u.data == NULL)
        goto done;
    memset(t.data, 0xa5, bytes); /* poison: what the decoder does not write shows */
    hn_sb_init(&err);
    hn_sb_init(&again);
    st = hn_npy_decode(data + skip, size - skip, "fuzz.npy", &t, &err);
    if (st != HN_OK) {
        if (st != HN_ERR_IO || !located(err.data))
            broken(out, "refused without one located line", err.data);
    } else {
        out->accepted = 1;
        if (err.data != NULL)
            broken(out, "decoded, with a message", err.data);
        /* every element written: decoded over another poison, the same */
        memset(u.data, 0x5a, bytes);
        if (hn_npy_decode(data + skip, size - skip, "fuzz.npy", &u, &err) != HN_OK || !same(&t, &u))
            broken(out, "decoded twice, the values differ (an element left unwritten)", hn_dtype_name(t.dtype));
        /* what decodes is a .npy file of t: written again, read back the same */
        memset(u.data, 0x5a, bytes);
        if (hn_npy_encode(&t, &again) != HN_OK)
            broken(out, "cannot encode what was decoded", NULL);
        else if (hn_npy_decode(again.data, again.len, "fuzz.npy", &u, &err) != HN_OK)
            broken(out, "the encoded tensor does not decode", err.data);
        else if (!same(&t, &u))
            broken(out, "encoded and decoded again, the values differ", hn_dtype_name(t.dtype));
    }
    hn_sb_free(&err);
    hn_sb_free(&again);
done:
    free(t.data);
    free(u.data);
}

#ifdef HN_FUZZ_ENTRY
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    hn_fuzz_file_outcome out;
    hn_fuzz_npy(data, size, &out);
    if (out.broken[0] != '\0') {
        fprintf(stderr, "fuzz npy: %s\n", out.broken);
        abort();
    }
    return 0;
}
#endif
