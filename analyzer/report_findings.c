/* Findings report: every finding the reports before it made, with its evidence and fix. */
#include <stdio.h>

#include "analysis.h"

static void findings_print(FILE *out, const struct icx_analysis *A)
{
    const struct icx_findings *F = &A->findings;
    if (!F->n) {
        fprintf(out, "\nFindings: none\n");
        return;
    }
    fprintf(out, "\nFindings\n");
    for (size_t i = 0; i < F->n; i++) {
        const struct icx_finding *f = &F->v[i];
        fprintf(out, "  [%s] %s", f->kind, f->host);
        if (f->pid >= 0) /* -1: a finding about the host (its NICs), not one process */
            fprintf(out, " pid %d", f->pid);
        if (f->rank >= 0)
            fprintf(out, " rank %d", f->rank);
        fprintf(out, ": %s\n    fix: %s\n", f->evidence, f->fix);
    }
}

static void findings_json(struct icx_json *j, const struct icx_analysis *A)
{
    const struct icx_findings *F = &A->findings;
    icx_json_arr(j, "findings");
    for (size_t i = 0; i < F->n; i++) {
        const struct icx_finding *f = &F->v[i];
        icx_json_obj(j, NULL);
        icx_json_str(j, "kind", f->kind);
        icx_json_str(j, "host", f->host);
        icx_json_int(j, "pid", f->pid);
        icx_json_arr(j, "ranks");
        if (f->rank >= 0)
            icx_json_int(j, NULL, f->rank);
        icx_json_end(j);
        icx_json_str(j, "evidence", f->evidence);
        icx_json_str(j, "fix", f->fix);
        icx_json_num(j, "confidence", f->confidence);
        icx_json_end(j);
    }
    icx_json_end(j);
}

const struct icx_report icx_report_findings = {
    .name = "findings",
    .print = findings_print,
    .json = findings_json,
};
