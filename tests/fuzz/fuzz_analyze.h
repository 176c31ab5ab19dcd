/* What every fuzz target does with a buffer the reader accepted (fuzz_analyze.c). */
#ifndef ICX_FUZZ_ANALYZE_H
#define ICX_FUZZ_ANALYZE_H

#include <stddef.h>
#include <stdint.h>

/* Read buf as a trace; if it is one, compute every report of the report table and write each
 * as text and as JSON, and with `exports` the HTML report and the Perfetto timeline, all to
 * /dev/null. */
void fuzz_analyze(const uint8_t *buf, size_t len, int exports);

#endif
