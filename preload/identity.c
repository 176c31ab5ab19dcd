/* Process identity and the trace file's name (identity.h). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "frame.h"
#include "identity.h"
#include "module.h"
#include "runtime.h"

static const char *icx_first_env(const char *const *names)
{
    for (; *names; names++) {
        const char *v = secure_getenv(*names);
        if (v && *v)
            return v;
    }
    return NULL;
}

static int32_t icx_first_env_int(const char *const *names)
{
    const char *v = icx_first_env(names);
    if (!v)
        return -1;
    char *end;
    long x = strtol(v, &end, 10);
    return (*end || x < 0 || x > INT32_MAX) ? -1 : (int32_t)x;
}

static const char *const icx_env_rank[] = {"RANK",     "OMPI_COMM_WORLD_RANK", "PMIX_RANK",
                                           "PMI_RANK", "SLURM_PROCID",         NULL};
static const char *const icx_env_local_rank[] = {"LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK",
                                                 "MPI_LOCALRANKID", "SLURM_LOCALID", NULL};
static const char *const icx_env_world[] = {"WORLD_SIZE", "OMPI_COMM_WORLD_SIZE", "PMI_SIZE",
                                            "SLURM_NTASKS", NULL};
static const char *const icx_env_local_world[] = {"LOCAL_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_SIZE",
                                                  "MPI_LOCALNRANKS", NULL};
static const char *const icx_env_job[] = {"ICX_JOB_ID", "SLURM_JOB_ID",        "PBS_JOBID",
                                          "LSB_JOBID",  "TORCHELASTIC_RUN_ID", NULL};

static void icx_read_file(const char *path, char *out, size_t outlen, int nul_to_space)
{
    out[0] = 0;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return;
    ssize_t n = read(fd, out, outlen - 1);
    close(fd);
    if (n <= 0)
        return;
    out[n] = 0;
    for (ssize_t i = 0; nul_to_space && i < n; i++)
        if (out[i] == 0)
            out[i] = ' ';
    while (n > 0 && (out[n - 1] == ' ' || out[n - 1] == '\n'))
        out[--n] = 0;
}

static void icx_emit_identity(struct icx_frame *f)
{
    char host[256] = "", cmd[4096], exe[4096];
    gethostname(host, sizeof(host) - 1);
    icx_read_file("/proc/self/cmdline", cmd, sizeof(cmd), 1);
    ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
    exe[n > 0 ? n : 0] = 0;
    const char *job = icx_first_env(icx_env_job);
    uint32_t s_host = icx_intern(f, host), s_cmd = icx_intern(f, cmd), s_exe = icx_intern(f, exe);
    uint32_t s_job = job ? icx_intern(f, job) : 0;
    struct icx_rec_process *p = icx_frame_put(f, ICX_REC_PROCESS, 0, sizeof(*p));
    if (!p)
        return;
    p->pid = (int32_t)getpid();
    p->ppid = (int32_t)getppid();
    p->rank = icx_first_env_int(icx_env_rank);
    p->local_rank = icx_first_env_int(icx_env_local_rank);
    p->world_size = icx_first_env_int(icx_env_world);
    p->local_world_size = icx_first_env_int(icx_env_local_world);
    p->host = s_host;
    p->job_id = s_job;
    p->cmdline = s_cmd;
    p->exe = s_exe;
}

/* Expand %h %p %r %j %% in the ICX_OUTPUT pattern. 0 or -ENAMETOOLONG. */
int icx_expand_output(const char *pattern, char *out, size_t outlen)
{
    char host[256] = "", num[32];
    gethostname(host, sizeof(host) - 1);
    const char *job = icx_first_env(icx_env_job);
    size_t o = 0;
    for (const char *p = pattern; *p; p++) {
        const char *add = NULL;
        char one[2] = {*p, 0};
        if (*p == '%' && p[1]) {
            p++;
            switch (*p) {
            case 'h': add = host; break;
            case 'p':
                snprintf(num, sizeof(num), "%d", (int)getpid());
                add = num;
                break;
            case 'r': {
                int32_t r = icx_first_env_int(icx_env_rank);
                if (r >= 0)
                    snprintf(num, sizeof(num), "%d", r);
                else
                    snprintf(num, sizeof(num), "x");
                add = num;
                break;
            }
            case 'j': add = job ? job : "nojob"; break;
            default:
                one[0] = *p;
                add = one;
                break;
            }
        } else {
            add = one;
        }
        size_t l = strlen(add);
        if (o + l + 1 > outlen)
            return -ENAMETOOLONG;
        memcpy(out + o, add, l);
        o += l;
    }
    out[o] = 0;
    return 0;
}

int icx_output_resolve(int child)
{
    const char *pat = secure_getenv("ICX_OUTPUT");
    if (!pat || !*pat)
        pat = "icxtrace/%h-%p.icx.zst";
    char expanded[4096];
    if (icx_expand_output(pat, expanded, sizeof(expanded)) != 0 || !expanded[0]) {
        icx_log("ICX_OUTPUT is empty or too long; running untraced\n");
        return -ENAMETOOLONG;
    }
    size_t l = strlen(expanded);
    struct stat st;
    size_t cap = sizeof(icx_cfg.output);
    int n;
    if (expanded[l - 1] == '/' || (stat(expanded, &st) == 0 && S_ISDIR(st.st_mode))) {
        char tail[512];
        icx_expand_output("%h-%p.icx.zst", tail, sizeof(tail));
        n = snprintf(icx_cfg.output, cap, "%s%s%s", expanded, expanded[l - 1] == '/' ? "" : "/",
                     tail);
    } else if (child && !strstr(pat, "%p")) {
        n = snprintf(icx_cfg.output, cap, "%s.%d", expanded, (int)getpid());
    } else {
        n = snprintf(icx_cfg.output, cap, "%s", expanded);
    }
    if (n < 0 || (size_t)n >= cap) {
        icx_log("ICX_OUTPUT is too long; running untraced\n");
        return -ENAMETOOLONG;
    }
    return 0;
}

const struct icx_module icx_mod_identity = {
    .name = "identity",
    .stream_begin = icx_emit_identity,
};
