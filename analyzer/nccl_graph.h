/* NCCL's ring graph as it dumped it (nccl_graph.c). */
#ifndef ICX_NCCL_GRAPH_H
#define ICX_NCCL_GRAPH_H

#define ICX_GRAPH_MAX_CH 64
#define ICX_GRAPH_MAX_GPUS 64

struct icx_ring_channel {
    int ngpus, gpu[ICX_GRAPH_MAX_GPUS]; /* CUDA devices of this node, in ring order */
    int net_in, net_out;                /* network devices it enters / leaves by (-1: none) */
    char in_name[64], out_name[64];     /* their names from the topology dump (mlx5_0) */
};

struct icx_ring_graph {
    int nchannels;
    struct icx_ring_channel ch[ICX_GRAPH_MAX_CH];
};

/* The first ring graph (pattern 4) of NCCL's graph XML, with net names from its topology XML
 * (may be NULL); NULL when there is none or it is not understood.  free() the result. */
struct icx_ring_graph *icx_ring_graph_parse(const char *graph_xml, const char *topo_xml);

#endif
