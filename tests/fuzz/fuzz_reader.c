/* libFuzzer target for the trace reader and the reports built on it: any input must be rejected
 * or read without a crash, a leak or undefined behaviour.  `make fuzz` builds and runs it over the
 * golden traces as seeds. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "report.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct icx_trace t;
    char err[256];
    memset(&t, 0, sizeof(t));
    if (icx_read_buffer(&t, "fuzz", data, size, err, sizeof(err)) == 0) {
        struct icx_links L;
        struct icx_numa N;
        struct icx_findings F = {0};
        struct icx_counters C;
        icx_numa_compute(&t, &N, &F);
        icx_counters_compute(&t, &C);
        icx_counters_over_time(&t, &C);
        if (icx_links_compute(&t, &L) == 0) {
            FILE *null = fopen("/dev/null", "w");
            if (null) {
                icx_links_print(null, &L);
                struct icx_json j;
                icx_json_begin(&j, null);
                icx_json_obj(&j, NULL);
                icx_summary_json(&j, &t);
                icx_links_json(&j, &L);
                icx_numa_json(&j, &N);
                icx_findings_json(&j, &F);
                icx_json_end(&j);
                icx_numa_print(null, &N);
                icx_counters_print(null, &C);
                icx_counters_json(&j, &C);
                icx_topo_json(&j, &t, &L);
                icx_topo_print(null, &t, &L);
                icx_findings_print(null, &F);
                fclose(null);
            }
        }
        icx_links_free(&L);
        icx_numa_free(&N);
        icx_counters_free(&C);
        icx_findings_free(&F);
    }
    icx_trace_free(&t);
    return 0;
}
