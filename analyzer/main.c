/* icx-analyze: reads icxtrace traces and prints reports.  Commands dispatch through a small table
 * (perf's builtin style); `analyze` is the default. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analysis.h"
#include "diff.h"
#include "export.h"
#include "live.h"
#include "reader.h"

struct icx_opts {
    int json;
    const char *output;
    const char *perfetto; /* --perfetto FILE */
    const char *html;     /* --html FILE */
    struct icx_timeline_opts tl;
    int npaths;
    char **paths;
};

static void usage(FILE *out)
{
    fprintf(
        out,
        "usage: icx-analyze [COMMAND] [--json] [-o FILE] [--html FILE] [--perfetto FILE] "
        "TRACE|DIR...\n"
        "\n"
        "commands:\n"
        "  analyze    per-link peer-copy report with utilization and imbalance (default)\n"
        "  summarize  processes, completeness, lost events and notes only\n"
        "  diff       diff [--json] [--html FILE] BASE NEW: what changed between two runs of a\n"
        "             job, headline first (BASE, NEW: a trace or a directory each; --html:\n"
        "             the new run's page with the diff on top; docs/DIFF.md)\n"
        "  follow     follow [--interval S] [--late S] [--once] [--json] DIR: the live view of a\n"
        "             running job, re-read every few seconds: per communicator the last call\n"
        "             each rank reached and who is late now, per NIC and GPU the rate now\n"
        "             (also --follow DIR; docs/LIVE.md)\n"
        "\n"
        "TRACE is an icxtrace file (*.icx.zst, possibly several concatenated); DIR is read for\n"
        "every *.icx.zst inside.  --json prints the document described in docs/JSON.md.\n"
        "\n"
        "  --html FILE          also write the HTML report: one self-contained page "
        "(docs/HTML.md)\n"
        "\n"
        "timeline (docs/TIMELINE.md):\n"
        "  --perfetto FILE      also write the job as a timeline for ui.perfetto.dev\n"
        "  --ranks LIST         only these ranks, e.g. 0-7,12\n"
        "  --window FROM:TO     only s FROM to TO after the job's first event (TO empty: the end)\n"
        "  --timeline-max-mb N  cut the timeline where it would pass N MiB (default 256; 0: no "
        "cap)\n");
}

/* "FROM:TO" in s, TO possibly empty: 0, or -1 after a message. */
static int parse_window(const char *s, struct icx_timeline_opts *tl)
{
    char *e;
    tl->t_from = strtod(s, &e);
    if (e == s || *e != ':' || tl->t_from < 0)
        goto bad;
    const char *to = e + 1;
    tl->t_to = *to ? strtod(to, &e) : 0;
    if ((*to && (e == to || *e)) || (*to && tl->t_to <= tl->t_from))
        goto bad;
    return 0;
bad:
    fprintf(stderr,
            "icx-analyze: --window %s: want FROM:TO in seconds, FROM < TO (TO may be empty)\n", s);
    return -1;
}

static int parse_opts(int argc, char **argv, struct icx_opts *o)
{
    memset(o, 0, sizeof(*o));
    o->tl.max_bytes = ICX_TIMELINE_MAX_BYTES;
    o->paths = calloc((size_t)argc + 1, sizeof(*o->paths));
    if (!o->paths)
        return -1;
    for (int i = 0; i < argc; i++) {
        if (!strcmp(argv[i], "--json"))
            o->json = 1;
        else if ((!strcmp(argv[i], "-o") || !strcmp(argv[i], "--output")) && i + 1 < argc)
            o->output = argv[++i];
        else if (!strcmp(argv[i], "--perfetto") && i + 1 < argc)
            o->perfetto = argv[++i];
        else if (!strcmp(argv[i], "--html") && i + 1 < argc)
            o->html = argv[++i];
        else if (!strcmp(argv[i], "--ranks") && i + 1 < argc) {
            o->tl.ranks = argv[++i];
            if (!icx_timeline_ranks_valid(o->tl.ranks)) {
                fprintf(stderr, "icx-analyze: --ranks %s: want a list like 0-7,12\n", o->tl.ranks);
                return -1;
            }
        } else if (!strcmp(argv[i], "--window") && i + 1 < argc) {
            if (parse_window(argv[++i], &o->tl) != 0)
                return -1;
        } else if (!strcmp(argv[i], "--timeline-max-mb") && i + 1 < argc) {
            char *e;
            double mb = strtod(argv[++i], &e);
            if (e == argv[i] || *e || !(mb >= 0) || mb > 1e7) {
                fprintf(stderr, "icx-analyze: --timeline-max-mb %s: want a size in MiB\n", argv[i]);
                return -1;
            }
            o->tl.max_bytes = (uint64_t)(mb * 1048576);
        } else if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            usage(stdout);
            exit(0);
        } else if (argv[i][0] == '-' && argv[i][1]) {
            fprintf(stderr, "icx-analyze: unknown option %s\n", argv[i]);
            return -1;
        } else
            o->paths[o->npaths++] = argv[i];
    }
    if (o->npaths == 0) {
        fprintf(stderr, "icx-analyze: no trace given\n");
        return -1;
    }
    return 0;
}

static int read_all(const struct icx_opts *o, struct icx_trace *t)
{
    int failed = 0;
    for (int i = 0; i < o->npaths; i++)
        failed += icx_read_path(t, o->paths[i]);
    return failed;
}

static int cmd_summarize(FILE *out, const struct icx_opts *o, const struct icx_trace *t)
{
    static const struct icx_report *const summary[] = {&icx_report_summary};
    return icx_reports_run(out, o->json, "summarize", t, summary, 1);
}

/* Write the timeline to o->perfetto: 0, or -1 after a message. */
static int write_timeline(const struct icx_opts *o, const struct icx_analysis *A)
{
    FILE *f = fopen(o->perfetto, "w");
    if (!f) {
        fprintf(stderr, "icx-analyze: %s: %s\n", o->perfetto, strerror(errno));
        return -1;
    }
    struct icx_timeline_stats st;
    int rc = icx_export_perfetto(f, A, &o->tl, &st);
    long size = ftell(f);
    if (fclose(f) != 0 || rc != 0) {
        fprintf(stderr, "icx-analyze: %s: the timeline could not be written\n", o->perfetto);
        return -1;
    }
    fprintf(stderr, "icx-analyze: timeline %s: %zu of %zu events, %.1f MiB (ui.perfetto.dev)\n",
            o->perfetto, st.events_written, st.events_total, (double)size / 1048576);
    if (isfinite(st.cut_s))
        fprintf(stderr,
                "icx-analyze: the timeline was cut at %.3f s to stay under %.0f MiB: choose "
                "--ranks, --window or --timeline-max-mb\n",
                st.cut_s, (double)o->tl.max_bytes / 1048576);
    return 0;
}

/* Write the HTML report to path: 0, or -1 after a message. */
static int write_html(const char *path, const struct icx_analysis *A)
{
    FILE *f = fopen(path, "w");
    if (!f) {
        fprintf(stderr, "icx-analyze: %s: %s\n", path, strerror(errno));
        return -1;
    }
    int rc = icx_export_html(f, A);
    if (fclose(f) != 0 || rc != 0) {
        fprintf(stderr, "icx-analyze: %s: the HTML report could not be written\n", path);
        return -1;
    }
    fprintf(stderr, "icx-analyze: HTML report %s (one file, opens offline)\n", path);
    return 0;
}

static int cmd_analyze(FILE *out, const struct icx_opts *o, const struct icx_trace *t)
{
    struct icx_analysis A = {.t = t};
    int rc = icx_analysis_compute(&A, icx_reports, icx_nreports);
    if (rc == 0) {
        icx_reports_write(out, o->json, "analyze", &A, icx_reports, icx_nreports);
        if (o->perfetto && write_timeline(o, &A) != 0)
            rc = -1;
        if (o->html && write_html(o->html, &A) != 0)
            rc = -1;
    }
    icx_analysis_free(&A, icx_reports, icx_nreports);
    return rc;
}

/* diff BASE NEW: two traces read apart.  0, 1 (a run unreadable or a write failed), 2 usage. */
static int cmd_diff(const struct icx_opts *o)
{
    if (o->npaths != 2) {
        fprintf(stderr, "icx-analyze: diff wants two runs: diff [--json] BASE NEW\n");
        return 2;
    }
    struct icx_trace t[2];
    memset(t, 0, sizeof(t));
    int rc = 0;
    for (int k = 0; k < 2; k++) {
        if (icx_read_path(&t[k], o->paths[k]) != 0 || t[k].nprocs == 0) {
            fprintf(stderr, "icx-analyze: diff: %s: %s\n", o->paths[k],
                    t[k].nprocs ? "partly unreadable (compared what could be read)"
                                : "no readable trace");
            rc = 1;
        }
    }
    FILE *out = stdout;
    if (t[0].nprocs && t[1].nprocs) {
        if (o->output && !(out = fopen(o->output, "w"))) {
            fprintf(stderr, "icx-analyze: %s: %s\n", o->output, strerror(errno));
            out = stdout;
            rc = 1;
        } else if (icx_diff(out, o->json, o->html, &t[0], &t[1]) != 0)
            rc = 1;
        if (fflush(out) != 0 || ferror(out)) {
            fprintf(stderr, "icx-analyze: error writing the diff: %s\n", strerror(errno));
            rc = 1;
        }
        if (out != stdout)
            fclose(out);
    }
    icx_trace_free(&t[0]);
    icx_trace_free(&t[1]);
    return rc;
}

static const struct {
    const char *name;
    int (*fn)(FILE *out, const struct icx_opts *o, const struct icx_trace *t);
} commands[] = {
    {"analyze", cmd_analyze},
    {"summarize", cmd_summarize},
};

int main(int argc, char **argv)
{
    int ci = 0, rc = 0;
    int first = 1;
    if (argc > 1) {
        for (size_t k = 0; k < sizeof(commands) / sizeof(commands[0]); k++)
            if (!strcmp(argv[1], commands[k].name)) {
                ci = (int)k;
                first = 2;
            }
        first = !strcmp(argv[1], "diff") ? 2 : first;
    }
    if (argc > 1 && (!strcmp(argv[1], "follow") || !strcmp(argv[1], "--follow")))
        return icx_follow_main(argc - 2, argv + 2);
    struct icx_opts o;
    struct icx_trace t;
    memset(&t, 0, sizeof(t));
    FILE *out = stdout;
    if (parse_opts(argc - first, argv + first, &o) != 0) {
        usage(stderr);
        free(o.paths);
        return 2;
    }
    if (argc > 1 && !strcmp(argv[1], "diff")) {
        rc = cmd_diff(&o);
        free(o.paths);
        return rc;
    }
    int failed = read_all(&o, &t);
    if (t.nprocs == 0) {
        fprintf(stderr, "icx-analyze: nothing to report: no readable trace among the inputs\n");
        rc = 1;
        goto out;
    }
    if (o.output) {
        out = fopen(o.output, "w");
        if (!out) {
            fprintf(stderr, "icx-analyze: %s: %s\n", o.output, strerror(errno));
            out = stdout;
            rc = 1;
            goto out;
        }
    }
    if (commands[ci].fn(out, &o, &t) != 0)
        rc = 1;
    if (fflush(out) != 0 || ferror(out)) {
        fprintf(stderr, "icx-analyze: error writing the report: %s\n", strerror(errno));
        rc = 1;
    }
    if (failed)
        rc = 1; /* the report covers the readable inputs; the others were named on stderr */
out:
    if (out != stdout)
        fclose(out);
    icx_trace_free(&t);
    free(o.paths);
    return rc;
}
