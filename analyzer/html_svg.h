/* Inline SVG charts and HTML escaping for the HTML report (html_svg.c). */
#ifndef ICX_HTML_SVG_H
#define ICX_HTML_SVG_H

#include <stddef.h>
#include <stdio.h>

/* s as HTML text or attribute value: < > & " ' escaped, control bytes replaced. */
void icx_html_esc(FILE *out, const char *s);
/* <h3>, the trace's text escaped, then our own text (may be ""). */
void icx_html_h3(FILE *out, const char *from_trace, const char *ours);
/* "1.23 GB/s": v with an SI prefix for byte units. */
void icx_html_value(char *buf, size_t n, double v, const char *unit);

struct icx_heatmap {
    const char *id; /* unique in the page */
    int nr, nc;     /* rows, columns */
    const char *const *row, *const *col;
    const double *v;                    /* nr x nc, row-major; NAN: no cell */
    const char *unit, *legend;          /* legend: what the colour means (units included) */
    int lo_zero;                        /* the scale starts at 0 */
    const char *(*cell_text)(double v); /* a category name per value instead of a number */
    const unsigned char *mark;          /* nr x nc, nonzero: outline the cell (NULL: none) */
    const char *mark_text;              /* what a mark means, in the cell's tooltip */
};
void icx_html_heatmap(FILE *out, const struct icx_heatmap *h);

struct icx_series {
    const char *name;
    const double *x, *y; /* x: s from the chart's zero */
    size_t n;
};
struct icx_lines {
    const char *unit; /* of y */
    const struct icx_series *s;
    int ns;
};
void icx_html_lines(FILE *out, const struct icx_lines *L);

/* Labels that live as long as the page: a copy of text, or "?" when out of memory. */
struct icx_labels {
    char (*s)[96];
    size_t n, cap;
};
const char *icx_label(struct icx_labels *L, const char *text);

/* Sections of the page that the report (export_html.c) takes from export_html_nccl.c. */
struct icx_analysis;
void icx_html_nccl(FILE *out, const struct icx_analysis *A, struct icx_labels *L);
void icx_html_time(FILE *out, const struct icx_analysis *A, struct icx_labels *L);

#endif
