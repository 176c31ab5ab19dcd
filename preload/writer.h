/* The writer thread: every ICX_FLUSH_MS it drains the rings, lets each module add its records,
 * compresses one zstd frame and appends it to the trace file. */
#ifndef ICX_WRITER_H
#define ICX_WRITER_H

#include <stddef.h>

struct icx_module;

/* Build the stream's header frame and start the thread; the modules are looped over in order at
 * every flush.  0, or -errno after a warning (the job then runs untraced). */
int icx_writer_start(const struct icx_module *const *mods, size_t nmods);
/* The last flush: every ring, the modules' final records, END with exit_status (-1 unknown). */
void icx_writer_stop(int exit_status);
/* From a signal handler: ask the writer for a final frame and wait for it, bounded.  will_die:
 * the process dies of signo afterwards (END says so). */
void icx_writer_flush_from_signal(int signo, int will_die);

/* Before exec or _exit, from any thread (async-signal-safe): a final frame with END(status) now,
 * waited for (bounded).  1 when it was asked for; 0 when this process has no writer to ask (off,
 * or a vfork child, which shares our memory but not our trace). */
int icx_writer_end_now(int status);
/* After a failed exec: the stream goes on. */
void icx_writer_resume(void);

/* The process is a device program after all (a statically linked runtime): the writer takes the
 * device baselines at its next round, no waiting. */
void icx_writer_want_devices(void);

/* Wake the writer for a flush now; async-signal-safe (a bit and a futex wake). */
void icx_writer_wake(void);
/* A ring passed half full: drain the rings now, before the frame is due (called from tbuf.c
 * through icx_tbuf_set_pressure; keeps errno, async-signal-safe, never blocks). */
void icx_writer_wake_pressure(void);
/* For the modules' drained and ring_record hooks (writer thread): CLOCK_MONOTONIC ns when the
 * writer began draining the ring the record came from. */
uint64_t icx_writer_drain_ns(void);

#endif
