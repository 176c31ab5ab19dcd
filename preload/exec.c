/* exec() and _exit(): neither runs the destructor, so without these wrappers the last flush
 * interval of a process that ends that way is lost (a launcher that execs the real program, a
 * Python worker that leaves through os._exit).  Each asks the writer for a final frame first:
 * END with ICX_EXIT_EXEC, or with _exit's status.  A failed exec returns to a stream that goes on;
 * errno is the exec's.  A vfork child (posix_spawn's own does not come through here; a program's
 * vfork() + execve() does) shares our memory but not our trace: the writer leaves it alone.
 * glibc's exec functions call its internal execve, not this one, so each is wrapped. */
#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "icx/trace_format.h"
#include "resolve.h"
#include "runtime.h"
#include "writer.h"

#define LIBC "libc.so"

ICX_REAL_DECL(LIBC, int, execve, (const char *, char *const[], char *const[]));
ICX_REAL_DECL(LIBC, int, execv, (const char *, char *const[]));
ICX_REAL_DECL(LIBC, int, execvp, (const char *, char *const[]));
ICX_REAL_DECL(LIBC, int, execvpe, (const char *, char *const[], char *const[]));
ICX_REAL_DECL(LIBC, int, fexecve, (int, char *const[], char *const[]));
ICX_REAL_DECL(LIBC, int, execveat, (int, const char *, char *const[], char *const[], int));
ICX_REAL_DECL(LIBC, void, _exit, (int));
ICX_REAL_DECL(LIBC, void, _Exit, (int));

/* The final frame before the exec; the real function's result and errno, after it failed. */
static int icx_exec_begin(void)
{
    int saved = errno;
    int asked = icx_writer_end_now(ICX_EXIT_EXEC);
    errno = saved;
    return asked;
}

static int icx_exec_failed(int asked, int rc)
{
    if (asked)
        icx_writer_resume(); /* touches no errno */
    return rc;
}

/* A real function that cannot be found: the exec fails as the C library would have it. */
#define ICX_EXEC_CALL(name, ...)                                                                   \
    do {                                                                                           \
        icx_real_##name##_t real = ICX_REAL(name);                                                 \
        if (!real) {                                                                               \
            errno = ENOSYS;                                                                        \
            return -1;                                                                             \
        }                                                                                          \
        int asked = icx_exec_begin();                                                              \
        return icx_exec_failed(asked, real(__VA_ARGS__));                                          \
    } while (0)

ICX_EXPORT int execve(const char *path, char *const argv[], char *const envp[])
{
    ICX_EXEC_CALL(execve, path, argv, envp);
}

ICX_EXPORT int execv(const char *path, char *const argv[])
{
    ICX_EXEC_CALL(execv, path, argv);
}

ICX_EXPORT int execvp(const char *file, char *const argv[])
{
    ICX_EXEC_CALL(execvp, file, argv);
}

ICX_EXPORT int execvpe(const char *file, char *const argv[], char *const envp[])
{
    ICX_EXEC_CALL(execvpe, file, argv, envp);
}

ICX_EXPORT int fexecve(int fd, char *const argv[], char *const envp[])
{
    ICX_EXEC_CALL(fexecve, fd, argv, envp);
}

ICX_EXPORT int execveat(int dirfd, const char *path, char *const argv[], char *const envp[],
                        int flags)
{
    ICX_EXEC_CALL(execveat, dirfd, path, argv, envp, flags);
}

/* execl, execlp, execle: the arguments gathered into an array on the stack (async-signal-safe,
 * as exec is), then the v-form. */
#define ICX_MAX_LARGS 4096
/* glibc declares arg0 nonnull, but a caller may pass NULL (an empty argv): hide it from the
 * optimizer rather than trust the declaration. */
static inline const char *icx_launder(const char *p)
{
    __asm__("" : "+r"(p));
    return p;
}

static int icx_count_args(const char *arg0, va_list ap)
{
    int n = 1;
    if (arg0)
        while (va_arg(ap, const char *) && n < ICX_MAX_LARGS)
            n++;
    return n;
}

static int icx_too_many(int n)
{
    if (n < ICX_MAX_LARGS)
        return 0;
    errno = E2BIG;
    return 1;
}

/* The list forms' common prologue: counts the arguments after arg0_, declares argv (a VLA of
 * the caller's frame, so no allocation) and fills it; leaves ap open after the terminating NULL
 * (execle reads the environment from there).  Returns -1/E2BIG past ICX_MAX_LARGS. */
#define ICX_LIST_ARGV(argv, ap, arg0_)                                                             \
    const char *arg0 = icx_launder(arg0_);                                                         \
    va_list ap;                                                                                    \
    va_start(ap, arg0_);                                                                           \
    int n_ = icx_count_args(arg0, ap);                                                             \
    va_end(ap);                                                                                    \
    if (icx_too_many(n_))                                                                          \
        return -1;                                                                                 \
    char *argv[n_ + 1];                                                                            \
    va_start(ap, arg0_);                                                                           \
    argv[0] = (char *)arg0;                                                                        \
    for (int i_ = 1; i_ < (arg0 ? n_ : 0); i_++)                                                   \
        argv[i_] = va_arg(ap, char *);                                                             \
    argv[arg0 ? n_ : 0] = NULL;                                                                    \
    if (arg0)                                                                                      \
    (void)va_arg(ap, char *) /* the terminating NULL */

ICX_EXPORT int execl(const char *path, const char *arg0_, ...)
{
    ICX_LIST_ARGV(argv, ap, arg0_);
    va_end(ap);
    return execv(path, argv);
}

ICX_EXPORT int execlp(const char *file, const char *arg0_, ...)
{
    ICX_LIST_ARGV(argv, ap, arg0_);
    va_end(ap);
    return execvp(file, argv);
}

ICX_EXPORT int execle(const char *path, const char *arg0_, ...)
{
    ICX_LIST_ARGV(argv, ap, arg0_);
    char *const *envp = va_arg(ap, char *const *); /* the environment follows the NULL */
    va_end(ap);
    return execve(path, argv, envp);
}

/* _exit skips atexit and the destructor: the final frame, END with its status, then the real
 * one.  Also from a signal handler (the request takes no lock). */
static _Noreturn void icx_exit_now(icx_real__exit_t real, int status)
{
    int saved = errno;
    icx_writer_end_now(status & 0xff);
    errno = saved;
    if (real)
        real(status);
    syscall(SYS_exit_group, status);
    __builtin_unreachable();
}

ICX_EXPORT void _exit(int status)
{
    icx_exit_now(ICX_REAL(_exit), status);
}

ICX_EXPORT void _Exit(int status)
{
    icx_exit_now((icx_real__exit_t)ICX_REAL(_Exit), status);
}
