/* NCCL's own view, from the tracer's profiler-plugin face (trace_format.h section 13): per
 * communicator the algorithms and protocols NCCL chose (collectives and bytes each), and per
 * channel the kernels' GPU time by the GPU's own timers -- a channel much slower than the others
 * is a slow link or NIC on its path.  Communicators are the API's (joined in decode_nccl.c); one
 * NCCL gave the plugin but the API never showed is listed by NCCL's commId. */
#include <stdlib.h>
#include <string.h>

#include "analysis.h"

struct np_mix {
    char algo[16], proto[16];
    uint64_t colls, bytes;
};

struct np_chan {
    int channel;
    uint64_t kernels;
    double gpu_s, max_s;
};

struct np_net { /* what NCCL's proxy moved on one (channel, direction) of a host's NIC */
    int channel, is_send;
    const char *host, *nic; /* nic: the NIC its processes opened ("": several or none) */
    uint64_t ops, steps, bytes, gpu_ns, peer_ns, net_ns;
};

struct np_host {
    const char *host;
    uint64_t tx, rx;
};

struct np_comm {
    uint64_t comm_id, nccl_comm_id; /* comm_id 0: not joined to an API communicator */
    int nranks, ranks, version, chained;
    uint64_t colls, joined, kernels;
    struct np_mix *mix;
    size_t nmix;
    struct np_chan *ch;
    size_t nch;
    struct np_net *net;
    size_t nnet;
    struct np_host *hosts;
    size_t nhosts;
};

struct icx_nccl_plugin {
    struct np_comm *c;
    size_t n;
};

static struct np_comm *comm_of(struct icx_nccl_plugin *P, const struct icx_rd_pcomm *pc)
{
    for (size_t i = 0; i < P->n; i++)
        if (pc->comm_id ? P->c[i].comm_id == pc->comm_id
                        : !P->c[i].comm_id && P->c[i].nccl_comm_id == pc->nccl_comm_id)
            return &P->c[i];
    struct np_comm *v = realloc(P->c, (P->n + 1) * sizeof(*v));
    if (!v)
        return NULL;
    P->c = v;
    v[P->n] = (struct np_comm){
        .comm_id = pc->comm_id, .nccl_comm_id = pc->nccl_comm_id, .nranks = pc->nranks};
    return &v[P->n++];
}

static struct np_mix *mix_of(struct np_comm *c, const struct icx_rd_pcoll *x)
{
    for (size_t i = 0; i < c->nmix; i++)
        if (!strcmp(c->mix[i].algo, x->algo) && !strcmp(c->mix[i].proto, x->proto))
            return &c->mix[i];
    struct np_mix *v = realloc(c->mix, (c->nmix + 1) * sizeof(*v));
    if (!v)
        return NULL;
    c->mix = v;
    memset(&v[c->nmix], 0, sizeof(*v));
    memcpy(v[c->nmix].algo, x->algo, 16);
    memcpy(v[c->nmix].proto, x->proto, 16);
    return &v[c->nmix++];
}

static struct np_chan *chan_of(struct np_comm *c, int channel)
{
    for (size_t i = 0; i < c->nch; i++)
        if (c->ch[i].channel == channel)
            return &c->ch[i];
    struct np_chan *v = realloc(c->ch, (c->nch + 1) * sizeof(*v));
    if (!v)
        return NULL;
    c->ch = v;
    v[c->nch] = (struct np_chan){channel, 0, 0, 0};
    return &v[c->nch++];
}

static struct np_net *net_of(struct np_comm *c, int channel, int is_send, const char *host,
                             const char *nic)
{
    for (size_t i = 0; i < c->nnet; i++)
        if (c->net[i].channel == channel && c->net[i].is_send == is_send &&
            !strcmp(c->net[i].host, host) && !strcmp(c->net[i].nic, nic))
            return &c->net[i];
    struct np_net *v = realloc(c->net, (c->nnet + 1) * sizeof(*v));
    if (!v)
        return NULL;
    c->net = v;
    v[c->nnet] = (struct np_net){.channel = channel, .is_send = is_send, .host = host, .nic = nic};
    return &v[c->nnet++];
}

static struct np_host *host_of(struct np_comm *c, const char *host)
{
    for (size_t i = 0; i < c->nhosts; i++)
        if (!strcmp(c->hosts[i].host, host))
            return &c->hosts[i];
    struct np_host *v = realloc(c->hosts, (c->nhosts + 1) * sizeof(*v));
    if (!v)
        return NULL;
    c->hosts = v;
    v[c->nhosts] = (struct np_host){host, 0, 0};
    return &v[c->nhosts++];
}

static int net_cmp(const void *a, const void *b)
{
    const struct np_net *x = a, *y = b;
    int h = strcmp(x->host, y->host), n = strcmp(x->nic, y->nic);
    return x->channel != y->channel   ? x->channel - y->channel
           : x->is_send != y->is_send ? y->is_send - x->is_send
           : h                        ? h
                                      : n;
}

static int chan_cmp(const void *a, const void *b)
{
    return ((const struct np_chan *)a)->channel - ((const struct np_chan *)b)->channel;
}

/* The one NIC process p opened for verbs, or "" (none, or several). */
static const char *proc_nic(const struct icx_proc *p)
{
    const char *nic = "";
    for (size_t i = 0; i < ICX_RD_MAX_VCTX; i++)
        if (p->vctx[i].present) {
            if (nic[0] && strcmp(nic, p->vctx[i].name))
                return "";
            nic = p->vctx[i].name;
        }
    return nic;
}

static int one_proc(struct icx_nccl_plugin *P, const struct icx_proc *p)
{
    const char *host = p->host ? p->host : "?", *nic = proc_nic(p);
    for (size_t k = 0; k < p->npcomms; k++) {
        const struct icx_rd_pcomm *pc = &p->pcomms[k];
        struct np_comm *c = comm_of(P, pc);
        if (!c)
            return -1;
        c->ranks++;
        c->version = pc->version;
        c->chained |= pc->chained;
        for (size_t i = 0; i < p->npcolls; i++) {
            const struct icx_rd_pcoll *x = &p->pcolls[i];
            if (x->ctx != pc->ctx)
                continue;
            struct np_mix *m = mix_of(c, x);
            if (!m)
                return -1;
            m->colls++;
            m->bytes += x->bytes;
            c->colls++;
            c->joined += x->bytes > 0 || (pc->comm && x->count == 0);
        }
        for (size_t i = 0; i < p->npproxies; i++) {
            const struct icx_rd_pproxy *x = &p->pproxies[i];
            if (x->ctx != pc->ctx)
                continue;
            struct np_net *n = net_of(c, x->channel, x->is_send, host, nic);
            struct np_host *h = host_of(c, host);
            if (!n || !h)
                return -1;
            n->ops += x->ops;
            n->steps += x->steps;
            n->bytes += x->bytes;
            n->gpu_ns += x->gpu_wait_ns;
            n->peer_ns += x->peer_wait_ns;
            n->net_ns += x->net_ns;
            *(x->is_send ? &h->tx : &h->rx) += x->bytes;
        }
        for (size_t i = 0; i < p->npkchs; i++) {
            const struct icx_rd_pkch *x = &p->pkchs[i];
            if (x->ctx != pc->ctx || !x->gpu_stop || x->gpu_stop < x->gpu_start)
                continue;
            struct np_chan *ch = chan_of(c, x->channel);
            if (!ch)
                return -1;
            double s = (double)(x->gpu_stop - x->gpu_start) / 1e9;
            ch->kernels++;
            ch->gpu_s += s;
            ch->max_s = s > ch->max_s ? s : ch->max_s;
            c->kernels++;
        }
    }
    return 0;
}

static int plugin_compute(struct icx_analysis *A)
{
    struct icx_nccl_plugin *P = calloc(1, sizeof(*P));
    A->nccl_plugin = P;
    for (size_t i = 0; P && i < A->t->nprocs; i++)
        if (one_proc(P, A->t->procs[i]))
            P = NULL;
    if (!P) {
        fprintf(stderr, "icx-analyze: out of memory computing the NCCL plugin report\n");
        return -1;
    }
    for (size_t i = 0; i < P->n; i++)
        if (P->c[i].nch > 1)
            qsort(P->c[i].ch, P->c[i].nch, sizeof(*P->c[i].ch), chan_cmp);
    for (size_t i = 0; i < P->n; i++)
        if (P->c[i].nnet > 1)
            qsort(P->c[i].net, P->c[i].nnet, sizeof(*P->c[i].net), net_cmp);
    return 0;
}

/* Mean GPU time per kernel of channel ch, and the median of the channels' means. */
static double chan_mean(const struct np_chan *ch)
{
    return ch->kernels ? ch->gpu_s / (double)ch->kernels : 0;
}

static int dbl_cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median_mean(const struct np_comm *c)
{
    if (!c->nch)
        return 0;
    double *v = malloc(sizeof(double) * c->nch);
    if (!v)
        return 0;
    for (size_t i = 0; i < c->nch; i++)
        v[i] = chan_mean(&c->ch[i]);
    qsort(v, c->nch, sizeof(double), dbl_cmp);
    double m = c->nch % 2 ? v[c->nch / 2] : (v[c->nch / 2 - 1] + v[c->nch / 2]) / 2;
    free(v);
    return m;
}

static void plugin_print(FILE *out, const struct icx_analysis *A)
{
    const struct icx_nccl_plugin *P = A->nccl_plugin;
    if (!P || !P->n)
        return;
    fprintf(out, "\nNCCL's own view (icxtrace as NCCL's profiler plugin)\n");
    fprintf(out, "  %-16s %5s %3s %8s %8s  %-40s %s\n", "communicator", "ranks", "if", "colls",
            "kernels", "algorithm/protocol: collectives", "slowest channel");
    for (size_t i = 0; i < P->n; i++) {
        const struct np_comm *c = &P->c[i];
        char id[24], mix[256] = "", slow[96] = "-";
        snprintf(id, sizeof(id), "%016llx",
                 (unsigned long long)(c->comm_id ? c->comm_id : c->nccl_comm_id));
        for (size_t k = 0, o = 0; k < c->nmix && o < sizeof(mix); k++) {
            int w = snprintf(mix + o, sizeof(mix) - o, "%s%s/%s: %llu", k ? ", " : "",
                             c->mix[k].algo, c->mix[k].proto, (unsigned long long)c->mix[k].colls);
            o += w > 0 ? (size_t)w : 0;
        }
        const struct np_chan *worst = NULL;
        for (size_t k = 0; k < c->nch; k++)
            if (!worst || chan_mean(&c->ch[k]) > chan_mean(worst))
                worst = &c->ch[k];
        double med = median_mean(c);
        if (worst && med > 0)
            snprintf(slow, sizeof(slow), "channel %d: %.1f us per kernel, %.2fx the median",
                     worst->channel, chan_mean(worst) * 1e6, chan_mean(worst) / med);
        fprintf(out, "  %-16s %2d/%-2d v%d %8llu %8llu  %-40s %s%s\n", id, c->ranks, c->nranks,
                c->version, (unsigned long long)c->colls, (unsigned long long)c->kernels, mix, slow,
                c->comm_id ? "" : " (not joined to the API's)");
        uint64_t tx = 0, rx = 0;
        double peer = 0, total = 0;
        const struct np_net *wait = NULL;
        for (size_t k = 0; k < c->nnet; k++) {
            const struct np_net *n = &c->net[k];
            *(n->is_send ? &tx : &rx) += n->bytes;
            peer += (double)n->peer_ns;
            total += (double)(n->gpu_ns + n->peer_ns + n->net_ns);
            if (!n->is_send && (!wait || n->peer_ns > wait->peer_ns))
                wait = n;
        }
        if (c->nnet)
            fprintf(out,
                    "  %-16s network (NCCL's proxy): %llu B sent, %llu B received; %.0f%% of "
                    "the steps' time waiting for the peer%s",
                    "", (unsigned long long)tx, (unsigned long long)rx,
                    total > 0 ? 100 * peer / total : 0, wait ? "" : "\n");
        if (c->nnet && wait)
            fprintf(out, ", most on channel %d's receives on %s%s%s (%.3f s)\n", wait->channel,
                    wait->host, wait->nic[0] ? " " : "", wait->nic, (double)wait->peer_ns / 1e9);
    }
}

static void plugin_json(struct icx_json *j, const struct icx_analysis *A)
{
    const struct icx_nccl_plugin *P = A->nccl_plugin;
    icx_json_arr(j, "nccl_plugin");
    for (size_t i = 0; P && i < P->n; i++) {
        const struct np_comm *c = &P->c[i];
        char id[24];
        icx_json_obj(j, NULL);
        snprintf(id, sizeof(id), "%016llx", (unsigned long long)c->comm_id);
        if (c->comm_id)
            icx_json_str(j, "comm_id", id);
        else
            icx_json_null(j, "comm_id");
        snprintf(id, sizeof(id), "%016llx", (unsigned long long)c->nccl_comm_id);
        icx_json_str(j, "nccl_comm_id", id);
        icx_json_int(j, "nranks", c->nranks);
        icx_json_int(j, "ranks_seen", c->ranks);
        icx_json_int(j, "interface_version", c->version);
        icx_json_bool(j, "chained", c->chained);
        icx_json_int(j, "collectives", (long long)c->colls);
        icx_json_int(j, "joined_to_calls", (long long)c->joined);
        icx_json_int(j, "kernel_channels", (long long)c->kernels);
        icx_json_arr(j, "algorithms");
        for (size_t k = 0; k < c->nmix; k++) {
            icx_json_obj(j, NULL);
            icx_json_str(j, "algorithm", c->mix[k].algo);
            icx_json_str(j, "protocol", c->mix[k].proto);
            icx_json_int(j, "collectives", (long long)c->mix[k].colls);
            icx_json_int(j, "bytes", (long long)c->mix[k].bytes);
            icx_json_end(j);
        }
        icx_json_end(j);
        double med = median_mean(c);
        icx_json_arr(j, "channels");
        for (size_t k = 0; k < c->nch; k++) {
            const struct np_chan *ch = &c->ch[k];
            icx_json_obj(j, NULL);
            icx_json_int(j, "channel", ch->channel);
            icx_json_int(j, "kernels", (long long)ch->kernels);
            icx_json_num(j, "gpu_s", ch->gpu_s);
            icx_json_num(j, "mean_us", chan_mean(ch) * 1e6);
            icx_json_num(j, "max_us", ch->max_s * 1e6);
            icx_json_num(j, "vs_median", med > 0 ? chan_mean(ch) / med : 0);
            icx_json_end(j);
        }
        icx_json_end(j);
        icx_json_arr(j, "network");
        for (size_t k = 0; k < c->nnet; k++) {
            const struct np_net *n = &c->net[k];
            icx_json_obj(j, NULL);
            icx_json_int(j, "channel", n->channel);
            icx_json_str(j, "direction", n->is_send ? "send" : "receive");
            icx_json_str(j, "host", n->host);
            if (n->nic[0])
                icx_json_str(j, "nic", n->nic);
            else
                icx_json_null(j, "nic");
            icx_json_int(j, "proxy_ops", (long long)n->ops);
            icx_json_int(j, "steps", (long long)n->steps);
            icx_json_int(j, "bytes", (long long)n->bytes);
            icx_json_num(j, "gpu_wait_s", (double)n->gpu_ns / 1e9);
            icx_json_num(j, "peer_wait_s", (double)n->peer_ns / 1e9);
            icx_json_num(j, "on_wire_s", (double)n->net_ns / 1e9);
            icx_json_end(j);
        }
        icx_json_end(j);
        icx_json_arr(j, "network_by_host");
        for (size_t k = 0; k < c->nhosts; k++) {
            icx_json_obj(j, NULL);
            icx_json_str(j, "host", c->hosts[k].host);
            icx_json_int(j, "tx_bytes", (long long)c->hosts[k].tx);
            icx_json_int(j, "rx_bytes", (long long)c->hosts[k].rx);
            icx_json_end(j);
        }
        icx_json_end(j);
        icx_json_end(j);
    }
    icx_json_end(j);
}

static void plugin_free(struct icx_analysis *A)
{
    struct icx_nccl_plugin *P = A->nccl_plugin;
    for (size_t i = 0; P && i < P->n; i++) {
        free(P->c[i].mix);
        free(P->c[i].ch);
        free(P->c[i].net);
        free(P->c[i].hosts);
    }
    if (P)
        free(P->c);
    free(P);
    A->nccl_plugin = NULL;
}

const struct icx_report icx_report_nccl_plugin = {
    .name = "nccl_plugin",
    .compute = plugin_compute,
    .print = plugin_print,
    .json = plugin_json,
    .free = plugin_free,
};
