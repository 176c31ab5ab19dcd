/* The job's signal actions, kept virtual (signals.c): the tracer's handlers are installed for
 * real, while sigaction(), signal() and their kin (wraps_signal.def) show the job the actions it
 * set itself and chain to them. */
#ifndef ICX_SIGNALS_H
#define ICX_SIGNALS_H

#include <signal.h>

/* A signal the tracer uses while the job leaves it at SIG_DFL (the dump signals of hang.c): ours
 * is installed now if the job's action is the default and the signal was not taken, and again
 * whenever the job sets SIG_DFL; any other action the job sets replaces it.  The job keeps seeing
 * SIG_DFL.  1: ours is installed now; 0: the job has the signal (or another claim does). */
int icx_sig_claim(int sig, const struct sigaction *ours);
/* The fatal signals (SIGTERM, SIGINT, SIGHUP, SIGSEGV, SIGBUS, SIGABRT, SIGFPE, SIGILL): a final
 * frame, then the job's own action, whatever the job sets later (SIG_IGN excepted: ignored, they
 * are the job's alone).  After the writer has started. */
void icx_signals_install(void);

#endif
