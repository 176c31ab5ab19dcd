/* Shared NVLink traffic counters of a simulated node: a file both simulated libraries map, so that
 * NVML reports the bytes the simulated copies moved, as the real hardware counters would. */
#ifndef SIM_COUNTERS_H
#define SIM_COUNTERS_H

#include <stdint.h>

#include "topo_file.h"

#define SIM_MAX_LINKS 18

struct sim_counters {
    uint64_t magic;
    uint64_t tx[SIM_MAX_GPUS][SIM_MAX_LINKS]; /* bytes, cumulative */
    uint64_t rx[SIM_MAX_GPUS][SIM_MAX_LINKS];
};

/* The node's counters: $ICXSIM_COUNTERS, or /dev/shm/icxsim-<host>-<uid>.counters; NULL if the
 * file cannot be mapped (the simulation then runs without counters). */
struct sim_counters *sim_counters_map(void);
/* Account `bytes` sent from GPU src to GPU dst over NVLink, striped over `lanes` links. */
void sim_counters_add(struct sim_counters *c, int src, int dst, int lanes, uint64_t bytes);

#endif
