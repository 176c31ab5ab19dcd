/* libFuzzer target for the parser of NCCL's graph and topology XML (analyzer/nccl_graph.c), which
 * reads text NCCL wrote, or anything a damaged trace holds in its place.  The input is the graph
 * XML, a NUL byte, then the topology XML (absent without the NUL); each is handed over as its own
 * NUL-terminated copy, as the reader does.  A graph it understands must be within its bounds.
 * Seeds: tests/fuzz/seeds/nccl_xml/ (dumps of the simulated NCCL's three-rank job). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "nccl_graph.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const uint8_t *nul = memchr(data, 0, size);
    size_t glen = nul ? (size_t)(nul - data) : size;
    char *graph = malloc(glen + 1), *topo = NULL;
    if (!graph)
        return 0;
    memcpy(graph, data, glen);
    graph[glen] = 0;
    if (nul) {
        size_t tlen = size - glen - 1;
        topo = malloc(tlen + 1);
        if (topo) {
            memcpy(topo, nul + 1, tlen);
            topo[tlen] = 0;
        }
    }
    struct icx_ring_graph *g = icx_ring_graph_parse(graph, topo);
    if (g) {
        if (g->nchannels < 0 || g->nchannels > ICX_GRAPH_MAX_CH)
            abort();
        for (int c = 0; c < g->nchannels; c++)
            if (g->ch[c].ngpus < 0 || g->ch[c].ngpus > ICX_GRAPH_MAX_GPUS ||
                !memchr(g->ch[c].in_name, 0, sizeof(g->ch[c].in_name)) ||
                !memchr(g->ch[c].out_name, 0, sizeof(g->ch[c].out_name)))
                abort();
    }
    free(g);
    free(graph);
    free(topo);
    return 0;
}
