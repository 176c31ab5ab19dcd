/* libFuzzer target for the trace reader and every report built on it (the report table): any
 * input must be rejected or read, analyzed, printed and written as JSON without a crash, a leak or
 * undefined behaviour.  `make fuzz` builds and runs it over the golden traces as seeds. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "analysis.h"
#include "reader.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct icx_trace t;
    char err[256];
    memset(&t, 0, sizeof(t));
    if (icx_read_buffer(&t, "fuzz", data, size, err, sizeof(err)) == 0) {
        struct icx_analysis A = {.t = &t};
        FILE *null = fopen("/dev/null", "w");
        if (null && icx_analysis_compute(&A, icx_reports, icx_nreports) == 0) {
            struct icx_json j;
            icx_json_begin(&j, null);
            icx_json_obj(&j, NULL);
            for (size_t i = 0; i < icx_nreports; i++) {
                if (icx_reports[i]->print)
                    icx_reports[i]->print(null, &A);
                if (icx_reports[i]->json)
                    icx_reports[i]->json(&j, &A);
            }
            icx_json_end(&j);
        }
        if (null)
            fclose(null);
        icx_analysis_free(&A, icx_reports, icx_nreports);
    }
    icx_trace_free(&t);
    return 0;
}
