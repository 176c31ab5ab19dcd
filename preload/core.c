/* The core of libicxtrace: the module table, the constructor and destructor, fork handling (the
 * signal handlers are signals.c's, installed here once the writer runs).  Everything else is a
 * module (module.h) the core loops over; it calls none of them by name.  Fails open: any problem
 * leaves the job untraced and unchanged, with at most one warning. */
#include <pthread.h>

#include "dl.h"
#include "identity.h"
#include "module.h"
#include "runtime.h"
#include "signals.h"
#include "writer.h"

/* Extra modules of a test build (tests/Makefile: the example module), appended to the table. */
#ifndef ICX_EXTRA_MODULES
#define ICX_EXTRA_MODULES
#endif

/* The order is the order of every loop over the table: the writer first (its lock is the
 * outermost at fork; its child handler, run last, restarts the stream), the identity before the
 * modules whose stream records follow it, the per-thread buffers and the frame (the note queue)
 * last, and after them the signal table, whose lock is taken inside any other. */
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
    &icx_mod_signals,
};
/* clang-format on */
#define ICX_NMODULES (sizeof(icx_modules) / sizeof(icx_modules[0]))

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
