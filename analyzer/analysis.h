/* The reports and what they share.  icx-analyze (main.c) loops over the report table (reports.c):
 * every report computes into one analysis, in table order -- so a report may use those before it
 * (topology uses the links; NCCL explains the counters) -- then each prints its text or writes its
 * JSON keys, in the same order, and all are freed in reverse (perf's builtin table is the model).
 * Adding a report: analyzer/examples/report_example.c and docs/ARCHITECTURE.md. */
#ifndef ICX_ANALYSIS_H
#define ICX_ANALYSIS_H

#include <stdio.h>

#include "findings.h"
#include "json.h"
#include "model.h"

/* What the reports computed; each owns its pointer (NULL before its compute). */
struct icx_analysis {
    const struct icx_trace *t;
    struct icx_findings findings; /* every report may add to them; printed last */
    struct icx_links *links;
    struct icx_counters *counters;
    struct icx_numa *numa;
    struct icx_verbs *verbs;
    struct icx_nccl *nccl;
    struct icx_nccl_errors *nccl_errors;
    struct icx_nccl_plugin *nccl_plugin;
    void *extra; /* a report outside the product's table (examples/) */
};

struct icx_report {
    const char *name;
    /* 0, or -1 after a one-line message on stderr (out of memory) */
    int (*compute)(struct icx_analysis *A);
    void (*print)(FILE *out, const struct icx_analysis *A);
    void (*json)(struct icx_json *j, const struct icx_analysis *A);
    void (*free)(struct icx_analysis *A);
    /* optional: its section of the HTML report, written after the NCCL sections (export_html.c;
     * every trace string through icx_html_esc) */
    void (*html)(FILE *out, const struct icx_analysis *A);
};

/* The reports of `icx-analyze analyze`, in order (reports.c). */
extern const struct icx_report *const icx_reports[];
extern const size_t icx_nreports;
extern const struct icx_report icx_report_summary, icx_report_links, icx_report_topo,
    icx_report_counters, icx_report_numa, icx_report_verbs, icx_report_nccl, icx_report_nccl_errors,
    icx_report_nccl_plugin, icx_report_hang, icx_report_findings;

/* Compute every report of `reports` into A (A->t set); the first failing report's -1. */
int icx_analysis_compute(struct icx_analysis *A, const struct icx_report *const *reports, size_t n);
void icx_analysis_free(struct icx_analysis *A, const struct icx_report *const *reports, size_t n);
/* Write computed reports to out: text, or (json) one JSON document headed by the tool, its
 * version and `command` (docs/JSON.md). */
void icx_reports_write(FILE *out, int json, const char *command, const struct icx_analysis *A,
                       const struct icx_report *const *reports, size_t n);
/* Compute `reports` over t, then write them to out: text, or (json) one JSON document headed by
 * the tool, its version and `command` (docs/JSON.md); free them.  0, or compute's -1. */
int icx_reports_run(FILE *out, int json, const char *command, const struct icx_trace *t,
                    const struct icx_report *const *reports, size_t n);

#endif
