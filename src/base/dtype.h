/* Element types, their sizes and names, and bf16/f16 <-> float conversions. */
#ifndef HN_DTYPE_H
#define HN_DTYPE_H

#include <stdint.h>
#include <string.h>

/* X(enum, name, size, is_float) */
#define HN_DTYPE_LIST(X)                                                     \
    X(F32, "f32", 4, 1)                                                      \
    X(BF16, "bf16", 2, 1)                                                    \
    X(F16, "f16", 2, 1)                                                      \
    X(I32, "i32", 4, 0)                                                      \
    X(I64, "i64", 8, 0)

typedef enum hn_dtype {
#define X(e, n, s, f) HN_##e,
    HN_DTYPE_LIST(X)
#undef X
    HN_DTYPE_COUNT
} hn_dtype;

const char *hn_dtype_name(hn_dtype t);
int hn_dtype_size(hn_dtype t);
int hn_dtype_is_float(hn_dtype t);
/* -1 if `name` (length n) is no dtype. */
int hn_dtype_parse(const char *name, int n);

static inline float hn_bf16_to_f32(uint16_t h)
{
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

static inline uint16_t hn_f32_to_bf16(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    if ((u & 0x7fffffffu) > 0x7f800000u) /* NaN stays a quiet NaN */
        return (uint16_t)((u >> 16) | 0x40u);
    u += 0x7fffu + ((u >> 16) & 1u); /* round to nearest even */
    return (uint16_t)(u >> 16);
}

static inline float hn_f16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1fu;
    uint32_t man = h & 0x3ffu;
    uint32_t u;
    float f;
    if (exp == 0) {
        if (man == 0) {
            u = sign;
        } else { /* subnormal: normalise */
            exp = 127 - 15 + 1;
            while ((man & 0x400u) == 0) {
                man <<= 1;
                exp--;
            }
            man &= 0x3ffu;
            u = sign | (exp << 23) | (man << 13);
        }
    } else if (exp == 31) {
        u = sign | 0x7f800000u | (man << 13);
    } else {
        u = sign | ((exp + 127 - 15) << 23) | (man << 13);
    }
    memcpy(&f, &u, 4);
    return f;
}

static inline uint16_t hn_f32_to_f16(float f)
{
    uint32_t u, sign, man;
    int exp;
    memcpy(&u, &f, 4);
    sign = (u >> 16) & 0x8000u;
    if ((u & 0x7fffffffu) > 0x7f800000u)
        return (uint16_t)(sign | 0x7e00u);
    exp = (int)((u >> 23) & 0xffu) - 127 + 15;
    man = u & 0x7fffffu;
    if (exp >= 31)
        return (uint16_t)(sign | 0x7c00u);
    if (exp <= 0) {
        uint32_t shift, half, rem, r;
        if (exp < -10)
            return (uint16_t)sign;
        man |= 0x800000u;
        shift = (uint32_t)(14 - exp);
        half = 1u << (shift - 1);
        rem = man & ((1u << shift) - 1);
        r = man >> shift;
        if (rem > half || (rem == half && (r & 1u)))
            r++;
        return (uint16_t)(sign | r);
    }
    {
        uint32_t r = ((uint32_t)exp << 10) | (man >> 13);
        uint32_t rem = man & 0x1fffu;
        if (rem > 0x1000u || (rem == 0x1000u && (r & 1u)))
            r++; /* may carry into the exponent: still correct */
        return (uint16_t)(sign | r);
    }
}

/* Element i of a buffer as double / stored from double (rounded). */
static inline double hn_load(hn_dtype t, const void *p, int64_t i)
{
    switch (t) {
    case HN_F32: return ((const float *)p)[i];
    case HN_BF16: return hn_bf16_to_f32(((const uint16_t *)p)[i]);
    case HN_F16: return hn_f16_to_f32(((const uint16_t *)p)[i]);
    case HN_I32: return ((const int32_t *)p)[i];
    case HN_I64: return (double)((const int64_t *)p)[i];
    default: return 0;
    }
}

static inline void hn_store(hn_dtype t, void *p, int64_t i, double v)
{
    switch (t) {
    case HN_F32: ((float *)p)[i] = (float)v; break;
    case HN_BF16: ((uint16_t *)p)[i] = hn_f32_to_bf16((float)v); break;
    case HN_F16: ((uint16_t *)p)[i] = hn_f32_to_f16((float)v); break;
    case HN_I32: ((int32_t *)p)[i] = (int32_t)v; break;
    case HN_I64: ((int64_t *)p)[i] = (int64_t)v; break;
    default: break;
    }
}

#endif
