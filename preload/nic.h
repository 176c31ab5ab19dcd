/* RDMA NICs as sysfs shows them: NIC records, the PCIe path class between a GPU and each NIC, and
 * the ports' data counters.  Writer thread only (topo.c drives it). */
#ifndef ICX_NIC_H
#define ICX_NIC_H

#include <stdint.h>

struct icx_frame;

/* PCI_PATH records for GPU `dev` (PCI bus id `bus`, NUMA node `numa`) to every NIC. */
void icx_nic_paths(struct icx_frame *f, int dev, const char *bus, int numa);
/* One IB_COUNTERS record per NIC port that has counters, stamped `now` (monotonic ns). */
void icx_nic_sample(struct icx_frame *f);
/* Forget the NICs (a traced fork child's stream names them again). */
void icx_nic_reset(void);

#endif
