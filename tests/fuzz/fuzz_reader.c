/* libFuzzer target for the trace reader and every report built on it (fuzz_analyze.c): any input
 * must be rejected or read, analyzed and written as text and JSON without a crash, a leak or
 * undefined behaviour.  Its inputs are whole trace files (zstd frames), for the framing's and
 * decompression's faults; fuzz_records.c reaches the decoders, the HTML report and the timeline. */
#include <stddef.h>
#include <stdint.h>

#include "fuzz_analyze.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_analyze(data, size, 0);
    return 0;
}
