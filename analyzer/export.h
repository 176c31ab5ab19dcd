/* What icx-analyze writes besides its reports: the Perfetto timeline (export_perfetto.c) and the
 * HTML report (export_html.c), both from a computed analysis (docs/TIMELINE.md, docs/HTML.md). */
#ifndef ICX_EXPORT_H
#define ICX_EXPORT_H

#include <stdint.h>
#include <stdio.h>

#include "analysis.h"

struct icx_timeline_opts {
    const char *ranks;   /* "0-3,7": only these ranks; NULL every rank */
    double t_from, t_to; /* window, s from the job's first event; t_to <= 0: to the end */
    uint64_t max_bytes;  /* cut the timeline at the time it would pass this size; 0 no cap */
};
#define ICX_TIMELINE_MAX_BYTES (256ull << 20) /* the default cap: ui.perfetto.dev opens it */

struct icx_timeline_stats {
    size_t events_total, events_written;
    double cut_s; /* where the cap cut it, s from the first event; INFINITY: not cut */
};

/* Is "0-3,7" a rank list? */
int icx_timeline_ranks_valid(const char *list);
/* Trace Event Format JSON of the analysis's trace: 0, or -1 after a message (out of memory). */
int icx_export_perfetto(FILE *out, const struct icx_analysis *A, const struct icx_timeline_opts *o,
                        struct icx_timeline_stats *st);

/* The HTML report (export_html.c, docs/HTML.md): 0, or -1 when writing failed. */
int icx_export_html(FILE *out, const struct icx_analysis *A);
/* The same with section(out, arg) written after the job's summary (icx-analyze diff --html). */
int icx_export_html_with(FILE *out, const struct icx_analysis *A,
                         void (*section)(FILE *out, const void *arg), const void *arg);

#endif
