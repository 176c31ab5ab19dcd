/* Summary report: what was read (inputs, damage), which processes, what the tracer lost and what
 * it could not see (notes). */
#include <math.h>
#include <string.h>

#include "analysis.h"
#include "format.h"

static uint64_t lost_total(const struct icx_proc *p)
{
    uint64_t n = 0;
    for (int i = 0; i < ICX_LOST_SLOTS; i++)
        n += p->lost[i];
    return n;
}

static void summary_print(FILE *out, const struct icx_analysis *A)
{
    const struct icx_trace *t = A->t;
    fprintf(out, "icxtrace report: %zu process%s from %zu input%s\n", t->nprocs,
            t->nprocs == 1 ? "" : "es", t->ninputs, t->ninputs == 1 ? "" : "s");
    for (size_t i = 0; i < t->ninputs; i++) {
        const struct icx_input *in = &t->inputs[i];
        if (in->frames_bad || in->bytes_skipped)
            fprintf(out, "  %s: damaged: %llu frames read, %llu bad, %llu bytes skipped\n",
                    in->path, (unsigned long long)in->frames, (unsigned long long)in->frames_bad,
                    (unsigned long long)in->bytes_skipped);
    }
    for (size_t i = 0; i < t->nprocs; i++) {
        const struct icx_proc *p = t->procs[i];
        fprintf(out, "  pid %d on %s", p->pid, p->host ? p->host : "?");
        if (p->rank >= 0)
            fprintf(out, ", rank %d/%d", p->rank, p->world_size);
        fprintf(out, ": %zu peer copies, %.3f s traced, ", p->ncopies, p->t_last - p->t_first);
        if (p->lost[ICX_LOST_write_error])
            fprintf(out, "incomplete: %llu bytes could not be written (output full?)%s",
                    (unsigned long long)p->lost[ICX_LOST_write_error],
                    p->ended ? "" : ", no final frame");
        else
            fputs(p->ended ? "complete" : "ended without a final frame (killed?)", out);
        if (p->ended && p->exit_status >= 128)
            fprintf(out, " (signal %d)", p->exit_status - 128);
        else if (p->ended && p->exit_status == ICX_EXIT_EXEC)
            fprintf(out, " (replaced by exec)");
        fprintf(out, "\n    %s\n", p->cmdline ? p->cmdline : "");
        if (lost_total(p)) {
            fprintf(out, "    lost:");
            for (unsigned c = 0; c < ICX_LOST_SLOTS; c++)
                if (p->lost[c])
                    fprintf(out, " %s=%llu", icx_lost_name(c) ? icx_lost_name(c) : "other",
                            (unsigned long long)p->lost[c]);
            fprintf(out, "\n");
        }
        for (size_t k = 0; k < p->nnotes; k++)
            fprintf(out, "    %s: %s\n", p->note_severity[k] ? "warning" : "note", p->notes[k]);
    }
}

static void summary_json(struct icx_json *j, const struct icx_analysis *A)
{
    const struct icx_trace *t = A->t;
    icx_json_arr(j, "inputs");
    for (size_t i = 0; i < t->ninputs; i++) {
        const struct icx_input *in = &t->inputs[i];
        icx_json_obj(j, NULL);
        icx_json_str(j, "path", in->path);
        icx_json_int(j, "bytes", (long long)in->size);
        icx_json_int(j, "processes", in->processes);
        icx_json_int(j, "frames", (long long)in->frames);
        icx_json_int(j, "frames_bad", (long long)in->frames_bad);
        icx_json_int(j, "bytes_skipped", (long long)in->bytes_skipped);
        icx_json_end(j);
    }
    icx_json_end(j);
    icx_json_arr(j, "processes");
    for (size_t i = 0; i < t->nprocs; i++) {
        const struct icx_proc *p = t->procs[i];
        icx_json_obj(j, NULL);
        icx_json_str(j, "path", p->path);
        icx_json_str(j, "host", p->host);
        icx_json_int(j, "pid", p->pid);
        icx_json_int(j, "rank", p->rank);
        icx_json_int(j, "local_rank", p->local_rank);
        icx_json_int(j, "world_size", p->world_size);
        icx_json_str(j, "job_id", p->job_id);
        icx_json_str(j, "cmdline", p->cmdline);
        char version[24];
        snprintf(version, sizeof(version), "%u.%u", p->version_major, p->version_minor);
        icx_json_str(j, "format_version", version);
        icx_json_bool(j, "complete", icx_proc_complete(p));
        icx_json_int(j, "exit_status", p->exit_status);
        icx_json_num(j, "duration_s", p->t_last - p->t_first);
        icx_json_int(j, "events_recorded", (long long)p->events_recorded);
        icx_json_int(j, "peer_copies", (long long)p->ncopies);
        icx_json_int(j, "allocations", (long long)p->nallocs);
        icx_json_int(j, "stacks", (long long)p->nstacks);
        icx_json_obj(j, "lost");
        for (unsigned c = 0; c < ICX_LOST_SLOTS; c++)
            if (icx_lost_name(c))
                icx_json_int(j, icx_lost_name(c), (long long)p->lost[c]);
        icx_json_end(j);
        icx_json_arr(j, "devices");
        for (int d = 0; d < ICX_RD_MAX_DEV; d++) {
            if (!p->dev[d].present)
                continue;
            icx_json_obj(j, NULL);
            icx_json_int(j, "index", d);
            icx_json_str(j, "name", p->dev[d].name);
            icx_json_str(j, "pci", p->dev[d].bus);
            icx_json_int(j, "numa_node", p->dev[d].numa);
            icx_json_end(j);
        }
        icx_json_end(j);
        icx_json_arr(j, "notes");
        for (size_t k = 0; k < p->nnotes; k++) {
            icx_json_obj(j, NULL);
            icx_json_str(j, "severity", p->note_severity[k] ? "warning" : "info");
            icx_json_str(j, "text", p->notes[k]);
            icx_json_end(j);
        }
        icx_json_end(j);
        icx_json_end(j);
    }
    icx_json_end(j);
}

const struct icx_report icx_report_summary = {
    .name = "summary",
    .print = summary_print,
    .json = summary_json,
};
