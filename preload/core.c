/* The core of libicxtrace: the module table, the constructor and destructor, signal and fork
 * handling.  Everything else is a module (module.h) the core loops over; it calls none of them
 * by name.  Fails open: any problem leaves the job untraced and unchanged, with at most one
 * warning. */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <string.h>

#include "dl.h"
#include "identity.h"
#include "module.h"
#include "runtime.h"
#include "writer.h"

/* Extra modules of a test build (tests/Makefile: the example module), appended to the table. */
#ifndef ICX_EXTRA_MODULES
#define ICX_EXTRA_MODULES
#endif

/* The order is the order of every loop over the table: the writer first (its lock is the
 * outermost at fork; its child handler, run last, restarts the stream), the identity before the
 * modules whose stream records follow it, the per-thread buffers and the frame (the note queue,
 * the innermost lock) last. */
/* clang-format off */
static const struct icx_module *const icx_modules[] = {
    &icx_mod_writer,
    &icx_mod_identity,
    &icx_mod_cuda,
    &icx_mod_gpu,
    &icx_mod_topo,
    &icx_mod_verbs,
    &icx_mod_nccl,
    &icx_mod_hang,
    &icx_mod_placement,
    &icx_mod_stack,
    ICX_EXTRA_MODULES /* -DICX_EXTRA_MODULES='&icx_mod_example,' (preload/examples/) */
    &icx_mod_tbuf,
    &icx_mod_frame,
};
/* clang-format on */
#define ICX_NMODULES (sizeof(icx_modules) / sizeof(icx_modules[0]))

/* ---- signals: flush what we have, then let the job's own disposition happen ---- */

static const int icx_signals[] = {SIGTERM, SIGINT,  SIGHUP, SIGSEGV,
                                  SIGBUS,  SIGABRT, SIGFPE, SIGILL};
#define ICX_NSIG (int)(sizeof(icx_signals) / sizeof(icx_signals[0]))
static struct sigaction icx_old_sa[ICX_NSIG];
static int icx_sa_installed[ICX_NSIG];

static void icx_signal_handler(int signo, siginfo_t *info, void *uctx)
{
    int saved = errno;
    int i;
    for (i = 0; i < ICX_NSIG; i++)
        if (icx_signals[i] == signo)
            break;
    int chained = i < ICX_NSIG && icx_sa_installed[i] &&
                  ((icx_old_sa[i].sa_flags & SA_SIGINFO) ? icx_old_sa[i].sa_sigaction != NULL
                                                         : icx_old_sa[i].sa_handler != SIG_DFL);
    icx_writer_flush_from_signal(signo, !chained);
    if (i < ICX_NSIG && icx_sa_installed[i]) {
        struct sigaction *old = &icx_old_sa[i];
        if (old->sa_flags & SA_SIGINFO) {
            if (old->sa_sigaction) {
                errno = saved;
                old->sa_sigaction(signo, info, uctx);
                return;
            }
        } else if (old->sa_handler != SIG_DFL && old->sa_handler != SIG_IGN) {
            errno = saved;
            old->sa_handler(signo);
            return;
        }
        /* The job had the default action: restore it and let it happen, so the exit status and
         * core dump are exactly what they would have been. */
        sigaction(signo, old, NULL);
        icx_sa_installed[i] = 0;
    }
    errno = saved;
    if (info && info->si_code > 0 &&
        (signo == SIGSEGV || signo == SIGBUS || signo == SIGFPE || signo == SIGILL))
        return; /* a hardware fault: returning re-executes the faulting instruction */
    raise(signo);
}

static void icx_signals_install(void)
{
    for (int i = 0; i < ICX_NSIG; i++) {
        struct sigaction cur;
        if (sigaction(icx_signals[i], NULL, &cur) != 0)
            continue;
        /* An ignored signal stays ignored: installing a handler would change the job. */
        if (!(cur.sa_flags & SA_SIGINFO) && cur.sa_handler == SIG_IGN)
            continue;
        struct sigaction sa;
        memset(&sa, 0, sizeof(sa));
        sa.sa_sigaction = icx_signal_handler;
        sa.sa_flags = SA_SIGINFO | SA_RESTART | (cur.sa_flags & SA_ONSTACK);
        sigemptyset(&sa.sa_mask);
        icx_old_sa[i] = cur;
        if (sigaction(icx_signals[i], &sa, NULL) == 0)
            icx_sa_installed[i] = 1;
    }
}

/* ---- fork: every module's locks taken in table order, released and reset in reverse ---- */

/* A test build (-DICX_TEST_FORK_WRITER_ONLY) resets only the writer at fork: it shows that
 * tests/fork/fork_locks fails when the modules' locks are not handled. */
#ifdef ICX_TEST_FORK_WRITER_ONLY
#define ICX_FORK_SKIP(m) ((m) != &icx_mod_writer)
#else
#define ICX_FORK_SKIP(m) 0
#endif

static void icx_atfork_prepare(void)
{
    for (size_t i = 0; i < ICX_NMODULES; i++)
        if (icx_modules[i]->fork_prepare && !ICX_FORK_SKIP(icx_modules[i]))
            icx_modules[i]->fork_prepare();
}

static void icx_atfork_parent(void)
{
    for (size_t i = ICX_NMODULES; i-- > 0;)
        if (icx_modules[i]->fork_parent && !ICX_FORK_SKIP(icx_modules[i]))
            icx_modules[i]->fork_parent();
}

/* Only the forking thread exists in the child: every lock another thread held at the fork is
 * released, and the parent's per-thread state dropped. */
static void icx_atfork_child(void)
{
    for (size_t i = ICX_NMODULES; i-- > 0;)
        if (icx_modules[i]->fork_child && !ICX_FORK_SKIP(icx_modules[i]))
            icx_modules[i]->fork_child();
}

/* ---- lifecycle ---- */

__attribute__((constructor)) static void icx_init(void)
{
    icx_config_load();
    if (icx_cfg.disabled || icx_output_resolve(0) != 0)
        return;
    for (size_t i = 0; i < ICX_NMODULES; i++)
        if (icx_modules[i]->init)
            icx_modules[i]->init();
    icx_dl_use_modules(icx_modules, ICX_NMODULES);
    if (icx_writer_start(icx_modules, ICX_NMODULES) != 0)
        return; /* warned; the job runs untraced */
    pthread_atfork(icx_atfork_prepare, icx_atfork_parent, icx_atfork_child);
    icx_signals_install();
    atomic_store(&icx_active, ICX_ON_FRESH); /* devices begin at the first device call */
}

__attribute__((destructor)) static void icx_fini(void)
{
    if (!atomic_load(&icx_active))
        return;
    atomic_store(&icx_active, 0);
    icx_writer_stop(-1);
    for (size_t i = 0; i < ICX_NMODULES; i++)
        if (icx_modules[i]->fini)
            icx_modules[i]->fini();
}
