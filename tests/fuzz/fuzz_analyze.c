/* The analysis a fuzz target runs on what the reader accepted: every report printed and written
 * as JSON and, on request, the HTML report (which escapes the trace's strings) and the Perfetto
 * timeline (they cost 6 times the rest: a target whose inputs rarely reach them leaves them out).
 */
#include "fuzz_analyze.h"

#include <stdio.h>
#include <string.h>

#include "analysis.h"
#include "export.h"
#include "reader.h"

static void write_everything(FILE *null, struct icx_analysis *A, int exports)
{
    struct icx_json j;
    icx_json_begin(&j, null);
    icx_json_obj(&j, NULL);
    for (size_t i = 0; i < icx_nreports; i++) {
        if (icx_reports[i]->print)
            icx_reports[i]->print(null, A);
        if (icx_reports[i]->json)
            icx_reports[i]->json(&j, A);
    }
    icx_json_end(&j);
    if (!exports)
        return;
    icx_export_html(null, A);
    struct icx_timeline_opts o = {.max_bytes = 1u << 20};
    struct icx_timeline_stats st;
    icx_export_perfetto(null, A, &o, &st);
}

void fuzz_analyze(const uint8_t *buf, size_t len, int exports)
{
    struct icx_trace t;
    char err[256];
    memset(&t, 0, sizeof(t));
    if (icx_read_buffer(&t, "fuzz", buf, len, err, sizeof(err)) == 0) {
        struct icx_analysis A = {.t = &t};
        FILE *null = fopen("/dev/null", "w");
        if (null && icx_analysis_compute(&A, icx_reports, icx_nreports) == 0)
            write_everything(null, &A, exports);
        if (null)
            fclose(null);
        icx_analysis_free(&A, icx_reports, icx_nreports);
    }
    icx_trace_free(&t);
}
