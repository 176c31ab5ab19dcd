/* Inline SVG for the HTML report (export_html.c): escaping, a heatmap and a line chart.  Every
 * label may come from a trace, so every label is escaped; exact values sit in <title> elements,
 * which browsers show on hover without any script. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "html_svg.h"

void icx_html_esc(FILE *out, const char *s)
{
    for (const unsigned char *p = (const unsigned char *)(s ? s : ""); *p; p++) {
        switch (*p) {
        case '<': fputs("&lt;", out); break;
        case '>': fputs("&gt;", out); break;
        case '&': fputs("&amp;", out); break;
        case '"': fputs("&quot;", out); break;
        case '\'': fputs("&#39;", out); break;
        default:
            if (*p < 0x20 && *p != '\n' && *p != '\t')
                fputs("&#xfffd;", out);
            else
                fputc(*p, out);
        }
    }
}

void icx_html_h3(FILE *out, const char *from_trace, const char *ours)
{
    fputs("<h3>", out);
    icx_html_esc(out, from_trace);
    fprintf(out, "%s</h3>\n", ours);
}

/* White to dark blue, then red for the top of the scale: x in 0..1. */
static void colour(double x, char *buf, size_t n)
{
    static const double stops[5][3] = {
        {247, 251, 255}, {158, 202, 225}, {49, 130, 189}, {8, 48, 107}, {165, 15, 21}};
    x = x < 0 ? 0 : x > 1 ? 1 : x;
    double f = x * 4;
    int i = f >= 4 ? 3 : (int)f;
    f -= i;
    snprintf(buf, n, "rgb(%d,%d,%d)", (int)(stops[i][0] + f * (stops[i + 1][0] - stops[i][0])),
             (int)(stops[i][1] + f * (stops[i + 1][1] - stops[i][1])),
             (int)(stops[i][2] + f * (stops[i + 1][2] - stops[i][2])));
}

void icx_html_value(char *buf, size_t n, double v, const char *unit)
{
    static const char *const pre[] = {"", "k", "M", "G", "T", "P"};
    int k = 0;
    if (!isfinite(v)) {
        snprintf(buf, n, "\xe2\x80\x93"); /* no value */
        return;
    }
    double a = fabs(v);
    if (!strcmp(unit, "B") || !strcmp(unit, "B/s") || !strcmp(unit, "b/s"))
        while (a >= 1000 && k < 5) {
            a /= 1000;
            v /= 1000;
            k++;
        }
    snprintf(buf, n, "%.3g %s%s", v, pre[k], unit);
}

void icx_html_heatmap(FILE *out, const struct icx_heatmap *h)
{
    double lo = INFINITY, hi = -INFINITY;
    for (int i = 0; i < h->nr * h->nc; i++)
        if (isfinite(h->v[i])) {
            lo = fmin(lo, h->v[i]);
            hi = fmax(hi, h->v[i]);
        }
    if (!isfinite(lo))
        lo = hi = 0;
    if (h->lo_zero)
        lo = 0;
    size_t longest = 0; /* the row labels' room, roughly 6.5 px a character at 11 px */
    for (int r = 0; r < h->nr; r++)
        longest = strlen(h->row[r]) > longest ? strlen(h->row[r]) : longest;
    int cell = h->nc > 32 ? 12 : 28, left = 16 + (int)(6.5 * (double)longest), top = 110;
    left = left < 60 ? 60 : left > 420 ? 420 : left;
    int w = left + h->nc * cell + 20, ht = top + h->nr * cell + 60;
    w = w < left + 420 ? left + 420 : w; /* the legend's room */
    fprintf(out, "<svg class=\"chart\" width=\"%d\" height=\"%d\" role=\"img\">", w, ht);
    for (int c = 0; c < h->nc; c++) {
        fprintf(out, "<text class=\"lab\" transform=\"translate(%d,%d) rotate(-60)\">",
                left + c * cell + cell / 2 + 4, top - 6);
        icx_html_esc(out, h->col[c]);
        fputs("</text>", out);
    }
    char col[32], val[64];
    for (int r = 0; r < h->nr; r++) {
        fprintf(out, "<text class=\"lab\" x=\"%d\" y=\"%d\" text-anchor=\"end\">", left - 6,
                top + r * cell + cell / 2 + 4);
        icx_html_esc(out, h->row[r]);
        fputs("</text>", out);
        for (int c = 0; c < h->nc; c++) {
            double v = h->v[r * h->nc + c];
            if (!isfinite(v)) {
                fprintf(out, "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" class=\"none\"/>",
                        left + c * cell, top + r * cell, cell - 1, cell - 1);
                continue;
            }
            colour(hi > lo ? (v - lo) / (hi - lo) : 0, col, sizeof(col));
            int mark = h->mark && h->mark[r * h->nc + c];
            fprintf(out, "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" fill=\"%s\"%s><title>",
                    left + c * cell, top + r * cell, cell - 1, cell - 1, col,
                    mark ? " class=\"mark\"" : "");
            icx_html_esc(out, h->row[r]);
            fputs(" \xe2\x86\x92 ", out);
            icx_html_esc(out, h->col[c]);
            if (h->cell_text)
                fprintf(out, ": %s", h->cell_text(v));
            else {
                icx_html_value(val, sizeof(val), v, h->unit);
                fprintf(out, ": %s", val);
            }
            if (mark && h->mark_text)
                fprintf(out, " (%s)", h->mark_text);
            fputs("</title></rect>", out);
            if (h->cell_text && cell >= 28)
                fprintf(out, "<text class=\"cell\" x=\"%d\" y=\"%d\">%s</text>",
                        left + c * cell + 3, top + r * cell + cell / 2 + 4, h->cell_text(v));
        }
    }
    /* legend */
    int ly = top + h->nr * cell + 20;
    fprintf(out, "<defs><linearGradient id=\"g-%s\">", h->id);
    for (int s = 0; s <= 4; s++) {
        colour(s / 4.0, col, sizeof(col));
        fprintf(out, "<stop offset=\"%d%%\" stop-color=\"%s\"/>", s * 25, col);
    }
    fprintf(out,
            "</linearGradient></defs><rect x=\"%d\" y=\"%d\" width=\"160\" height=\"10\" "
            "fill=\"url(#g-%s)\"/>",
            left, ly, h->id);
    if (h->cell_text)
        fprintf(out, "<text class=\"lab\" x=\"%d\" y=\"%d\">%s</text>", left + 170, ly + 10,
                h->legend ? h->legend : "");
    else {
        icx_html_value(val, sizeof(val), lo, h->unit);
        fprintf(out, "<text class=\"lab\" x=\"%d\" y=\"%d\">%s</text>", left, ly + 24, val);
        icx_html_value(val, sizeof(val), hi, h->unit);
        fprintf(out, "<text class=\"lab\" x=\"%d\" y=\"%d\" text-anchor=\"end\">%s</text>",
                left + 160, ly + 24, val);
        fprintf(out, "<text class=\"lab\" x=\"%d\" y=\"%d\">", left + 170, ly + 10);
        icx_html_esc(out, h->legend ? h->legend : h->unit);
        fputs("</text>", out);
    }
    fputs("</svg>\n", out);
}

void icx_html_lines(FILE *out, const struct icx_lines *L)
{
    static const char *const pal[] = {"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd",
                                      "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"};
    double x1 = 0, y1 = 0;
    for (int s = 0; s < L->ns; s++)
        for (size_t k = 0; k < L->s[s].n; k++) {
            x1 = fmax(x1, L->s[s].x[k]);
            y1 = fmax(y1, L->s[s].y[k]);
        }
    if (y1 <= 0)
        y1 = 1;
    if (x1 <= 0)
        x1 = 1;
    int W = 640, H = 200, left = 70, top = 10;
    fprintf(out, "<svg class=\"chart\" width=\"%d\" height=\"%d\" role=\"img\">", W + left + 180,
            H + top + 40);
    fprintf(out, "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" class=\"frame\"/>", left, top,
            W, H);
    char val[64];
    icx_html_value(val, sizeof(val), y1, L->unit);
    fprintf(out, "<text class=\"lab\" x=\"%d\" y=\"%d\" text-anchor=\"end\">%s</text>", left - 4,
            top + 10, val);
    fprintf(out, "<text class=\"lab\" x=\"%d\" y=\"%d\" text-anchor=\"end\">0</text>", left - 4,
            top + H);
    fprintf(out, "<text class=\"lab\" x=\"%d\" y=\"%d\">0 s</text>", left, top + H + 16);
    fprintf(out, "<text class=\"lab\" x=\"%d\" y=\"%d\" text-anchor=\"end\">%.3g s</text>",
            left + W, top + H + 16, x1);
    for (int s = 0; s < L->ns; s++) {
        const char *c = pal[s % 10];
        fprintf(out, "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"1.5\" points=\"", c);
        for (size_t k = 0; k < L->s[s].n; k++)
            fprintf(out, "%.1f,%.1f ", left + W * L->s[s].x[k] / x1,
                    top + H - H * L->s[s].y[k] / y1);
        double peak = 0;
        for (size_t k = 0; k < L->s[s].n; k++)
            peak = fmax(peak, L->s[s].y[k]);
        icx_html_value(val, sizeof(val), peak, L->unit);
        fputs("\"><title>", out);
        icx_html_esc(out, L->s[s].name);
        fprintf(out, ": peak %s</title></polyline>", val);
        if (s < 16) {
            fprintf(out, "<rect x=\"%d\" y=\"%d\" width=\"10\" height=\"10\" fill=\"%s\"/>",
                    left + W + 10, top + s * 14, c);
            fprintf(out, "<text class=\"lab\" x=\"%d\" y=\"%d\">", left + W + 24, top + s * 14 + 9);
            icx_html_esc(out, L->s[s].name);
            fputs("</text>", out);
        }
    }
    fputs("</svg>\n", out);
}

const char *icx_label(struct icx_labels *L, const char *text)
{
    if (L->n == L->cap) {
        size_t c = L->cap ? 2 * L->cap : 256;
        void *p = realloc(L->s, c * sizeof(*L->s));
        if (!p)
            return "?";
        L->s = p;
        L->cap = c;
    }
    snprintf(L->s[L->n], sizeof(L->s[0]), "%s", text ? text : "?");
    return L->s[L->n++];
}
