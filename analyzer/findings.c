/* Findings (findings.h): every report adds to one list. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "findings.h"

void icx_finding_add(struct icx_findings *F, const char *kind, const struct icx_proc *p,
                     const char *evidence, const char *fix)
{
    struct icx_finding *n = realloc(F->v, (F->n + 1) * sizeof(*n));
    if (!n)
        return;
    F->v = n;
    struct icx_finding *f = &F->v[F->n++];
    memset(f, 0, sizeof(*f));
    snprintf(f->kind, sizeof(f->kind), "%s", kind);
    f->pid = p ? p->pid : -1;
    f->rank = p ? p->rank : -1;
    snprintf(f->host, sizeof(f->host), "%s", p && p->host ? p->host : "");
    snprintf(f->evidence, sizeof(f->evidence), "%s", evidence);
    snprintf(f->fix, sizeof(f->fix), "%s", fix);
    f->confidence = NAN;
}

void icx_findings_free(struct icx_findings *F)
{
    free(F->v);
    memset(F, 0, sizeof(*F));
}
