/* icx-analyze diff (diff.c, docs/DIFF.md): two runs of one job compared. */
#ifndef ICX_DIFF_H
#define ICX_DIFF_H

#include <stdio.h>

#include "analysis.h"

/* Analyze both runs, then write what changed from base to next, headline first: text, or (json)
 * the document of docs/DIFF.md; with html, also the new run's HTML report with the diff as its
 * first section there.  0, or -1 after a message (out of memory, html not writable). */
int icx_diff(FILE *out, int json, const char *html, const struct icx_trace *base,
             const struct icx_trace *next);

#endif
