/* Signal actions, kept virtual.  The tracer installs handlers of its own: on the fatal signals (a
 * final frame before the process dies) and on its dump signals (hang.c).  The job must not notice:
 * sigaction(), signal() and their kin (wraps_signal.def) show it the action it set itself, never
 * ours (Python's signal.getsignal(SIGTERM) stays SIG_DFL), and an action it sets later does not
 * replace ours but becomes what ours chains to, installed with the job's own mask and flags so
 * the kernel blocks, restarts and resets as it would have for the job.
 *
 * Per signal a slot holds the job's action (as the kernel would report it).  The kernel's current
 * action decides what the job is shown: while it is ours, the slot; otherwise (SIG_IGN, which is
 * the job's alone, a dump signal the job took, or a change made behind our back: glibc's abort()
 * and system(), a raw rt_sigaction) the kernel's own.  One spinlock, taken with every signal
 * blocked (so a handler on the same thread never waits for it), guards the table.  A vfork child
 * shares the table but not the kernel's: it sees the same view and its changes go to its own
 * kernel actions only (Python's subprocess resets handlers in its vfork child). */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <string.h>
#include <unistd.h>

#include "module.h"
#include "runtime.h"
#include "signals.h"
#include "writer.h"

/* The C library's sigaction under its other exported name, which we do not define. */
extern int __sigaction(int sig, const struct sigaction *act, struct sigaction *old);

typedef void (*icx_handler_t)(int);

enum { ICX_SIG_NONE, ICX_SIG_CHAIN, ICX_SIG_YIELD };

struct icx_sig {
    _Atomic int mode;      /* set before the slot's action is installed */
    struct sigaction job;  /* the job's action, as the kernel would report it */
    struct sigaction ours; /* ICX_SIG_YIELD: the tracer's action */
};
static struct icx_sig icx_sigs[_NSIG];
static atomic_flag icx_sig_lock = ATOMIC_FLAG_INIT;
static _Atomic int icx_sig_any; /* some slot is in use: until then every call goes straight on */
static _Atomic int icx_sig_pid; /* the process the table belongs to (not a vfork child) */
static unsigned char icx_sigintr[_NSIG]; /* siginterrupt(sig, 1): signal() then omits SA_RESTART */
static sigset_t icx_sig_fork_mask;

static void icx_sig_lock_take(sigset_t *prev)
{
    sigset_t all;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, prev);
    while (atomic_flag_test_and_set_explicit(&icx_sig_lock, memory_order_acquire))
        sched_yield();
}

static void icx_sig_lock_drop(const sigset_t *prev)
{
    atomic_flag_clear_explicit(&icx_sig_lock, memory_order_release);
    pthread_sigmask(SIG_SETMASK, prev, NULL);
}

static void icx_fatal_handler(int signo, siginfo_t *info, void *uctx);

static int icx_sig_is_ours(const struct icx_sig *s, const struct sigaction *a)
{
    return s->mode == ICX_SIG_CHAIN ? a->sa_sigaction == icx_fatal_handler
                                    : a->sa_handler == s->ours.sa_handler;
}

static int icx_sig_owner(void)
{
    return atomic_load(&icx_sig_pid) == (int)getpid();
}

/* The kernel's action for sig, from the slot (lock held).  A fatal signal: ours unless the job
 * ignores it, with the job's mask and flags when it has a handler.  A dump signal: ours while the
 * job has the default, else the job's.  set: the job has just set its action, and what the C
 * library adds to it (SA_RESTORER and the restorer) belongs in the job's view. */
/* Is the kernel's action for the slot's signal ours to install? */
static int icx_sig_mine(const struct icx_sig *s)
{
    return s->mode == ICX_SIG_CHAIN ? s->job.sa_handler != SIG_IGN : s->job.sa_handler == SIG_DFL;
}

static int icx_sig_apply(int sig, struct icx_sig *s, int set)
{
    const struct sigaction *j = &s->job;
    struct sigaction r;
    int mine = icx_sig_mine(s);
    if (!mine)
        return __sigaction(sig, j, NULL);
    if (s->mode == ICX_SIG_YIELD) {
        r = s->ours;
    } else {
        memset(&r, 0, sizeof(r));
        r.sa_sigaction = icx_fatal_handler;
        if (j->sa_handler == SIG_DFL) {
            sigemptyset(&r.sa_mask);
            r.sa_flags = SA_SIGINFO | SA_RESTART | SA_ONSTACK;
        } else {
            r.sa_mask = j->sa_mask;
            r.sa_flags = j->sa_flags | SA_SIGINFO;
        }
    }
    if (__sigaction(sig, &r, NULL) != 0)
        return -1;
    struct sigaction back;
    if (set && __sigaction(sig, NULL, &back) == 0) {
        s->job.sa_flags |= back.sa_flags & ~r.sa_flags;
        s->job.sa_restorer = back.sa_restorer;
    }
    return 0;
}

/* sigaction() on a signal with a slot (lock held).  act is a copy: it may have been old. */
static int icx_sig_virtual(int sig, struct icx_sig *s, const struct sigaction *act,
                           struct sigaction *old)
{
    struct sigaction cur;
    if (__sigaction(sig, NULL, &cur) != 0)
        return -1;
    if (old)
        *old = icx_sig_is_ours(s, &cur) ? s->job : cur;
    if (!act)
        return 0;
    if (!icx_sig_owner())
        return __sigaction(sig, act, NULL); /* a vfork child's kernel actions are its own */
    struct sigaction prev = s->job;
    if (!icx_sig_is_ours(s, act)) { /* our own handler handed back: the job's action stays */
        s->job = *act;
        sigdelset(&s->job.sa_mask, SIGKILL);
        sigdelset(&s->job.sa_mask, SIGSTOP);
    }
    if (icx_sig_apply(sig, s, 1) != 0) {
        int err = errno;
        s->job = prev;
        icx_sig_apply(sig, s, 0);
        errno = err;
        return -1;
    }
    return 0;
}

static int icx_sigaction(int sig, const struct sigaction *act, struct sigaction *old)
{
    if (!atomic_load_explicit(&icx_sig_any, memory_order_acquire) || sig <= 0 || sig >= _NSIG)
        return __sigaction(sig, act, old);
    struct icx_sig *s = &icx_sigs[sig];
    if (!act && atomic_load(&s->mode) == ICX_SIG_NONE) {
        /* A question about a signal the tracer does not use (Python asks about each at start),
         * without the lock: if no slot was taken for it by the time the answer is in, the answer
         * is the job's (a claim marks the slot before it installs anything). */
        int rc = __sigaction(sig, NULL, old);
        if (atomic_load(&s->mode) == ICX_SIG_NONE)
            return rc;
    }
    struct sigaction want;
    if (act)
        want = *act;
    sigset_t prev;
    icx_sig_lock_take(&prev);
    int rc = s->mode == ICX_SIG_NONE ? __sigaction(sig, act ? &want : NULL, old)
                                     : icx_sig_virtual(sig, s, act ? &want : NULL, old);
    int err = errno;
    icx_sig_lock_drop(&prev);
    errno = err;
    return rc;
}

/* A slot taken for sig with the kernel's current action as the job's (lock held). */
static int icx_sig_take(int sig, int mode, const struct sigaction *ours)
{
    struct icx_sig *s = &icx_sigs[sig];
    if (__sigaction(sig, NULL, &s->job) != 0)
        return -1;
    if (mode == ICX_SIG_YIELD && s->job.sa_handler != SIG_DFL)
        return -1; /* the job uses it */
    s->mode = mode;
    if (ours)
        s->ours = *ours;
    if (!atomic_load(&icx_sig_any)) {
        atomic_store(&icx_sig_pid, (int)getpid());
        atomic_store_explicit(&icx_sig_any, 1, memory_order_release);
    }
    /* An action that stays the job's (SIG_IGN inherited from nohup) is left as the kernel has
     * it: installing it again through the C library would add SA_RESTORER to what the job sees. */
    if (icx_sig_mine(s) && icx_sig_apply(sig, s, 0) != 0) {
        s->mode = ICX_SIG_NONE;
        return -1;
    }
    return 0;
}

int icx_sig_claim(int sig, const struct sigaction *ours)
{
    if (sig <= 0 || sig >= _NSIG)
        return 0;
    sigset_t prev;
    icx_sig_lock_take(&prev);
    struct icx_sig *s = &icx_sigs[sig];
    int on = 0;
    struct sigaction cur;
    if (s->mode == ICX_SIG_NONE)
        on = icx_sig_take(sig, ICX_SIG_YIELD, ours) == 0;
    else if (s->mode == ICX_SIG_YIELD && s->ours.sa_handler == ours->sa_handler)
        on = __sigaction(sig, NULL, &cur) == 0 && cur.sa_handler == ours->sa_handler;
    icx_sig_lock_drop(&prev);
    return on;
}

static const int icx_fatal[] = {SIGTERM, SIGINT, SIGHUP, SIGSEGV, SIGBUS, SIGABRT, SIGFPE, SIGILL};

void icx_signals_install(void)
{
    sigset_t prev;
    icx_sig_lock_take(&prev);
    for (size_t i = 0; i < sizeof(icx_fatal) / sizeof(icx_fatal[0]); i++)
        if (icx_sigs[icx_fatal[i]].mode == ICX_SIG_NONE)
            icx_sig_take(icx_fatal[i], ICX_SIG_CHAIN, NULL);
    icx_sig_lock_drop(&prev);
}

/* A fatal signal: the job's handler runs after a nudge to the writer (the job may live on; every
 * way out passes here again, or through exit or _exit, abort() excepted: see below; a SIGSEGV
 * handler may be a JIT's or a garbage collector's, hot, so nothing waits); the default action
 * after a final frame,
 * with the job's action put back first so the exit status and core dump are what they would
 * have been. */
static void icx_fatal_handler(int signo, siginfo_t *info, void *uctx)
{
    int saved = errno;
    struct icx_sig *s = &icx_sigs[signo];
    sigset_t prev;
    icx_sig_lock_take(&prev);
    struct sigaction job = s->job;
    int dies = job.sa_handler == SIG_DFL;
    if (dies) {
        __sigaction(signo, &job, NULL);
    } else if (job.sa_handler != SIG_IGN && (job.sa_flags & SA_RESETHAND) && icx_sig_owner()) {
        /* The kernel has reset the action to the default: so does the job's view, and ours,
         * chaining to that default, goes back on. */
        s->job.sa_handler = SIG_DFL;
        icx_sig_apply(signo, s, 0);
    }
    icx_sig_lock_drop(&prev);
    if (dies)
        icx_writer_flush_from_signal(signo, 1);
    else
        icx_writer_wake();
    errno = saved;
    if (job.sa_handler == SIG_IGN)
        return; /* ignored since it was sent */
    if (!dies) {
        if (job.sa_flags & SA_SIGINFO)
            job.sa_sigaction(signo, info, uctx);
        else
            job.sa_handler(signo);
        if (signo == SIGABRT) {
            /* The job's handler returned: from abort(), which now kills the process through the
             * C library's own sigaction, out of our sight.  The final frame now; if the job goes
             * on (it raised SIGABRT itself), so does the stream, and a later END supersedes. */
            int err = errno;
            if (icx_writer_end_now(128 + SIGABRT))
                icx_writer_resume();
            errno = err;
        }
        return;
    }
    if (info && info->si_code > 0 &&
        (signo == SIGSEGV || signo == SIGBUS || signo == SIGFPE || signo == SIGILL))
        return; /* a hardware fault: returning re-executes the faulting instruction */
    raise(signo);
}

/* ---- the C library's entry points (wraps_signal.def), as glibc 2.36 defines them ---- */

ICX_EXPORT int sigaction(int sig, const struct sigaction *act, struct sigaction *old)
{
    return icx_sigaction(sig, act, old);
}

/* signal() with BSD semantics (glibc's): the signal blocked in its handler, calls restarted;
 * System V's: reset to the default on delivery, not blocked, not restarted. */
static icx_handler_t icx_signal_as(int sig, icx_handler_t handler, int sysv)
{
    if (handler == SIG_ERR || sig < 1 || sig >= _NSIG) {
        errno = EINVAL;
        return SIG_ERR;
    }
    struct sigaction act, old;
    memset(&act, 0, sizeof(act));
    act.sa_handler = handler;
    sigemptyset(&act.sa_mask);
    if (sysv) {
        act.sa_flags = SA_RESETHAND | SA_NODEFER;
    } else {
        sigaddset(&act.sa_mask, sig);
        act.sa_flags = icx_sigintr[sig] ? 0 : SA_RESTART;
    }
    if (icx_sigaction(sig, &act, &old) < 0)
        return SIG_ERR;
    return old.sa_handler;
}

ICX_EXPORT icx_handler_t signal(int sig, icx_handler_t handler)
{
    return icx_signal_as(sig, handler, 0);
}

ICX_EXPORT icx_handler_t sysv_signal(int sig, icx_handler_t handler)
{
    return icx_signal_as(sig, handler, 1);
}

icx_handler_t bsd_signal(int sig, icx_handler_t handler); /* not declared for _GNU_SOURCE */
ICX_EXPORT icx_handler_t bsd_signal(int sig, icx_handler_t handler)
{
    return icx_signal_as(sig, handler, 0);
}

ICX_EXPORT icx_handler_t ssignal(int sig, icx_handler_t handler)
{
    return icx_signal_as(sig, handler, 0);
}

ICX_EXPORT icx_handler_t __sysv_signal(int sig, icx_handler_t handler)
{
    return icx_signal_as(sig, handler, 1);
}

ICX_EXPORT int siginterrupt(int sig, int interrupt)
{
    struct sigaction act;
    if (icx_sigaction(sig, NULL, &act) < 0)
        return -1;
    if (interrupt)
        act.sa_flags &= ~SA_RESTART;
    else
        act.sa_flags |= SA_RESTART;
    if (sig > 0 && sig < _NSIG)
        icx_sigintr[sig] = interrupt != 0;
    return icx_sigaction(sig, &act, NULL) < 0 ? -1 : 0;
}

/* ---- fork: the table's lock across it, so the child never inherits it taken ---- */

static void icx_sig_fork_prepare(void)
{
    icx_sig_lock_take(&icx_sig_fork_mask);
}

static void icx_sig_fork_parent(void)
{
    icx_sig_lock_drop(&icx_sig_fork_mask);
}

static void icx_sig_fork_child(void)
{
    if (atomic_load(&icx_sig_any))
        atomic_store(&icx_sig_pid, (int)getpid());
    icx_sig_lock_drop(&icx_sig_fork_mask);
}

const struct icx_module icx_mod_signals = {
    .name = "signals",
    .fork_prepare = icx_sig_fork_prepare,
    .fork_parent = icx_sig_fork_parent,
    .fork_child = icx_sig_fork_child,
};
