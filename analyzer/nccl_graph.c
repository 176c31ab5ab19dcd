/* NCCL's own routing, read from the XML it dumped (NCCL_GRAPH_DUMP_FILE, NCCL_TOPO_DUMP_FILE):
 * the ring graph's channels -- the GPUs of this node in ring order, and the network devices the
 * channel enters and leaves the node through -- and the names of those network devices.  Only
 * what attribution needs is read; anything unexpected makes the graph unusable (NULL), never a
 * guess. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nccl_graph.h"

/* Attribute `name` of the tag starting at `tag` (up to its '>') into out; 0 if present. */
static int attr(const char *tag, const char *name, char *out, size_t n)
{
    const char *end = strchr(tag, '>');
    size_t len = strlen(name);
    for (const char *p = tag + 1; end && p < end; p++) { /* tag[0]: the element name */
        if ((p[-1] != ' ' && p[-1] != '\t' && p[-1] != '\n') || strncmp(p, name, len) != 0 ||
            p[len] != '=' || p[len + 1] != '"')
            continue;
        const char *v = p + len + 2, *q = strchr(v, '"');
        if (!q || q > end || (size_t)(q - v) >= n)
            return -1;
        memcpy(out, v, (size_t)(q - v));
        out[q - v] = 0;
        return 0;
    }
    return -1;
}

static int attr_int(const char *tag, const char *name, int *out)
{
    char buf[32], *e;
    if (attr(tag, name, buf, sizeof(buf)) != 0)
        return -1;
    long v = strtol(buf, &e, 10);
    if (*e || v < 0 || v > 1 << 20)
        return -1;
    *out = (int)v;
    return 0;
}

/* The name of network device `dev` in the topology XML (<net name=".." dev="N" ...>). */
static void net_name(const char *topo, int dev, char *out, size_t n)
{
    snprintf(out, n, "net%d", dev);
    for (const char *t = topo ? strstr(topo, "<net ") : NULL; t; t = strstr(t + 5, "<net ")) {
        int d;
        char name[64];
        if (attr_int(t + 1, "dev", &d) == 0 && d == dev &&
            attr(t + 1, "name", name, sizeof(name)) == 0) {
            snprintf(out, n, "%s", name);
            return;
        }
    }
}

struct icx_ring_graph *icx_ring_graph_parse(const char *graph, const char *topo)
{
    if (!graph)
        return NULL;
    const char *g = graph;
    int pattern = -1;
    while ((g = strstr(g, "<graph ")) != NULL) { /* the ring graph: pattern 4 */
        if (attr_int(g + 1, "pattern", &pattern) == 0 && pattern == 4)
            break;
        g += 7;
    }
    if (!g)
        return NULL;
    const char *gend = strstr(g, "</graph>");
    struct icx_ring_graph *r = calloc(1, sizeof(*r));
    if (!r || !gend) {
        free(r);
        return NULL;
    }
    for (const char *c = strstr(g, "<channel>"); c && c < gend && r->nchannels < ICX_GRAPH_MAX_CH;
         c = strstr(c + 9, "<channel>")) {
        const char *cend = strstr(c, "</channel>");
        if (!cend || cend > gend)
            goto bad;
        struct icx_ring_channel *ch = &r->ch[r->nchannels++];
        ch->net_in = ch->net_out = -1;
        for (const char *t = strchr(c + 1, '<'); t && t < cend; t = strchr(t + 1, '<')) {
            int dev;
            if (!strncmp(t, "<gpu ", 5)) {
                if (attr_int(t + 1, "dev", &dev) != 0 || ch->ngpus >= ICX_GRAPH_MAX_GPUS)
                    goto bad;
                ch->gpu[ch->ngpus++] = dev;
            } else if (!strncmp(t, "<net ", 5)) {
                if (attr_int(t + 1, "dev", &dev) != 0)
                    goto bad;
                if (ch->ngpus == 0)
                    ch->net_in = dev;
                else
                    ch->net_out = dev;
            }
        }
        if (ch->ngpus == 0)
            goto bad;
        if (ch->net_in >= 0)
            net_name(topo, ch->net_in, ch->in_name, sizeof(ch->in_name));
        if (ch->net_out >= 0)
            net_name(topo, ch->net_out, ch->out_name, sizeof(ch->out_name));
    }
    if (r->nchannels)
        return r;
bad:
    free(r);
    return NULL;
}
