/* icx-analyze: reads icxtrace traces and prints reports.  Commands dispatch through a small table
 * (perf's builtin style); `analyze` is the default. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analysis.h"
#include "reader.h"

struct icx_opts {
    int json;
    const char *output;
    int npaths;
    char **paths;
};

static void usage(FILE *out)
{
    fprintf(
        out,
        "usage: icx-analyze [COMMAND] [--json] [-o FILE] TRACE|DIR...\n"
        "\n"
        "commands:\n"
        "  analyze    per-link peer-copy report with utilization and imbalance (default)\n"
        "  summarize  processes, completeness, lost events and notes only\n"
        "\n"
        "TRACE is an icxtrace file (*.icx.zst, possibly several concatenated); DIR is read for\n"
        "every *.icx.zst inside.  --json prints the document described in docs/JSON.md.\n");
}

static int parse_opts(int argc, char **argv, struct icx_opts *o)
{
    memset(o, 0, sizeof(*o));
    o->paths = calloc((size_t)argc + 1, sizeof(*o->paths));
    if (!o->paths)
        return -1;
    for (int i = 0; i < argc; i++) {
        if (!strcmp(argv[i], "--json"))
            o->json = 1;
        else if ((!strcmp(argv[i], "-o") || !strcmp(argv[i], "--output")) && i + 1 < argc)
            o->output = argv[++i];
        else if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
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

static int cmd_analyze(FILE *out, const struct icx_opts *o, const struct icx_trace *t)
{
    return icx_reports_run(out, o->json, "analyze", t, icx_reports, icx_nreports);
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
    }
    struct icx_opts o;
    struct icx_trace t;
    memset(&t, 0, sizeof(t));
    FILE *out = stdout;
    if (parse_opts(argc - first, argv + first, &o) != 0) {
        usage(stderr);
        free(o.paths);
        return 2;
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
