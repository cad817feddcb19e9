/* The prelude of a sandboxed task on the local backend: what runs as the task, as the portal's
 * user, before setpriv and bwrap (``sandbox.task_command`` builds its arguments; ``make install``
 * builds it into the portal's virtualenv as ``portal-task-prelude``).
 *
 *   portal-task-prelude NOFILE ADDRESS_KB BOOTSTRAP PASSWD [CGROUP_PROCS...] --
 *       [--gates SOURCE GATE [SOURCE GATE...] -- [--detach TASK_ROOT]] COMMAND [ARG...]
 *
 * In that order, failing with 125 and its reason on stderr at the first step that fails:
 * - the open files' limit (NOFILE) and, without a memory cgroup, the address space's (ADDRESS_KB,
 *   in KiB), soft and hard; "" leaves one as it is;
 * - the task joins its cgroups: its pid into each CGROUP_PROCS (``cgroup.procs``) before
 *   anything of it runs;
 * - what bwrap copies into the sandbox is opened: BOOTSTRAP as descriptor 8 and PASSWD as 9
 *   (both stay private to the portal's user on the host), and ``sandbox.json`` in the current
 *   directory as 6 for bwrap's ``--info-fd``;
 * - as root (``--gates``), the task's uid may not pass through the directories above its working
 *   directory (or a storage's): in a mount namespace of the prelude's own (private: nothing of
 *   it is seen outside), each SOURCE is bound at its GATE under ``sandbox.GATES`` (0711), where
 *   bwrap, run as that uid, finds it. The task root, a mount of its own (``disk.bind_root``), is
 *   then detached (``--detach``) with every task's file system under it: bwrap, which reads the
 *   mount table once for each mount it makes, then reads a few dozen lines, not a hundred tasks'
 *   more. Where it is no longer a mount (no task file system was left), the task starts all the
 *   same: what it must not see is covered;
 * - COMMAND (setpriv, then bwrap) is run, found in the system's PATH, which it is given.
 *
 * Why C and not the shell script it replaces: the script ran ``sh``, ``unshare``, a second
 * ``sh``, a ``mount`` per gate and ``umount``, 8 ms per sandboxed start here (2 CPUs, 2 gates,
 * against 2.3 ms for setpriv alone), on the way of every task and in the machine's CPU.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <unistd.h>

#define SYSTEM_PATH "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
#define FAILED 125 /* as bwrap and env say a failure of their own, not the task's */
#define INFO_FD 6
#define BOOTSTRAP_FD 8
#define PASSWD_FD 9

static void fail(const char *format, ...) {
    int failure = errno;
    va_list args;
    va_start(args, format);
    dprintf(STDERR_FILENO, "[portal] the sandbox could not be set up: ");
    vdprintf(STDERR_FILENO, format, args);
    dprintf(STDERR_FILENO, ": %s\n", strerror(failure));
    va_end(args);
    _exit(FAILED);
}

static void limit(int resource, const char *value, long long unit, const char *name) {
    if (value[0] == '\0')
        return;
    rlim_t amount = (rlim_t)(strtoull(value, NULL, 10) * unit);
    struct rlimit both = {amount, amount};
    if (setrlimit(resource, &both) != 0)
        fail("the limit of %s (%s)", name, value);
}

/* Open ``path`` as descriptor ``target``, kept across exec. */
static void open_as(int target, const char *path, int flags) {
    int fd = open(path, flags, 0666);
    if (fd < 0)
        fail("opening %s", path);
    if (fd != target) {
        if (dup2(fd, target) < 0)
            fail("opening %s", path);
        close(fd);
    }
}

int main(int argc, char **argv) {
    if (argc < 6) {
        dprintf(STDERR_FILENO, "usage: %s NOFILE ADDRESS_KB BOOTSTRAP PASSWD [PROCS...] -- "
                               "[--gates SOURCE GATE... -- [--detach ROOT]] COMMAND...\n",
                argv[0]);
        return FAILED;
    }
    limit(RLIMIT_NOFILE, argv[1], 1, "open files");
    limit(RLIMIT_AS, argv[2], 1024, "address space");
    const char *bootstrap = argv[3], *passwd = argv[4];
    int arg = 5;
    char pid[32];
    int pid_size = snprintf(pid, sizeof pid, "%d\n", (int)getpid());
    for (; arg < argc && strcmp(argv[arg], "--") != 0; arg++) {
        int procs = open(argv[arg], O_WRONLY | O_TRUNC | O_CLOEXEC);
        if (procs < 0 || write(procs, pid, (size_t)pid_size) != pid_size)
            fail("joining %s", argv[arg]);
        close(procs);
    }
    arg++; /* -- */
    open_as(INFO_FD, "sandbox.json", O_WRONLY | O_CREAT | O_TRUNC);
    open_as(BOOTSTRAP_FD, bootstrap, O_RDONLY);
    open_as(PASSWD_FD, passwd, O_RDONLY);
    if (arg < argc && strcmp(argv[arg], "--gates") == 0) {
        if (unshare(CLONE_NEWNS) != 0)
            fail("a mount namespace");
        if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0)
            fail("making the mounts private");
        for (arg++; arg + 1 < argc && strcmp(argv[arg], "--") != 0; arg += 2)
            if (mount(argv[arg], argv[arg + 1], NULL, MS_BIND, NULL) != 0)
                fail("binding %s at %s", argv[arg], argv[arg + 1]);
        arg++; /* -- */
        if (arg + 1 < argc && strcmp(argv[arg], "--detach") == 0) {
            umount2(argv[arg + 1], MNT_DETACH); /* gone already: nothing to detach */
            arg += 2;
        }
    }
    if (arg >= argc) {
        errno = EINVAL;
        fail("no command");
    }
    setenv("PATH", SYSTEM_PATH, 1);
    execvp(argv[arg], argv + arg);
    fail("running %s", argv[arg]);
}
