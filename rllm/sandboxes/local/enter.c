/* rllm-sandbox-enter: start one command inside a running local sandbox with Docker's
 * default privileges, or compile a seccomp profile to BPF.
 *
 * Why our own program: nsenter (util-linux 2.38) enters a user namespace with every
 * capability and has no way to drop them, set no_new_privs or load a seccomp filter
 * after entering; setpriv cannot enter namespaces, and after nsenter the only programs
 * left are the sandbox's own. Entering and dropping must happen in one process, in this
 * order: join the cgroups, enter the namespaces, fork (for the pid namespace), then in
 * the child drop the bounding set, switch user, set the Docker capability set, set
 * no_new_privs, load the seccomp filter, exec. The parent waits and exits as the child
 * did (by the same signal where it was killed), as nsenter does.
 *
 * Usage:
 *   rllm-sandbox-enter --pid N [--cgroup FILE]... [--rlimit-as KB] [--uid U --gid G]
 *       [--groups G1,G2] [--cwd DIR] --caps HEX --seccomp FILE -- ARGV...
 *   rllm-sandbox-enter --pid N --setup-sysfs
 *       trusted set-up after the sandbox started: a read-only sysfs of the sandbox's own
 *       network namespace at /sys, /sys/firmware masked (as Docker mounts them)
 *   rllm-sandbox-enter --compile-seccomp < RULES > BPF
 *       RULES: "default ACTION", "arch NAME", "rule ACTION SYSCALL [INDEX OP VALUE DATUM]..."
 *       (numbers in decimal; ACTION a libseccomp action value; OP a scmp_compare value)
 *
 * Exit codes of its own: 125 (it failed before the command started: the message is on
 * stderr), 126 (the working directory is missing), 127 (the command was not found).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <linux/capability.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <seccomp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#define MAX_CGROUPS 16
#define MAX_GROUPS 64

static void die(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fputs("rllm-sandbox-enter: ", stderr);
    vfprintf(stderr, fmt, ap);
    if (errno) fprintf(stderr, ": %s", strerror(errno));
    fputc('\n', stderr);
    va_end(ap);
    _exit(125);
}

static unsigned long parse_num(const char *text, const char *what, int base) {
    char *end;
    errno = 0;
    unsigned long value = strtoul(text, &end, base);
    if (errno || *end || end == text) {
        errno = 0;
        die("%s is not a number: '%s'", what, text);
    }
    return value;
}

/* ---- compiling a profile ------------------------------------------------------- */

static int compile_seccomp(void) {
    char line[4096];
    scmp_filter_ctx ctx = NULL;
    int newest = -1; /* the highest native syscall number the rules name */
    while (fgets(line, sizeof line, stdin)) {
        char *save, *word = strtok_r(line, " \t\n", &save);
        if (!word) continue;
        if (!strcmp(word, "default")) {
            uint32_t action = (uint32_t)parse_num(strtok_r(NULL, " \t\n", &save), "action", 0);
            ctx = seccomp_init(action);
            if (!ctx) die("seccomp_init failed");
            /* keep no_new_privs to ourselves: the enter path sets it explicitly */
            seccomp_attr_set(ctx, SCMP_FLTATR_CTL_NNP, 0);
        } else if (!ctx) {
            errno = 0;
            die("the rules must start with 'default ACTION'");
        } else if (!strcmp(word, "arch")) {
            char *name = strtok_r(NULL, " \t\n", &save);
            uint32_t arch = seccomp_arch_resolve_name(name);
            if (arch && arch != seccomp_arch_native()) {
                int rc = seccomp_arch_add(ctx, arch);
                if (rc < 0 && rc != -EEXIST) die("cannot add architecture %s", name);
            }
        } else if (!strcmp(word, "rule")) {
            uint32_t action = (uint32_t)parse_num(strtok_r(NULL, " \t\n", &save), "action", 0);
            char *name = strtok_r(NULL, " \t\n", &save);
            struct scmp_arg_cmp cmps[6];
            unsigned count = 0;
            char *index;
            while ((index = strtok_r(NULL, " \t\n", &save)) && count < 6) {
                cmps[count].arg = (unsigned)parse_num(index, "arg index", 0);
                cmps[count].op = (enum scmp_compare)parse_num(strtok_r(NULL, " \t\n", &save), "op", 0);
                cmps[count].datum_a = strtoull(strtok_r(NULL, " \t\n", &save), NULL, 0);
                cmps[count].datum_b = strtoull(strtok_r(NULL, " \t\n", &save), NULL, 0);
                count++;
            }
            int nr = seccomp_syscall_resolve_name(name);
            if (nr == __NR_SCMP_ERROR) continue; /* not a syscall of these architectures */
            if (nr > newest) newest = nr;
            /* a syscall missing on a sub-architecture is skipped there by libseccomp */
            seccomp_rule_add_array(ctx, action, nr, count, cmps);
        } else {
            errno = 0;
            die("unknown rule line '%s'", word);
        }
    }
    if (!ctx) {
        errno = 0;
        die("no rules on stdin");
    }
    /* As runc does for Docker: a syscall newer than every one the profile names fails with
     * ENOSYS rather than the default errno, so a libc that tries a new call first (glibc
     * 2.39+ fchmodat2 for chmod -R, tar, dpkg-source) falls back to the older call the
     * profile allows instead of failing with EPERM. */
    for (int nr = newest + 1; newest >= 0 && nr <= newest + 256; nr++) {
        char *name = seccomp_syscall_resolve_num_arch(SCMP_ARCH_NATIVE, nr);
        if (!name) continue;
        seccomp_rule_add(ctx, SCMP_ACT_ERRNO(ENOSYS), seccomp_syscall_resolve_name(name), 0);
        free(name);
    }
    if (seccomp_export_bpf(ctx, STDOUT_FILENO) < 0) die("cannot export the filter");
    seccomp_release(ctx);
    return 0;
}

/* ---- entering ------------------------------------------------------------------ */

struct options {
    long pid;
    const char *cgroups[MAX_CGROUPS];
    int ncgroups;
    long rlimit_as_kb;
    uid_t uid;
    gid_t gid;
    gid_t groups[MAX_GROUPS];
    int ngroups;
    int have_groups;
    const char *cwd;
    uint64_t caps;
    const char *seccomp;
    int setup_sysfs;
    char **argv;
};

static void join_cgroups(const struct options *o) {
    char pid[32];
    int len = snprintf(pid, sizeof pid, "%d\n", (int)getpid());
    for (int i = 0; i < o->ncgroups; i++) {
        int fd = open(o->cgroups[i], O_WRONLY | O_CLOEXEC);
        if (fd < 0 || write(fd, pid, (size_t)len) != len) die("cannot join cgroup %s", o->cgroups[i]);
        close(fd);
    }
}

static void enter_namespaces(long pid, int *root_fd, int *cwd_fd) {
    /* the user namespace first: the others are owned by it */
    static const char *names[] = {"user", "cgroup", "ipc", "uts", "net", "pid", "mnt"};
    int fds[7];
    char path[64];
    for (int i = 0; i < 7; i++) {
        snprintf(path, sizeof path, "/proc/%ld/ns/%s", pid, names[i]);
        fds[i] = open(path, O_RDONLY | O_CLOEXEC);
        if (fds[i] < 0) die("cannot open %s", path);
    }
    snprintf(path, sizeof path, "/proc/%ld/root", pid);
    *root_fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (*root_fd < 0) die("cannot open %s", path);
    snprintf(path, sizeof path, "/proc/%ld/cwd", pid);
    *cwd_fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (*cwd_fd < 0) die("cannot open %s", path);
    for (int i = 0; i < 7; i++) {
        struct stat ours, theirs;
        snprintf(path, sizeof path, "/proc/self/ns/%s", names[i]);
        /* a namespace shared with the host (network=host) is not entered: setns into
           one's own namespace fails for the user namespace */
        if (stat(path, &ours) == 0 && fstat(fds[i], &theirs) == 0 && ours.st_ino == theirs.st_ino &&
            ours.st_dev == theirs.st_dev) {
            close(fds[i]);
            continue;
        }
        if (setns(fds[i], 0) < 0) die("cannot enter the sandbox's %s namespace", names[i]);
        close(fds[i]);
    }
    if (fchdir(*root_fd) < 0 || chroot(".") < 0) die("cannot enter the sandbox's root");
}

static void read_file(const char *path, void **data, size_t *size) {
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) < 0) die("cannot read %s", path);
    *data = malloc((size_t)st.st_size + 1);
    ssize_t got = read(fd, *data, (size_t)st.st_size);
    if (got != st.st_size) die("short read of %s", path);
    *size = (size_t)st.st_size;
    close(fd);
}

static void drop_privileges(const struct options *o) {
    /* the bounding set first: dropping needs CAP_SETPCAP, which the switch may lose */
    for (int cap = 0; cap <= 63; cap++) {
        if (o->caps & (1ULL << cap)) continue;
        if (prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) < 0) {
            if (errno == EINVAL) break; /* past the kernel's last capability */
            die("cannot drop capability %d from the bounding set", cap);
        }
    }
    if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) < 0 && errno != EINVAL)
        die("cannot clear the ambient capabilities");
    if (o->have_groups ? setgroups((size_t)o->ngroups, o->groups) : setgroups(0, NULL))
        die("cannot set the supplementary groups");
    if (setresgid(o->gid, o->gid, o->gid) < 0) die("cannot switch to gid %u", o->gid);
    if (setresuid(o->uid, o->uid, o->uid) < 0) die("cannot switch to uid %u", o->uid);
    uint64_t keep = o->uid == 0 ? o->caps : 0; /* as Docker: a non-root user holds none */
    struct __user_cap_header_struct header = {_LINUX_CAPABILITY_VERSION_3, 0};
    struct __user_cap_data_struct data[2] = {
        {(uint32_t)keep, (uint32_t)keep, 0},
        {(uint32_t)(keep >> 32), (uint32_t)(keep >> 32), 0},
    };
    if (syscall(SYS_capset, &header, data) < 0) die("cannot set the capabilities");
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0) die("cannot set no_new_privs");
}

static void load_seccomp(void *bpf, size_t size) {
    struct sock_fprog prog = {(unsigned short)(size / sizeof(struct sock_filter)), bpf};
    if (prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) < 0) die("cannot load the seccomp filter");
}

static int setup_sysfs(void) {
    /* a fresh sysfs shows the sandbox's own network devices; where the kernel refuses it
       (the host's network namespace) the read-only bind of the host's /sys stays */
    if (mount("sysfs", "/sys", "sysfs", MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) < 0)
        return 0;
    if (mount("tmpfs", "/sys/firmware", "tmpfs", MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC,
              "size=0") < 0 && errno != ENOENT)
        die("cannot mask /sys/firmware");
    return 0;
}

static int wait_child(pid_t child) {
    int status;
    while (waitpid(child, &status, 0) < 0) {
        if (errno != EINTR) die("waitpid");
    }
    if (WIFEXITED(status)) return WEXITSTATUS(status);
    int sig = WTERMSIG(status);
    signal(sig, SIG_DFL);
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, sig);
    sigprocmask(SIG_UNBLOCK, &set, NULL);
    kill(getpid(), sig);
    return 128 + sig;
}

static void parse(int argc, char **argv, struct options *o) {
    memset(o, 0, sizeof *o);
    o->pid = -1;
    o->rlimit_as_kb = -1;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--")) {
            o->argv = argv + i + 1;
            return;
        } else if (!strcmp(a, "--setup-sysfs")) {
            o->setup_sysfs = 1;
            continue;
        }
        if (!v) {
            errno = 0;
            die("%s needs a value", a);
        }
        i++;
        if (!strcmp(a, "--pid")) o->pid = (long)parse_num(v, "--pid", 10);
        else if (!strcmp(a, "--cgroup") && o->ncgroups < MAX_CGROUPS) o->cgroups[o->ncgroups++] = v;
        else if (!strcmp(a, "--rlimit-as")) o->rlimit_as_kb = (long)parse_num(v, "--rlimit-as", 10);
        else if (!strcmp(a, "--uid")) o->uid = (uid_t)parse_num(v, "--uid", 10);
        else if (!strcmp(a, "--gid")) o->gid = (gid_t)parse_num(v, "--gid", 10);
        else if (!strcmp(a, "--cwd")) o->cwd = v;
        else if (!strcmp(a, "--caps")) o->caps = strtoull(v, NULL, 16);
        else if (!strcmp(a, "--seccomp")) o->seccomp = v;
        else if (!strcmp(a, "--groups")) {
            o->have_groups = 1;
            char *copy = strdup(v), *save, *g;
            for (g = strtok_r(copy, ",", &save); g && o->ngroups < MAX_GROUPS; g = strtok_r(NULL, ",", &save))
                o->groups[o->ngroups++] = (gid_t)parse_num(g, "--groups", 10);
        } else {
            errno = 0;
            die("unknown option %s", a);
        }
    }
}

int main(int argc, char **argv) {
    if (argc == 2 && !strcmp(argv[1], "--compile-seccomp")) return compile_seccomp();
    struct options o;
    parse(argc, argv, &o);
    errno = 0;
    if (o.pid <= 0) die("--pid is required");
    if (!o.setup_sysfs && (!o.argv || !o.argv[0])) die("a command is required after --");
    if (!o.setup_sysfs && !o.seccomp) die("--seccomp is required");
    void *bpf = NULL;
    size_t bpf_size = 0;
    if (o.seccomp) read_file(o.seccomp, &bpf, &bpf_size);
    join_cgroups(&o);
    if (o.rlimit_as_kb >= 0) {
        struct rlimit lim = {(rlim_t)o.rlimit_as_kb * 1024, (rlim_t)o.rlimit_as_kb * 1024};
        if (setrlimit(RLIMIT_AS, &lim) < 0) die("cannot set the address-space limit");
    }
    int root_fd, cwd_fd;
    enter_namespaces(o.pid, &root_fd, &cwd_fd);
    if (o.setup_sysfs) return setup_sysfs();
    pid_t child = fork();
    if (child < 0) die("fork");
    if (child > 0) return wait_child(child);
    if (fchdir(cwd_fd) < 0) die("cannot enter the sandbox's working directory");
    drop_privileges(&o);
    if (o.cwd && chdir(o.cwd) < 0) {
        fprintf(stderr, "rllm-sandbox-enter: cannot cd to %s: %s\n", o.cwd, strerror(errno));
        _exit(126);
    }
    load_seccomp(bpf, bpf_size);
    execvp(o.argv[0], o.argv);
    int err = errno;
    fprintf(stderr, "rllm-sandbox-enter: %s: %s\n", o.argv[0], strerror(err));
    _exit(err == ENOENT ? 127 : 126);
}
