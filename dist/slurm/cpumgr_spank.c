/*
 * cpumgr_spank.so: a Slurm SPANK plugin that registers every job step run with `--cpumgr` with
 * the node's cpumgr manager, as one program per step, so that jobs sharing CPUs (OverSubscribe,
 * several small jobs per node) are given disjoint CPUs every quantum instead of oversubscribing
 * them.
 *
 * In slurmstepd, for a step with the option (or every step, with the site default `default=on`):
 *   - user_init: checks that a manager answers on its socket; puts CPUMGR_SOCKET,
 *     CPUMGR_LAUNCHED=1 and (unless `noomp`) the OpenMP adapter in LD_PRELOAD into the step's
 *     environment;
 *   - task_init (in each task, before exec): when no manager answered, says so on the task's
 *     stderr and fails the task (`on_missing=fail`) or lets it run unmanaged;
 *   - task_post_fork (task 0): starts `cpumgr step PID ...` in a session of its own, outside the
 *     step: it waits until the task has executed its program (Slurm's binding and the user's
 *     identity are in place), registers the step's process group (every task of the step) named
 *     "job J.S user U", supervises it, and unregisters it when the step ends. If the manager dies
 *     it continues and widens back the step's processes itself.
 *
 * The kind comes from the step: several tasks on the node are an MPI-like rigid team of
 * tasks x cpus-per-task; one task is malleable up to its CPUs per task. Slurm's cgroup and
 * binding are the outer bound (what holds and what the manager lacks: docs/SLURM.md).
 *
 * plugstack.conf: `optional /usr/local/lib/slurm/cpumgr_spank.so [ARG...]`, ARGs:
 *   default=on|off         manage steps that do not say --cpumgr (default off)
 *   policy=LIST            the POLICY of steps that give none (default auto)
 *   socket=PATH            the manager's socket (default /run/cpumgr/cpumgr.sock)
 *   cpumgr=PATH            the cpumgr command (default /usr/local/bin/cpumgr)
 *   omp_lib=PATH           the OpenMP adapter (default /usr/local/lib/libcpumgr_omp.so)
 *   on_missing=fail|unmanaged  when no manager answers (default unmanaged)
 *   log=PATH               the supervisors' stderr, appended (default /dev/null)
 *
 * --cpumgr[=POLICY], POLICY a comma-separated list of: auto (kind from the step), rigid,
 * malleable, omp (preload the adapter, the default), noomp, weight=W, batch (manage an sbatch
 * script's own step too, for a script that runs its program without srun), off.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pwd.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <slurm/slurm.h>
#include <slurm/spank.h>

SPANK_PLUGIN(cpumgr, 1);

#define PLUGIN "cpumgr"

/* What the user or the site asked of one step. */
struct policy {
    int on;         /* manage this step */
    int batch;      /* manage the batch script's step too */
    int omp;        /* preload the OpenMP adapter */
    char kind[16];  /* auto, rigid or malleable */
    char weight[32];
};

static struct {
    int site_default;
    char site_policy[256];
    char socket[1024];
    char cpumgr[1024];
    char omp_lib[1024];
    int fail_on_missing;
    char log[1024];
} site = {0, "auto", "/run/cpumgr/cpumgr.sock", "/usr/local/bin/cpumgr",
          "/usr/local/lib/libcpumgr_omp.so", 0, "/dev/null"};

/* The option as given by the user (NULL: not given; "" given without a value). */
static char *user_policy;
/* The step's policy, decided in user_init. */
static struct policy step;
/* Why no manager answers, when none does ("" when one does). */
static char missing[1200];

/*
 * Parses a POLICY list into `p` (starting from what `p` holds); on a bad word, writes the
 * reason into `err` and returns -1.
 */
static int parse_policy(const char *list, struct policy *p, char *err, size_t errlen)
{
    char buf[256];
    char *save = NULL;
    if (strlen(list) >= sizeof(buf)) {
        snprintf(err, errlen, "POLICY is longer than %zu characters", sizeof(buf) - 1);
        return -1;
    }
    strcpy(buf, list);
    for (char *w = strtok_r(buf, ",", &save); w; w = strtok_r(NULL, ",", &save)) {
        if (!strcmp(w, "auto") || !strcmp(w, "rigid") || !strcmp(w, "malleable")) {
            snprintf(p->kind, sizeof(p->kind), "%s", w);
        } else if (!strcmp(w, "omp")) {
            p->omp = 1;
        } else if (!strcmp(w, "noomp")) {
            p->omp = 0;
        } else if (!strcmp(w, "off")) {
            p->on = 0;
        } else if (!strcmp(w, "on")) {
            p->on = 1;
        } else if (!strcmp(w, "batch")) {
            p->batch = 1;
        } else if (!strncmp(w, "weight=", 7)) {
            char *end;
            double v = strtod(w + 7, &end);
            if (end == w + 7 || *end || !(v > 0)) {
                snprintf(err, errlen, "%s: the weight must be a positive number", w);
                return -1;
            }
            snprintf(p->weight, sizeof(p->weight), "%s", w + 7);
        } else {
            snprintf(err, errlen,
                     "'%s' is not a cpumgr policy word (auto, rigid, malleable, omp, noomp, weight=W, batch, off)",
                     w);
            return -1;
        }
    }
    return 0;
}

static int opt_cpumgr(int val, const char *optarg, int remote)
{
    (void)val;
    (void)remote;
    struct policy check = {1, 0, 1, "auto", ""};
    char err[512];
    /* An sbatch or salloc option given without a value reaches the steps inside through the
     * environment as the text "(null)". */
    if (optarg && !strcmp(optarg, "(null)"))
        optarg = NULL;
    if (optarg && parse_policy(optarg, &check, err, sizeof(err)) < 0) {
        slurm_error("--cpumgr=%s: %s", optarg, err);
        return -1;
    }
    free(user_policy);
    user_policy = strdup(optarg ? optarg : "");
    return 0;
}

/* Registered from slurm_spank_init: Slurm 22.05's sbatch and salloc ignore a static
 * spank_options table, and honour options registered there. */
static struct spank_option cpumgr_option = {
    "cpumgr", "[POLICY]",
    "Share this step's CPUs through the node's cpumgr manager. POLICY: comma-separated "
    "auto|rigid|malleable, omp|noomp (preload the OpenMP adapter, default omp), weight=W, "
    "batch (also the batch script's own step), off.",
    2, 0, opt_cpumgr};

/* Copies `value` into `dst` (of `len` bytes), or says which argument is too long. */
static int set_path(char *dst, size_t len, const char *arg, const char *value)
{
    if (strlen(value) >= len || !*value) {
        slurm_error("%s: plugstack.conf argument '%s': empty or longer than %zu characters", PLUGIN,
                    arg, len - 1);
        return -1;
    }
    strcpy(dst, value);
    return 0;
}

/* The plugstack.conf arguments that name a path, and where each goes. */
static const struct {
    const char *key;
    char *dst;
    size_t len;
} paths[] = {
    {"socket=", site.socket, sizeof(site.socket)},
    {"cpumgr=", site.cpumgr, sizeof(site.cpumgr)},
    {"omp_lib=", site.omp_lib, sizeof(site.omp_lib)},
    {"log=", site.log, sizeof(site.log)},
};

/* If `a` is a path argument, stores it and returns 0, with `*rc` 0 or -1 (bad value); else
 * returns -1. */
static int path_arg(const char *a, int *rc)
{
    for (size_t i = 0; i < sizeof(paths) / sizeof(paths[0]); i++) {
        size_t k = strlen(paths[i].key);
        if (!strncmp(a, paths[i].key, k)) {
            *rc = set_path(paths[i].dst, paths[i].len, a, a + k);
            return 0;
        }
    }
    return -1;
}

/* Reads the plugstack.conf arguments into `site`; an unknown or bad one is an error. */
static int parse_args(int ac, char **av)
{
    for (int i = 0; i < ac; i++) {
        const char *a = av[i];
        char err[512];
        int known = 0;
        if (!strcmp(a, "default=on")) {
            site.site_default = 1;
        } else if (!strcmp(a, "default=off")) {
            site.site_default = 0;
        } else if (!strncmp(a, "policy=", 7)) {
            struct policy check = {1, 0, 1, "auto", ""};
            if (parse_policy(a + 7, &check, err, sizeof(err)) < 0) {
                slurm_error("%s: plugstack.conf argument '%s': %s", PLUGIN, a, err);
                return -1;
            }
            if (set_path(site.site_policy, sizeof(site.site_policy), a, a + 7) < 0)
                return -1;
        } else if (path_arg(a, &known) == 0) {
            if (known < 0)
                return -1;
        } else if (!strcmp(a, "on_missing=fail")) {
            site.fail_on_missing = 1;
        } else if (!strcmp(a, "on_missing=unmanaged")) {
            site.fail_on_missing = 0;
        } else {
            slurm_error("%s: plugstack.conf argument '%s' is unknown (default=on|off, policy=, "
                        "socket=, cpumgr=, omp_lib=, on_missing=fail|unmanaged, log=)",
                        PLUGIN, a);
            return -1;
        }
    }
    return 0;
}

int slurm_spank_init(spank_t sp, int ac, char **av)
{
    if (parse_args(ac, av) < 0)
        return -1;
    if (spank_context() == S_CTX_SLURMD || spank_context() == S_CTX_JOB_SCRIPT)
        return 0;
    if (spank_option_register(sp, &cpumgr_option) != ESPANK_SUCCESS) {
        slurm_error("%s: cannot register the --cpumgr option", PLUGIN);
        return -1;
    }
    return 0;
}

/* Whether a manager accepts a connection on the socket; if not, says why in `missing`. */
static int manager_answers(void)
{
    struct sockaddr_un addr = {.sun_family = AF_UNIX};
    if (strlen(site.socket) >= sizeof(addr.sun_path)) {
        snprintf(missing, sizeof(missing), "the socket path %s is too long", site.socket);
        return 0;
    }
    strcpy(addr.sun_path, site.socket);
    int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        snprintf(missing, sizeof(missing), "socket: %s", strerror(errno));
        return 0;
    }
    int rc = connect(fd, (struct sockaddr *)&addr, sizeof(addr));
    int e = errno;
    close(fd);
    if (rc < 0) {
        snprintf(missing, sizeof(missing), "no cpumgr manager answers on %s (%s); start one: "
                 "systemctl start cpumgr, or cpumgr daemon --socket %s --backend affinity",
                 site.socket, strerror(e), site.socket);
        return 0;
    }
    missing[0] = 0;
    return 1;
}

/* Puts `lib` first in the step's LD_PRELOAD. */
static void preload(spank_t sp, const char *lib)
{
    char old[4096] = "";
    char value[sizeof(old) + 1100];
    if (spank_getenv(sp, "LD_PRELOAD", old, sizeof(old)) == ESPANK_SUCCESS && *old)
        snprintf(value, sizeof(value), "%s:%s", lib, old);
    else
        snprintf(value, sizeof(value), "%s", lib);
    spank_setenv(sp, "LD_PRELOAD", value, 1);
}

int slurm_spank_user_init(spank_t sp, int ac, char **av)
{
    (void)ac;
    (void)av;
    char err[512];
    uint32_t stepid = 0;
    step = (struct policy){site.site_default, 0, 1, "auto", ""};
    if (parse_policy(site.site_policy, &step, err, sizeof(err)) < 0)
        return -1; /* checked in slurm_spank_init */
    if (user_policy) {
        step.on = 1;
        if (parse_policy(user_policy, &step, err, sizeof(err)) < 0) {
            slurm_error("--cpumgr=%s: %s", user_policy, err);
            return -1;
        }
    }
    /* The extern step holds no tasks of the user's; a batch script mostly waits for the steps
     * its sruns start (managed each on their own), and would hold CPUs it does not use. */
    if (spank_get_item(sp, S_JOB_STEPID, &stepid) == ESPANK_SUCCESS &&
        (stepid == SLURM_EXTERN_CONT || (stepid == SLURM_BATCH_SCRIPT && !step.batch)))
        step.on = 0;
    if (!step.on)
        return 0;
    if (!manager_answers()) {
        slurm_info("%s: %s", PLUGIN, missing); /* the node's log; the user reads task_init's */
        return 0; /* task_init tells the user, and fails the tasks if the site says so */
    }
    spank_setenv(sp, "CPUMGR_SOCKET", site.socket, 1);
    spank_setenv(sp, "CPUMGR_LAUNCHED", "1", 1);
    if (step.omp) {
        if (access(site.omp_lib, R_OK) == 0)
            preload(sp, site.omp_lib);
        else
            slurm_error("%s: the OpenMP adapter %s is not readable (%s); OpenMP regions keep their "
                        "own teams", PLUGIN, site.omp_lib, strerror(errno));
    }
    return 0;
}

int slurm_spank_task_init(spank_t sp, int ac, char **av)
{
    (void)ac;
    (void)av;
    int task = -1;
    if (!step.on || !missing[0])
        return 0;
    spank_get_item(sp, S_TASK_ID, &task);
    if (site.fail_on_missing) {
        fprintf(stderr, "cpumgr: %s; failing the step (the site's plugstack.conf says "
                "on_missing=fail)\n", missing);
        return -1;
    }
    if (task == 0)
        fprintf(stderr, "cpumgr: %s; this step runs unmanaged\n", missing);
    return 0;
}

/* The step's name in the manager's views: "job J.S user U" (S is "batch" for a batch script). */
static void step_name(spank_t sp, char *out, size_t len)
{
    uint32_t job = 0, stepid = 0;
    uid_t uid = 0;
    char stepbuf[16], userbuf[64];
    spank_get_item(sp, S_JOB_ID, &job);
    spank_get_item(sp, S_JOB_STEPID, &stepid);
    spank_get_item(sp, S_JOB_UID, &uid);
    if (stepid == SLURM_BATCH_SCRIPT)
        snprintf(stepbuf, sizeof(stepbuf), "batch");
    else if (stepid == SLURM_INTERACTIVE_STEP)
        snprintf(stepbuf, sizeof(stepbuf), "interactive");
    else
        snprintf(stepbuf, sizeof(stepbuf), "%u", stepid);
    struct passwd *pw = getpwuid(uid);
    if (pw)
        snprintf(userbuf, sizeof(userbuf), "%s", pw->pw_name);
    else
        snprintf(userbuf, sizeof(userbuf), "%u", (unsigned)uid);
    snprintf(out, len, "job %u.%s user %s", job, stepbuf, userbuf);
}

/* In the supervisor, before exec: default signal dispositions and mask (slurmstepd blocks
 * some), no descriptor of slurmstepd's (a task's output pipe held open would keep srun waiting),
 * stdin from /dev/null and stderr to the site's log. */
static void clean_process(void)
{
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    for (int s = 1; s < NSIG; s++)
        signal(s, SIG_DFL);
    int in = open("/dev/null", O_RDONLY);
    int log = open(site.log, O_WRONLY | O_APPEND | O_CREAT, 0600);
    if (log < 0)
        log = open("/dev/null", O_WRONLY);
    dup2(in, 0);
    dup2(log, 1);
    dup2(log, 2);
    long max = sysconf(_SC_OPEN_MAX);
    for (long fd = 3; fd < (max > 0 ? max : 1024); fd++)
        close((int)fd);
}

/*
 * Starts `cpumgr step` for the step whose task 0 (the leader of the step's process group) is
 * `leader`, detached from slurmstepd (a session of its own, reparented to init) so that it
 * outlives nothing of the step's and holds none of its descriptors.
 */
static int start_supervisor(spank_t sp, pid_t leader)
{
    uint32_t ntasks = 1;
    uint32_t cpt = 1;
    char name[160], pid[16], tasks[16], cpus[16];
    spank_get_item(sp, S_JOB_LOCAL_TASK_COUNT, &ntasks);
    if (spank_get_item(sp, S_STEP_CPUS_PER_TASK, &cpt) != ESPANK_SUCCESS || cpt == 0)
        cpt = 1;
    step_name(sp, name, sizeof(name));
    snprintf(pid, sizeof(pid), "%d", (int)leader);
    snprintf(tasks, sizeof(tasks), "%u", ntasks);
    snprintf(cpus, sizeof(cpus), "%u", cpt);
    const char *argv[20];
    int n = 0;
    argv[n++] = site.cpumgr;
    argv[n++] = "step";
    argv[n++] = pid;
    argv[n++] = "--name";
    argv[n++] = name;
    argv[n++] = "--tasks";
    argv[n++] = tasks;
    argv[n++] = "--cpus-per-task";
    argv[n++] = cpus;
    argv[n++] = "--kind";
    argv[n++] = step.kind;
    if (step.weight[0]) {
        argv[n++] = "--weight";
        argv[n++] = step.weight;
    }
    argv[n++] = "--socket";
    argv[n++] = site.socket;
    argv[n] = NULL;

    pid_t child = fork();
    if (child < 0) {
        slurm_error("%s: fork: %s; the step runs unmanaged", PLUGIN, strerror(errno));
        return 0;
    }
    if (child == 0) {
        setsid();
        pid_t grandchild = fork();
        if (grandchild != 0)
            _exit(grandchild < 0);
        clean_process();
        execv(site.cpumgr, (char *const *)argv);
        fprintf(stderr, "cpumgr_spank: cannot run %s: %s\n", site.cpumgr, strerror(errno));
        _exit(127);
    }
    int status = 0;
    while (waitpid(child, &status, 0) < 0 && errno == EINTR)
        ;
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
        slurm_error("%s: could not start %s step; the step runs unmanaged", PLUGIN, site.cpumgr);
    return 0;
}

int slurm_spank_task_post_fork(spank_t sp, int ac, char **av)
{
    (void)ac;
    (void)av;
    int task = -1;
    pid_t pid = 0;
    if (!step.on || missing[0])
        return 0;
    if (spank_get_item(sp, S_TASK_ID, &task) != ESPANK_SUCCESS || task != 0)
        return 0;
    if (spank_get_item(sp, S_TASK_PID, &pid) != ESPANK_SUCCESS || pid <= 0) {
        slurm_error("%s: no pid for task 0; the step runs unmanaged", PLUGIN);
        return 0;
    }
    return start_supervisor(sp, pid);
}
