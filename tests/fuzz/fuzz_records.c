/* libFuzzer target for the record decoders and every parser of data embedded in a trace: the
 * topology, NUMA and PCI records, verbs, NCCL calls, NCCL's topology and graph XML and its debug
 * lines (NCCL_DUMP), hang dumps and Python stacks.  Its input is what a frame holds once
 * decompressed, a sequence of records, so mutations land on the records themselves instead of
 * on zstd's entropy coding; the target puts it into one frame and reads that as a trace, then
 * writes every report, the HTML report (escaping the trace's strings) and the timeline.  An
 * input not starting with a file header gets the current one in front.  Seeds: the golden
 * traces, decompressed (`make fuzz`). */
#include <stdlib.h>
#include <string.h>
#include <zstd.h>

#include "fuzz_analyze.h"
#include "icx/trace_format.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct icx_file_header h = {
        .h = {.type = ICX_REC_FILE_HEADER, .size = sizeof(h)},
        .magic = ICX_MAGIC,
        .version_major = ICX_VERSION_MAJOR,
        .version_minor = ICX_VERSION_MINOR,
        .oldest_major = ICX_OLDEST_MAJOR,
        .oldest_minor = ICX_OLDEST_MINOR,
        .header_size = sizeof(h),
        .features = ICX_FEAT_TSC | ICX_FEAT_DELTA | ICX_FEAT_STACKS,
    };
    int has_header = size >= 2 && (data[0] | data[1] << 8) == ICX_REC_FILE_HEADER;
    size_t raw_len = size + (has_header ? 0 : sizeof(h));
    uint8_t *raw = malloc(raw_len ? raw_len : 1);
    size_t cap = ZSTD_compressBound(raw_len);
    uint8_t *frame = malloc(cap);
    if (raw && frame) {
        if (!has_header)
            memcpy(raw, &h, sizeof(h));
        if (size)
            memcpy(raw + (has_header ? 0 : sizeof(h)), data, size);
        size_t n = ZSTD_compress(frame, cap, raw, raw_len, 1);
        if (!ZSTD_isError(n))
            fuzz_analyze(frame, n, 1);
    }
    free(raw);
    free(frame);
    return 0;
}
