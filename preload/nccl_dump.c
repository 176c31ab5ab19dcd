/* NCCL's topology, graph and debug output, kept in the trace (nccl_dump.h).
 *
 * Unless the user set them, NCCL_TOPO_DUMP_FILE and NCCL_GRAPH_DUMP_FILE point at private files
 * before the first communicator is created (setenv, once, before NCCL reads its environment).
 * NCCL writes them during a communicator's creation, on that communicator's rank
 * NCCL_{TOPO,GRAPH}_DUMP_FILE_RANK (0 by default) only; after every creation whatever was written
 * is queued for the trace, tagged with the communicator's id (private files are then removed; a
 * file of the user's is kept, and a text equal to the last one read from it not queued again). */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "frame.h"
#include "nccl_comm.h"
#include "nccl_dump.h"
#include "runtime.h"

static const char *const icx_dump_env[2] = {"NCCL_TOPO_DUMP_FILE", "NCCL_GRAPH_DUMP_FILE"};
static char icx_dump_path[2][256];
static int icx_dump_ours[2];
static char icx_dump_dir[64];     /* our private directory for them (mkdtemp, 0700), "" none */
static uint64_t icx_dump_last[2]; /* hash of the last text read from a file of the user's */
static int icx_dump_prepared;     /* under icx_dump_lock */
static pthread_mutex_t icx_dump_lock = PTHREAD_MUTEX_INITIALIZER;
struct icx_dump_item { /* read, for the writer */
    int kind;          /* NCCL_DUMP aux: 1 topology, 2 graph, 3 debug lines */
    uint64_t comm_id;  /* the communicator whose creation wrote it (0: none) */
    char *text;
    struct icx_dump_item *next;
};
static struct icx_dump_item *icx_dump_head, **icx_dump_tail = &icx_dump_head;
static long icx_debug_off; /* how far NCCL_DEBUG_FILE has been read */

static void icx_dump_queue(int kind, uint64_t comm_id, char *text)
{
    struct icx_dump_item *it = malloc(sizeof(*it));
    if (!it) {
        free(text);
        return;
    }
    *it = (struct icx_dump_item){kind, comm_id, text, NULL};
    pthread_mutex_lock(&icx_dump_lock);
    *icx_dump_tail = it;
    icx_dump_tail = &it->next;
    pthread_mutex_unlock(&icx_dump_lock);
}

void icx_nccl_dumps_prepare(void)
{
    pthread_mutex_lock(&icx_dump_lock);
    if (icx_dump_prepared) {
        pthread_mutex_unlock(&icx_dump_lock);
        return;
    }
    icx_dump_prepared = 1;
    for (int k = 0; k < 2; k++) {
        const char *v = secure_getenv(icx_dump_env[k]);
        int pid = 0;
        /* a private file of a traced parent's (the variable was inherited): not the user's */
        int inherited = v && sscanf(v, "/tmp/icxtrace-%d-", &pid) == 1 && pid != (int)getpid();
        if (v && *v && !inherited) {
            snprintf(icx_dump_path[k], sizeof(icx_dump_path[k]), "%s", v);
            continue;
        }
        /* In a directory only we can enter: NCCL fopen()s the file for writing, and a name in
         * /tmp itself could be a link planted by another user to a file of ours. */
        if (!icx_dump_dir[0]) {
            snprintf(icx_dump_dir, sizeof(icx_dump_dir), "/tmp/icxtrace-%d-XXXXXX", (int)getpid());
            if (!mkdtemp(icx_dump_dir)) {
                icx_dump_dir[0] = 0;
                icx_debug("no private directory for NCCL's dumps: %s\n", strerror(errno));
                continue;
            }
        }
        snprintf(icx_dump_path[k], sizeof(icx_dump_path[k]), "%s/nccl-%s.xml", icx_dump_dir,
                 k ? "graph" : "topo");
        icx_dump_ours[k] = setenv(icx_dump_env[k], icx_dump_path[k], 1) == 0;
    }
    pthread_mutex_unlock(&icx_dump_lock);
}

static void icx_dumps_read(uint64_t comm_id)
{
    for (int k = 0; k < 2; k++) {
        FILE *f = icx_dump_path[k][0] ? fopen(icx_dump_path[k], "re") : NULL;
        if (!f)
            continue;
        char *buf = malloc(4u << 20);
        size_t n = buf ? fread(buf, 1, (4u << 20) - 1, f) : 0;
        fclose(f);
        if (icx_dump_ours[k])
            unlink(icx_dump_path[k]);
        if (!buf || !n) {
            free(buf);
            continue;
        }
        buf[n] = 0;
        uint64_t h = icx_fnv(buf, n, ICX_FNV_BASIS);
        if (!icx_dump_ours[k] && h == icx_dump_last[k]) {
            free(buf); /* not rewritten by this creation */
            continue;
        }
        icx_dump_last[k] = h;
        icx_dump_queue(k + 1, comm_id, buf);
    }
}

/* NCCL_DEBUG output, where the user sent it to a file (NCCL_DEBUG_FILE; %h and %p expanded as
 * NCCL does): after each communicator is made, the lines added since the last look that name a
 * channel's transport ("via P2P/...", "via NET/IB/...") or the rings' summary are kept for the
 * trace.  Output to stdout is not touched. */
static void icx_debug_collect(void)
{
    const char *f = secure_getenv("NCCL_DEBUG_FILE");
    if (!f || !*f)
        return;
    char host[256] = "", path[512];
    gethostname(host, sizeof(host) - 1);
    host[strcspn(host, ".")] = 0;
    size_t o = 0;
    for (size_t i = 0; f[i] && o + 1 < sizeof(path); i++) {
        if (f[i] == '%' && (f[i + 1] == 'h' || f[i + 1] == 'p')) {
            int n = f[i + 1] == 'h' ? snprintf(path + o, sizeof(path) - o, "%s", host)
                                    : snprintf(path + o, sizeof(path) - o, "%d", (int)getpid());
            o = n > 0 && o + (size_t)n < sizeof(path) ? o + (size_t)n : sizeof(path) - 1;
            i++;
        } else {
            path[o++] = f[i];
        }
    }
    path[o] = 0;
    FILE *in = fopen(path, "re");
    if (!in)
        return;
    char line[1024];
    size_t cap = 0, len = 0;
    char *keep = NULL;
    pthread_mutex_lock(&icx_dump_lock);
    if (fseek(in, icx_debug_off, SEEK_SET) == 0)
        while (fgets(line, sizeof(line), in)) {
            if (!strstr(line, " via ") && !strstr(line, "Connected all"))
                continue;
            size_t n = strlen(line);
            if (len + n + 1 > cap) {
                size_t ncap = (cap ? 2 * cap : 4096) + n;
                char *nk = realloc(keep, ncap);
                if (!nk)
                    break;
                keep = nk;
                cap = ncap;
            }
            memcpy(keep + len, line, n + 1);
            len += n;
        }
    long at = ftell(in);
    fclose(in);
    if (at > icx_debug_off)
        icx_debug_off = at;
    pthread_mutex_unlock(&icx_dump_lock);
    if (keep)
        icx_dump_queue(3, 0, keep);
}

void icx_nccl_dumps_put(struct icx_frame *f)
{
    pthread_mutex_lock(&icx_dump_lock);
    struct icx_dump_item *it = icx_dump_head;
    icx_dump_head = NULL;
    icx_dump_tail = &icx_dump_head;
    pthread_mutex_unlock(&icx_dump_lock);
    while (it) {
        char *text = it->text;
        size_t len = strlen(text), nparts = (len + ICX_PART_BYTES - 1) / ICX_PART_BYTES;
        for (size_t i = 0; i < nparts; i++) {
            uint32_t id = icx_intern_part(f, text, len, i);
            struct icx_rec_nccl_dump *r =
                icx_frame_put(f, ICX_REC_NCCL_DUMP, (uint32_t)it->kind, sizeof(*r));
            if (r) {
                r->text = id;
                r->part = (uint32_t)i;
                r->nparts = (uint32_t)nparts;
                r->total_bytes = (uint32_t)len;
                r->comm_id = it->comm_id;
            }
        }
        struct icx_dump_item *next = it->next;
        free(text);
        free(it);
        it = next;
    }
}

void icx_nccl_dumps_collect(uint64_t comm_id)
{
    icx_dumps_read(comm_id);
    icx_debug_collect();
}

void icx_nccl_dumps_fini(void)
{
    for (int k = 0; k < 2; k++)
        if (icx_dump_ours[k])
            unlink(icx_dump_path[k]); /* fails harmlessly when read and removed already */
    if (icx_dump_dir[0])
        rmdir(icx_dump_dir);
}

void icx_nccl_dumps_fork_prepare(void)
{
    pthread_mutex_lock(&icx_dump_lock);
}

void icx_nccl_dumps_fork_parent(void)
{
    pthread_mutex_unlock(&icx_dump_lock);
}

/* The queue is the parent's to write; the child, with the environment it inherited, decides
 * again on its first communicator (a file of the parent's is not the user's: see prepare). */
void icx_nccl_dumps_fork_child(void)
{
    pthread_mutex_init(&icx_dump_lock, NULL);
    struct icx_dump_item *it = icx_dump_head;
    while (it) {
        struct icx_dump_item *next = it->next;
        free(it->text);
        free(it);
        it = next;
    }
    icx_dump_head = NULL;
    icx_dump_tail = &icx_dump_head;
    icx_dump_prepared = 0;
    icx_dump_ours[0] = icx_dump_ours[1] = 0;
    icx_dump_dir[0] = 0; /* the parent's, removed by the parent */
}
