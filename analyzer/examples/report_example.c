/* The example report: a template for whoever adds the next one.  It is not part of icx-analyze;
 * `make` builds it as build/tests/example/icx-analyze-example, a copy of `icx-analyze analyze`
 * whose report table has one more entry, and test_example_report runs it.
 *
 * What it reports: per process, its peer copies by size class (include/icx/format_util.h) --
 * a histogram the product's reports do not print.  Text: one line per process; JSON: the key
 * "copy_sizes".  A report of the product would instead be one more `&icx_report_x` in
 * analyzer/reports.c's table, its struct pointer in struct icx_analysis (analysis.h) and its keys
 * in docs/JSON.md; the four entries are the same as here:
 *
 *   compute  reads the model (model.h: A->t and its processes) and the reports before it in the
 *            table (A->links, A->counters, ...), and owns what it allocates; -1 only when out of
 *            memory, after a one-line message;
 *   print    text, to `out`;
 *   json     its keys into the one document (json.h writes the escaping and the NaN -> null);
 *   free     what compute allocated, in reverse table order. */
#include <stdlib.h>
#include <string.h>

#include "analysis.h"
#include "icx/format_util.h"
#include "reader.h"

struct copy_sizes {
    size_t nprocs;
    uint64_t (*counts)[ICX_SIZE_CLASSES]; /* per process, copies per size class */
};

static int sizes_compute(struct icx_analysis *A)
{
    struct copy_sizes *s = calloc(1, sizeof(*s));
    if (s)
        s->counts = calloc(A->t->nprocs ? A->t->nprocs : 1, sizeof(*s->counts));
    if (!s || !s->counts) {
        free(s);
        fprintf(stderr, "icx-analyze-example: out of memory\n");
        return -1;
    }
    s->nprocs = A->t->nprocs;
    for (size_t i = 0; i < s->nprocs; i++) {
        const struct icx_proc *p = A->t->procs[i];
        for (size_t k = 0; k < p->ncopies; k++)
            s->counts[i][icx_size_class(p->copies[k].bytes)]++;
    }
    A->extra = s;
    return 0;
}

static void sizes_print(FILE *out, const struct icx_analysis *A)
{
    const struct copy_sizes *s = A->extra;
    fprintf(out, "\nPeer copies by size (example report)\n");
    for (size_t i = 0; i < s->nprocs; i++) {
        fprintf(out, "  pid %d:", (int)A->t->procs[i]->pid);
        for (unsigned c = 0; c < ICX_SIZE_CLASSES; c++)
            if (s->counts[i][c])
                fprintf(out, " <=%llu B: %llu", (unsigned long long)icx_size_class_max(c),
                        (unsigned long long)s->counts[i][c]);
        fprintf(out, "\n");
    }
}

static void sizes_json(struct icx_json *j, const struct icx_analysis *A)
{
    const struct copy_sizes *s = A->extra;
    icx_json_arr(j, "copy_sizes");
    for (size_t i = 0; i < s->nprocs; i++) {
        icx_json_obj(j, NULL);
        icx_json_int(j, "pid", A->t->procs[i]->pid);
        icx_json_arr(j, "buckets");
        for (unsigned c = 0; c < ICX_SIZE_CLASSES; c++)
            if (s->counts[i][c]) {
                icx_json_obj(j, NULL);
                icx_json_int(j, "le_bytes", (long long)icx_size_class_max(c));
                icx_json_int(j, "copies", (long long)s->counts[i][c]);
                icx_json_end(j);
            }
        icx_json_end(j);
        icx_json_end(j);
    }
    icx_json_end(j);
}

static void sizes_free(struct icx_analysis *A)
{
    struct copy_sizes *s = A->extra;
    if (s)
        free(s->counts);
    free(s);
    A->extra = NULL;
}

static const struct icx_report icx_report_copy_sizes = {
    .name = "copy_sizes",
    .compute = sizes_compute,
    .print = sizes_print,
    .json = sizes_json,
    .free = sizes_free,
};

/* icx-analyze-example [--json] TRACE...: the product's reports, then this one. */
int main(int argc, char **argv)
{
    int json = argc > 1 && !strcmp(argv[1], "--json");
    if (argc < 2 + json) {
        fprintf(stderr, "usage: icx-analyze-example [--json] TRACE...\n");
        return 2;
    }
    struct icx_trace t;
    memset(&t, 0, sizeof(t));
    for (int i = 1 + json; i < argc; i++)
        icx_read_path(&t, argv[i]); /* a bad input is named on stderr; the rest still read */
    const struct icx_report *table[32];
    size_t n = 0;
    for (size_t i = 0; i < icx_nreports && n < 31; i++)
        table[n++] = icx_reports[i];
    table[n++] = &icx_report_copy_sizes;
    int rc = icx_reports_run(stdout, json, "analyze", &t, table, n);
    size_t nprocs = t.nprocs;
    icx_trace_free(&t);
    return rc == 0 && nprocs ? 0 : 1;
}
