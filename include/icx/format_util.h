/* Rules of the trace format that the tracer and the analyzer must apply the same way. */
#ifndef ICX_FORMAT_UTIL_H
#define ICX_FORMAT_UTIL_H

#include <stdint.h>

/* Size classes (VERBS_AGG size_class; the analyzer's histograms): 0 holds 0 bytes, class c >= 1
 * holds 2^(c-2) < bytes <= 2^(c-1).  Classes 0 .. ICX_SIZE_CLASSES - 1. */
#define ICX_SIZE_CLASSES 66
static inline unsigned icx_size_class(uint64_t bytes)
{
    return bytes == 0 ? 0 : bytes == 1 ? 1 : 65u - (unsigned)__builtin_clzll(bytes - 1);
}
/* The largest byte count of class c (the "le" bound of a histogram bucket). */
static inline uint64_t icx_size_class_max(unsigned c)
{
    return c == 0 ? 0 : c >= 65 ? UINT64_MAX : 1ull << (c - 1);
}

#endif
