/* Shared NVLink counters of a simulated node (see counters.h). */
#include "counters.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#define SIM_COUNTERS_MAGIC 0x53524e54434d4953ull

struct sim_counters *sim_counters_map(void)
{
    char path[512], host[128] = "";
    const char *env = getenv("ICXSIM_COUNTERS");
    gethostname(host, sizeof(host) - 1);
    if (env && *env)
        snprintf(path, sizeof(path), "%s", env);
    else
        snprintf(path, sizeof(path), "/dev/shm/icxsim-%s-%u.counters", host, (unsigned)getuid());
    int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (fd < 0)
        return NULL;
    if (ftruncate(fd, sizeof(struct sim_counters)) != 0) {
        close(fd);
        return NULL;
    }
    struct sim_counters *c = mmap(NULL, sizeof(*c), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (c == MAP_FAILED)
        return NULL;
    __atomic_store_n(&c->magic, SIM_COUNTERS_MAGIC, __ATOMIC_RELAXED);
    return c;
}

void sim_counters_add(struct sim_counters *c, int src, int dst, int lanes, uint64_t bytes)
{
    if (!c || lanes <= 0 || src < 0 || dst < 0 || src >= SIM_MAX_GPUS || dst >= SIM_MAX_GPUS)
        return;
    if (lanes > SIM_MAX_LINKS)
        lanes = SIM_MAX_LINKS;
    /* Striped over the links like NVLink traffic: an equal share each, the remainder on link 0. */
    uint64_t share = bytes / (uint64_t)lanes, rest = bytes - share * (uint64_t)lanes;
    for (int l = 0; l < lanes; l++) {
        uint64_t b = share + (l == 0 ? rest : 0);
        __atomic_fetch_add(&c->tx[src][l], b, __ATOMIC_RELAXED);
        __atomic_fetch_add(&c->rx[dst][l], b, __ATOMIC_RELAXED);
    }
}
