/* The report table of `icx-analyze analyze` (analysis.h): output order, which is also compute
 * order -- each report may use those before it. */
#include "analysis.h"

#define ICX_ANALYZE_VERSION "0.1.0"

const struct icx_report *const icx_reports[] = {
    &icx_report_summary,     &icx_report_links, &icx_report_topo,     &icx_report_counters,
    &icx_report_numa,        &icx_report_verbs, &icx_report_nccl,     &icx_report_nccl_errors,
    &icx_report_nccl_plugin, &icx_report_hang,  &icx_report_findings,
};
const size_t icx_nreports = sizeof(icx_reports) / sizeof(icx_reports[0]);

int icx_analysis_compute(struct icx_analysis *A, const struct icx_report *const *reports, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (reports[i]->compute && reports[i]->compute(A) != 0)
            return -1;
    return 0;
}

void icx_analysis_free(struct icx_analysis *A, const struct icx_report *const *reports, size_t n)
{
    for (size_t i = n; i-- > 0;)
        if (reports[i]->free)
            reports[i]->free(A);
    icx_findings_free(&A->findings);
}

void icx_reports_write(FILE *out, int json, const char *command, const struct icx_analysis *A,
                       const struct icx_report *const *reports, size_t n)
{
    if (json) {
        struct icx_json j;
        icx_json_begin(&j, out);
        icx_json_obj(&j, NULL);
        icx_json_str(&j, "tool", "icx-analyze");
        icx_json_str(&j, "version", ICX_ANALYZE_VERSION);
        icx_json_str(&j, "command", command);
        icx_json_int(&j, "schema", 1);
        for (size_t i = 0; i < n; i++)
            if (reports[i]->json)
                reports[i]->json(&j, A);
        icx_json_end(&j);
    } else {
        for (size_t i = 0; i < n; i++)
            if (reports[i]->print)
                reports[i]->print(out, A);
    }
}

int icx_reports_run(FILE *out, int json, const char *command, const struct icx_trace *t,
                    const struct icx_report *const *reports, size_t n)
{
    struct icx_analysis A = {.t = t};
    int rc = icx_analysis_compute(&A, reports, n);
    if (rc == 0)
        icx_reports_write(out, json, command, &A, reports, n);
    icx_analysis_free(&A, reports, n);
    return rc;
}
