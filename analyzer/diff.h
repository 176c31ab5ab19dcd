/* icx-analyze diff (diff.c, docs/DIFF.md): two runs of one job compared. */
#ifndef ICX_DIFF_H
#define ICX_DIFF_H

#include <stdio.h>

#include "analysis.h"

/* Analyze both runs, then write what changed from base to next, headline first: text, or (json)
 * the document of docs/DIFF.md.  0, or -1 after a message (out of memory). */
int icx_diff(FILE *out, int json, const struct icx_trace *base, const struct icx_trace *next);

#endif
