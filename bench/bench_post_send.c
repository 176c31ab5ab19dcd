/* Cost of one ibv_post_send (one 4 KiB RDMA WRITE work request) as the application sees it
 * (bench_timing.h), against the null libibverbs (bench/nullverbs.c).  bench/run.sh runs it without
 * the preload and with it, in aggregate and event mode, in one run. */
#include <infiniband/verbs.h>

#include "bench_timing.h"

static struct ibv_qp qp = {.qp_num = 7};
static char buf[4096];
static struct ibv_sge sg = {0, sizeof(buf), 1};
static struct ibv_send_wr wr = {
    .wr_id = 1, .sg_list = &sg, .num_sge = 1, .opcode = IBV_WR_RDMA_WRITE};

static void burst(int per)
{
    struct ibv_send_wr *bad;
    for (int i = 0; i < per; i++)
        ibv_post_send(&qp, &wr, &bad);
}

int main(int argc, char **argv)
{
    qp.context = ibv_open_device(NULL);
    sg.addr = (uintptr_t)buf;
    return bench_run(argc, argv, burst);
}
