/* The live view (live.c): `icx-analyze follow DIR...` re-reads the growing traces of a running job
 * every few seconds and shows, per communicator, the last call each rank reached and which ranks
 * are late now and by how much, per NIC and NVLink GPU the current rate, and the hang dumps taken
 * so far (docs/LIVE.md). */
#ifndef ICX_LIVE_H
#define ICX_LIVE_H

#include <stdio.h>

#include "model.h"

/* One frame, computed at wall time `now` (s since the epoch) over the traces read; the ranks
 * `late_s` or more behind the first rank of their communicator are named late. */
struct icx_live;
struct icx_live *icx_live_compute(const struct icx_trace *t, double now, double late_s);
void icx_live_print(FILE *out, const struct icx_live *L);
void icx_live_json(FILE *out, const struct icx_live *L); /* one JSON document, one line */
void icx_live_free(struct icx_live *L);

/* `icx-analyze follow [--interval S] [--late S] [--count N] [--once] [--json] PATH...`: argv
 * holds what follows the command.  The exit status: 0, 1 (nothing readable), 2 (usage). */
int icx_follow_main(int argc, char **argv);

#endif
