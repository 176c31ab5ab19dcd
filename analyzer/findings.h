/* Findings: problems a report names, with evidence and a fix (`kind` as in docs/JSON.md).  Every
 * report adds to one list; the findings report prints it last. */
#ifndef ICX_FINDINGS_H
#define ICX_FINDINGS_H

#include <stdint.h>

#include "model.h"

struct icx_finding {
    char kind[32], host[128];
    int32_t pid, rank;
    char evidence[1400], fix[600];
    double confidence; /* 0..1 where the rule has a statistical basis (stragglers), else NaN */
};
struct icx_findings {
    struct icx_finding *v;
    size_t n;
};
/* A finding about process p; p NULL: about no one process (pid and rank -1, no host). */
void icx_finding_add(struct icx_findings *F, const char *kind, const struct icx_proc *p,
                     const char *evidence, const char *fix);
void icx_findings_free(struct icx_findings *F);

#endif
