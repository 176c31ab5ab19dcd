/* Frame building, string interning and the note queue (frame.h). */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "frame.h"
#include "module.h"
#include "runtime.h"

void *icx_frame_put(struct icx_frame *f, uint16_t type, uint32_t aux, size_t size)
{
    size = (size + 7) & ~(size_t)7;
    if (size > 65528)
        return NULL;
    if (f->len + size > f->cap) {
        size_t ncap = f->cap ? f->cap : 1 << 16;
        while (ncap < f->len + size)
            ncap *= 2;
        uint8_t *n = realloc(f->buf, ncap);
        if (!n)
            return NULL;
        f->buf = n;
        f->cap = ncap;
    }
    struct icx_rec *r = (struct icx_rec *)(f->buf + f->len);
    memset(r, 0, size);
    r->type = type;
    r->size = (uint16_t)size;
    r->aux = aux;
    f->len += size;
    return r;
}

static void icx_frame_put_string(struct icx_frame *f, uint32_t id, const char *s)
{
    size_t l = strlen(s);
    if (l > 65000)
        l = 65000;
    struct icx_rec *r = icx_frame_put(f, ICX_REC_STRING, id, sizeof(*r) + l + 1);
    if (r)
        memcpy(r + 1, s, l);
}

/* ---- string interning (writer thread) ---- */
struct icx_str {
    char *s;
    uint32_t id;
};
static struct icx_str *icx_strs;
static size_t icx_strs_cap, icx_strs_n;
static uint32_t icx_next_id = 1;

static uint64_t icx_hash(const char *s)
{
    uint64_t h = 1469598103934665603ull;
    for (; *s; s++)
        h = (h ^ (uint8_t)*s) * 1099511628211ull;
    return h;
}

static int icx_strs_grow(void)
{
    size_t ncap = icx_strs_cap ? icx_strs_cap * 2 : 256;
    struct icx_str *n = calloc(ncap, sizeof(*n));
    if (!n)
        return -1;
    for (size_t i = 0; i < icx_strs_cap; i++) {
        if (!icx_strs[i].s)
            continue;
        size_t j = icx_hash(icx_strs[i].s) & (ncap - 1);
        while (n[j].s)
            j = (j + 1) & (ncap - 1);
        n[j] = icx_strs[i];
    }
    free(icx_strs);
    icx_strs = n;
    icx_strs_cap = ncap;
    return 0;
}

uint32_t icx_intern(struct icx_frame *f, const char *s)
{
    if (!s)
        return 0;
    if (icx_strs_n * 2 >= icx_strs_cap && icx_strs_grow() != 0)
        return 0;
    size_t j = icx_hash(s) & (icx_strs_cap - 1);
    while (icx_strs[j].s) {
        if (strcmp(icx_strs[j].s, s) == 0)
            return icx_strs[j].id;
        j = (j + 1) & (icx_strs_cap - 1);
    }
    char *copy = strdup(s);
    if (!copy)
        return 0;
    icx_strs[j].s = copy;
    icx_strs[j].id = icx_next_id++;
    icx_strs_n++;
    icx_frame_put_string(f, icx_strs[j].id, s);
    return icx_strs[j].id;
}

uint32_t icx_intern_part(struct icx_frame *f, char *text, size_t len, size_t i)
{
    size_t cut = (i + 1) * ICX_PART_BYTES < len ? (i + 1) * ICX_PART_BYTES : len;
    char save = text[cut];
    text[cut] = 0;
    uint32_t id = icx_intern(f, text + i * ICX_PART_BYTES);
    text[cut] = save;
    return id;
}

void icx_intern_reset(void)
{
    for (size_t i = 0; i < icx_strs_cap; i++) {
        free(icx_strs[i].s);
        icx_strs[i].s = NULL;
    }
    icx_strs_n = 0;
    icx_next_id = 1;
}

/* ---- notes from any thread ---- */
struct icx_note_q {
    struct icx_note_q *next;
    int severity;
    char text[];
};
static pthread_mutex_t icx_note_lock = PTHREAD_MUTEX_INITIALIZER;
static struct icx_note_q *icx_notes;

void icx_note(int severity, const char *text)
{
    size_t l = strlen(text);
    struct icx_note_q *n = malloc(sizeof(*n) + l + 1);
    if (!n)
        return;
    n->severity = severity;
    memcpy(n->text, text, l + 1);
    pthread_mutex_lock(&icx_note_lock);
    struct icx_note_q **tail = &icx_notes;
    while (*tail)
        tail = &(*tail)->next;
    n->next = NULL;
    *tail = n;
    pthread_mutex_unlock(&icx_note_lock);
    icx_debug("note: %s\n", text);
}

void icx_notes_put(struct icx_frame *f)
{
    pthread_mutex_lock(&icx_note_lock);
    struct icx_note_q *n = icx_notes;
    icx_notes = NULL;
    pthread_mutex_unlock(&icx_note_lock);
    while (n) {
        struct icx_note_q *next = n->next;
        uint32_t id = icx_intern(f, n->text);
        struct icx_rec_note *r = icx_frame_put(f, ICX_REC_NOTE, (uint32_t)n->severity, sizeof(*r));
        if (r)
            r->text = id;
        free(n);
        n = next;
    }
}

/* The note lock is the innermost lock of the tracer (icx_note may be called holding any other):
 * it is last in the table, so prepared last. */
static void icx_frame_fork_prepare(void)
{
    pthread_mutex_lock(&icx_note_lock);
}

static void icx_frame_fork_parent(void)
{
    pthread_mutex_unlock(&icx_note_lock);
}

/* The child keeps the notes queued before the fork: they are true of it too. */
static void icx_frame_fork_child(void)
{
    pthread_mutex_init(&icx_note_lock, NULL);
    icx_intern_reset();
}

const struct icx_module icx_mod_frame = {
    .name = "frame",
    .fork_prepare = icx_frame_fork_prepare,
    .fork_parent = icx_frame_fork_parent,
    .fork_child = icx_frame_fork_child,
};
