/*
 * The in-guest agent of the qemu runtime (issue 16): PID 1 of every microVM.
 *
 * Boot: loads the kernel modules listed in /modules/order (virtio, ext4), mounts the
 * read-only root image (virtio-blk serial "root") and switches into it, mounts /proc, /sys,
 * /dev, cgroup2, tmpfs /run /tmp /var/tmp, the data disk (serial "data"; formatted ext4 on
 * first boot) at /home/agent, brings up lo and eth0 (10.0.2.15/24, no route: slirp with
 * restrict=on forwards only the gateway's addresses), starts the relays (127.0.0.1:3128 to
 * the gateway, 127.0.0.1:9222 to the browser pool), then serves the host over the
 * virtio-serial port named "agent", /run/service/control.sock included (bridged over it).
 *
 * Frames both ways: u32 payload length (LE), u8 type, u32 id (LE), payload.
 * Host to guest: EXEC, KILL, SETTIME, SEED, PING, SYNC, SURFACE, CDATA, CCLOSE. Guest to
 * host: READY, STDOUT, STDERR, EXIT, ERROR, PONG, ACK, COPEN, CDATA_UP, CCLOSE_UP.
 *
 * A command runs as uid 1000 with no capabilities and no_new_privs, in a new session and a
 * cgroup of its own (/sys/fs/cgroup/x<id>), so KILL ends its whole tree.
 *
 * Built static by hosts/drivers/qemu-image.ts (gcc -static -O2); no libraries in the guest.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <linux/random.h>
#include <net/if.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/reboot.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

enum {
  M_EXEC = 1, M_KILL = 2, M_SETTIME = 3, M_SEED = 4, M_PING = 5, M_SYNC = 6, M_SURFACE = 7, M_CDATA = 8, M_CCLOSE = 9,
  M_READY = 64, M_STDOUT = 65, M_STDERR = 66, M_EXIT = 67, M_ERROR = 68, M_PONG = 69, M_ACK = 70,
  M_COPEN = 71, M_CDATA_UP = 72, M_CCLOSE_UP = 73,
};

#define AGENT_UID 1000
#define MAX_JOBS 64
#define MAX_FRAME (64u * 1024 * 1024)

static int port = -1;

static void logf_(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void logf_(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, "gw-agent: ");
  vfprintf(stderr, fmt, ap);
  fprintf(stderr, "\n");
  va_end(ap);
}

static void die(const char *what) {
  logf_("fatal: %s: %s", what, strerror(errno));
  sync();
  reboot(RB_POWER_OFF);
  _exit(1);
}

/* ------------------------------------------------------------------ boot */

static int load_modules(void) {
  FILE *f = fopen("/modules/order", "r");
  if (!f) return 0;
  char line[256];
  while (fgets(line, sizeof line, f)) {
    line[strcspn(line, "\n")] = 0;
    if (!line[0]) continue;
    char path[300];
    snprintf(path, sizeof path, "/modules/%s", line);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) { logf_("module %s: %s", line, strerror(errno)); continue; }
    if (syscall(SYS_finit_module, fd, "", 0) != 0 && errno != EEXIST) logf_("module %s: %s", line, strerror(errno));
    close(fd);
  }
  fclose(f);
  return 0;
}

/* The virtio block device whose serial is `want` (vda, vdb, ...), as /dev/<name>. */
static int find_disk(const char *want, char *out, size_t n) {
  for (int tries = 0; tries < 200; tries++) {
    DIR *d = opendir("/sys/block");
    if (d) {
      struct dirent *e;
      while ((e = readdir(d))) {
        if (strncmp(e->d_name, "vd", 2) != 0) continue;
        char p[300], s[64] = {0};
        snprintf(p, sizeof p, "/sys/block/%s/serial", e->d_name);
        int fd = open(p, O_RDONLY);
        if (fd < 0) continue;
        ssize_t r = read(fd, s, sizeof s - 1);
        close(fd);
        if (r > 0) {
          s[strcspn(s, "\n")] = 0;
          if (strcmp(s, want) == 0) {
            snprintf(out, n, "/dev/%s", e->d_name);
            closedir(d);
            return 0;
          }
        }
      }
      closedir(d);
    }
    usleep(10000);
  }
  return -1;
}

static int has_ext4(const char *dev) {
  int fd = open(dev, O_RDONLY);
  if (fd < 0) return 0;
  unsigned char m[2] = {0};
  int ok = pread(fd, m, 2, 1080) == 2 && m[0] == 0x53 && m[1] == 0xEF;
  close(fd);
  return ok;
}

static int run_wait(char *const argv[]) {
  pid_t p = fork();
  if (p == 0) {
    execv(argv[0], argv);
    _exit(127);
  }
  int st = 0;
  while (waitpid(p, &st, 0) < 0 && errno == EINTR) {}
  return WIFEXITED(st) ? WEXITSTATUS(st) : 128;
}

static void ifup(const char *name, const char *addr, const char *mask) {
  int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  struct ifreq ifr;
  memset(&ifr, 0, sizeof ifr);
  strncpy(ifr.ifr_name, name, IFNAMSIZ - 1);
  if (addr) {
    struct sockaddr_in *sin = (struct sockaddr_in *)&ifr.ifr_addr;
    sin->sin_family = AF_INET;
    inet_pton(AF_INET, addr, &sin->sin_addr);
    if (ioctl(s, SIOCSIFADDR, &ifr) != 0) logf_("%s address: %s", name, strerror(errno));
    inet_pton(AF_INET, mask, &sin->sin_addr);
    if (ioctl(s, SIOCSIFNETMASK, &ifr) != 0) logf_("%s mask: %s", name, strerror(errno));
  }
  if (ioctl(s, SIOCGIFFLAGS, &ifr) == 0) {
    ifr.ifr_flags |= IFF_UP | IFF_RUNNING;
    if (ioctl(s, SIOCSIFFLAGS, &ifr) != 0) logf_("%s up: %s", name, strerror(errno));
  } else logf_("%s: %s", name, strerror(errno));
  close(s);
}

static void boot(void) {
  mkdir("/dev", 0755);
  mkdir("/proc", 0555);
  mkdir("/sys", 0555);
  if (mount("devtmpfs", "/dev", "devtmpfs", MS_NOSUID, "mode=0755") != 0 && errno != EBUSY) die("mount /dev");
  if (mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) != 0) die("mount /proc");
  if (mount("sysfs", "/sys", "sysfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) != 0) die("mount /sys");
  int con = open("/dev/console", O_RDWR | O_CLOEXEC);
  if (con >= 0) { dup2(con, 1); dup2(con, 2); }
  load_modules();

  char root[64], data[64];
  if (find_disk("root", root, sizeof root) != 0) die("no root disk");
  mkdir("/newroot", 0755);
  if (mount(root, "/newroot", "ext4", MS_RDONLY | MS_NODEV, "noload") != 0) die("mount root image");
  const char *moves[] = {"/dev", "/proc", "/sys"};
  for (int i = 0; i < 3; i++) {
    char to[64];
    snprintf(to, sizeof to, "/newroot%s", moves[i]);
    if (mount(moves[i], to, NULL, MS_MOVE, NULL) != 0) die("move mount");
  }
  if (chdir("/newroot") != 0) die("chdir newroot");
  if (mount(".", "/", NULL, MS_MOVE, NULL) != 0) die("switch root");
  if (chroot(".") != 0) die("chroot");
  if (chdir("/") != 0) die("chdir /");

  mount("tmpfs", "/run", "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755");
  mount("tmpfs", "/tmp", "tmpfs", MS_NOSUID | MS_NODEV, "mode=1777");
  mount("tmpfs", "/var/tmp", "tmpfs", MS_NOSUID | MS_NODEV, "mode=1777");
  mount("cgroup2", "/sys/fs/cgroup", "cgroup2", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL);
  mkdir("/dev/pts", 0755);
  mount("devpts", "/dev/pts", "devpts", MS_NOSUID | MS_NOEXEC, "mode=0620,ptmxmode=0666");
  mkdir("/dev/shm", 01777);
  mount("tmpfs", "/dev/shm", "tmpfs", MS_NOSUID | MS_NODEV, "mode=1777");
  /* Let child cgroups use the controllers (memory, pids, cpu) the kernel offers. */
  int sc = open("/sys/fs/cgroup/cgroup.subtree_control", O_WRONLY);
  if (sc >= 0) { (void)!write(sc, "+memory +pids +cpu", 18); close(sc); }
  mkdir("/run/service", 0755);
  mkdir("/run/service/files", 0755);
  mkdir("/run/service/connections", 0755);

  if (find_disk("data", data, sizeof data) != 0) die("no data disk");
  int fresh = !has_ext4(data);
  if (fresh) {
    char *mk[] = {"/usr/sbin/mke2fs", "-q", "-F", "-t", "ext4", "-E", "root_owner=1000:1000", "-L", "agent-data", data, NULL};
    if (run_wait(mk) != 0) die("format the data disk");
  }
  if (mount(data, "/home/agent", "ext4", MS_NOSUID | MS_NODEV | MS_NOATIME, NULL) != 0) die("mount data disk");
  /* The agent's disk starts empty, as the process runtime's does (fsck makes lost+found when it needs one). */
  if (fresh) rmdir("/home/agent/lost+found");
  if (chown("/home/agent", AGENT_UID, AGENT_UID) != 0) logf_("chown /home/agent: %s", strerror(errno));

  sethostname("env", 3);
  ifup("lo", "127.0.0.1", "255.0.0.0");
  ifup("eth0", "10.0.2.15", "255.255.255.0");
}

/* ------------------------------------------------------------------ relays */

struct relay { pid_t pid; const char *argv[8]; };
static struct relay relays[] = {
  {0, {"/usr/bin/socat", "TCP-LISTEN:3128,bind=127.0.0.1,fork,reuseaddr", "TCP:10.0.2.100:3128", NULL}},
  {0, {"/usr/bin/socat", "TCP-LISTEN:9222,bind=127.0.0.1,fork,reuseaddr", "TCP:10.0.2.100:9222", NULL}},
};
#define NRELAYS (sizeof relays / sizeof relays[0])

static void spawn_relay(struct relay *r, int delay) {
  pid_t p = fork();
  if (p == 0) {
    sigset_t all;
    sigfillset(&all);
    sigprocmask(SIG_UNBLOCK, &all, NULL);
    if (delay) usleep(200000);
    int fd = open("/proc/self/oom_score_adj", O_WRONLY);
    if (fd >= 0) { (void)!write(fd, "-1000", 5); close(fd); }
    int nul = open("/dev/null", O_RDWR);
    dup2(nul, 0); dup2(nul, 1);
    execv(r->argv[0], (char *const *)r->argv);
    _exit(127);
  }
  r->pid = p;
}

/* ------------------------------------------------------------------ framing */

static void write_all(const void *buf, size_t n) {
  const char *p = buf;
  while (n > 0) {
    ssize_t w = write(port, p, n);
    if (w < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN) {
        struct pollfd pf = {port, POLLOUT, 0};
        poll(&pf, 1, 100);
        continue;
      }
      return; /* the host is gone: what it missed, it will not ask for again */
    }
    p += w;
    n -= (size_t)w;
  }
}

static void send_frame(uint8_t type, uint32_t id, const void *payload, uint32_t len) {
  unsigned char h[9];
  memcpy(h, &len, 4);
  h[4] = type;
  memcpy(h + 5, &id, 4);
  write_all(h, 9);
  if (len) write_all(payload, len);
}

static void send_error(uint32_t id, const char *kind) { send_frame(M_ERROR, id, kind, (uint32_t)strlen(kind)); }

/* ------------------------------------------------------------------ jobs */

struct job {
  int used;
  uint32_t id;
  pid_t pid;
  int out, err;
  int exited;
  int status;
  char cg[64];
};
static struct job jobs[MAX_JOBS];

static struct job *job_by_id(uint32_t id) {
  for (int i = 0; i < MAX_JOBS; i++) if (jobs[i].used && jobs[i].id == id) return &jobs[i];
  return NULL;
}

static void write_str(const char *path, const char *s) {
  int fd = open(path, O_WRONLY | O_CLOEXEC);
  if (fd < 0) return;
  (void)!write(fd, s, strlen(s));
  close(fd);
}

static void kill_job(struct job *j) {
  char p[96];
  snprintf(p, sizeof p, "%s/cgroup.kill", j->cg);
  write_str(p, "1");
  if (j->pid > 0) kill(-j->pid, SIGKILL);
}

static void finish_if_done(struct job *j) {
  if (!j->exited || j->out >= 0 || j->err >= 0) return;
  int32_t r[2];
  r[0] = WIFEXITED(j->status) ? WEXITSTATUS(j->status) : -1;
  r[1] = WIFSIGNALED(j->status) ? WTERMSIG(j->status) : 0;
  send_frame(M_EXIT, j->id, r, sizeof r);
  rmdir(j->cg); /* fails while a process started by the command lives on: it stays there */
  j->used = 0;
}

/*
 * EXEC payload: u32 stdin length, stdin bytes, then NUL-terminated strings: the cwd, then
 * "a<arg>" for each argument and "e<NAME=value>" for each variable.
 */
static void start_job(uint32_t id, const unsigned char *in, uint32_t in_len, const char *cwd, char **argv, char **envp);

static void do_exec(uint32_t id, const unsigned char *p, uint32_t len) {
  if (len < 4) return send_error(id, "bad");
  uint32_t in_len;
  memcpy(&in_len, p, 4);
  if (in_len > len - 4) return send_error(id, "bad");
  const unsigned char *in = p + 4;
  const char *s = (const char *)(in + in_len), *end = (const char *)(p + len);
  if (end > s && end[-1] != 0) return send_error(id, "bad");
  size_t nstr = 0;
  for (const char *q = s; q < end; q += strlen(q) + 1) nstr++;
  /* As many slots as strings: every argument and variable is passed, none dropped. */
  char **argv = calloc(nstr + 1, sizeof *argv), **envp = calloc(nstr + 1, sizeof *envp);
  if (!argv || !envp) { free(argv); free(envp); return send_error(id, "failed"); }
  int argc = 0, envc = 0;
  const char *cwd = NULL;
  for (const char *q = s; q < end; q += strlen(q) + 1) {
    if (!cwd) cwd = q;
    else if (q[0] == 'a') argv[argc++] = (char *)q + 1;
    else if (q[0] == 'e') envp[envc++] = (char *)q + 1;
  }
  argv[argc] = NULL;
  envp[envc] = NULL;
  if (!cwd || argc == 0) { free(argv); free(envp); return send_error(id, "bad"); }
  start_job(id, in, in_len, cwd, argv, envp);
  free(argv);
  free(envp);
}

static void start_job(uint32_t id, const unsigned char *in, uint32_t in_len, const char *cwd, char **argv, char **envp) {
  struct job *j = NULL;
  for (int i = 0; i < MAX_JOBS; i++) if (!jobs[i].used) { j = &jobs[i]; break; }
  if (!j) { send_error(id, "busy"); return; }

  int stdin_fd = memfd_create("stdin", MFD_CLOEXEC);
  if (stdin_fd < 0 || write(stdin_fd, in, in_len) != (ssize_t)in_len || lseek(stdin_fd, 0, SEEK_SET) != 0) {
    if (stdin_fd >= 0) close(stdin_fd);
    send_error(id, "failed");
    return;
  }
  int o[2], e[2], ep[2];
  if (pipe2(o, O_CLOEXEC) || pipe2(e, O_CLOEXEC) || pipe2(ep, O_CLOEXEC)) { close(stdin_fd); { send_error(id, "failed"); return; } }
  snprintf(j->cg, sizeof j->cg, "/sys/fs/cgroup/x%u", id);
  mkdir(j->cg, 0755);

  pid_t pid = fork();
  if (pid == 0) {
    sigset_t all;
    sigfillset(&all);
    sigprocmask(SIG_UNBLOCK, &all, NULL);
    for (int sig = 1; sig < NSIG; sig++) signal(sig, SIG_DFL);
    setsid();
    char procs[96];
    snprintf(procs, sizeof procs, "%s/cgroup.procs", j->cg);
    write_str(procs, "0");
    dup2(stdin_fd, 0);
    dup2(o[1], 1);
    dup2(e[1], 2);
    char kind = 0;
    if (chdir(cwd) != 0) kind = 'c';
    else if (setgroups(0, NULL) || setgid(AGENT_UID) || setuid(AGENT_UID) || prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)) kind = 'x';
    if (!kind) {
      environ = envp;
      execvp(argv[0], argv);
      kind = (errno == ENOENT || errno == ENOTDIR) ? 'n' : 'x';
    }
    (void)!write(ep[1], &kind, 1);
    _exit(kind == 'n' ? 127 : 126);
  }
  close(stdin_fd);
  close(o[1]);
  close(e[1]);
  close(ep[1]);
  if (pid < 0) {
    close(o[0]); close(e[0]); close(ep[0]);
    rmdir(j->cg);
    send_error(id, "failed");
    return;
  }
  char kind = 0;
  ssize_t r;
  while ((r = read(ep[0], &kind, 1)) < 0 && errno == EINTR) {}
  close(ep[0]);
  if (r == 1) {
    /* Nothing of the command ran: say why; the child is reaped by the SIGCHLD loop. */
    close(o[0]);
    close(e[0]);
    rmdir(j->cg);
    send_error(id, kind == 'n' ? "notfound" : kind == 'c' ? "cwd" : "failed");
    return;
  }
  fcntl(o[0], F_SETFL, O_NONBLOCK);
  fcntl(e[0], F_SETFL, O_NONBLOCK);
  j->used = 1;
  j->id = id;
  j->pid = pid;
  j->out = o[0];
  j->err = e[0];
  j->exited = 0;
  j->status = 0;
}

/* ------------------------------------------------------------------ control socket */

/*
 * /run/service/control.sock is served here and bridged over the agent's port: each
 * connection gets an id; its bytes go up as CDATA_UP frames, the host's answer comes down
 * as CDATA, either side ends it with a CCLOSE frame.
 */
#define MAX_CONNS 64
static int control_fd = -1;
static int conns[MAX_CONNS];
static uint32_t conn_ids[MAX_CONNS];
static uint32_t next_conn = 1;

static void control_listen(void) {
  for (int i = 0; i < MAX_CONNS; i++) conns[i] = -1;
  control_fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  struct sockaddr_un a;
  memset(&a, 0, sizeof a);
  a.sun_family = AF_UNIX;
  strcpy(a.sun_path, "/run/service/control.sock");
  unlink(a.sun_path);
  if (control_fd < 0 || bind(control_fd, (struct sockaddr *)&a, sizeof a) != 0 || listen(control_fd, 64) != 0) {
    logf_("control.sock: %s", strerror(errno));
    return;
  }
  chmod(a.sun_path, 0666);
}

static void control_accept(void) {
  int c;
  while ((c = accept4(control_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC)) >= 0) {
    int slot = -1;
    for (int i = 0; i < MAX_CONNS; i++) if (conns[i] < 0) { slot = i; break; }
    if (slot < 0) { close(c); continue; }
    conns[slot] = c;
    conn_ids[slot] = next_conn++;
    send_frame(M_COPEN, conn_ids[slot], NULL, 0);
  }
}

static int conn_slot(uint32_t id) {
  for (int i = 0; i < MAX_CONNS; i++) if (conns[i] >= 0 && conn_ids[i] == id) return i;
  return -1;
}

static void conn_close(int slot, int tell) {
  if (tell) send_frame(M_CCLOSE_UP, conn_ids[slot], NULL, 0);
  close(conns[slot]);
  conns[slot] = -1;
}

/* The host's bytes for a connection; a client that does not read them within 5 s is dropped. */
static void conn_write(uint32_t id, const unsigned char *p, uint32_t len) {
  int slot = conn_slot(id);
  if (slot < 0) return;
  while (len > 0) {
    ssize_t w = write(conns[slot], p, len);
    if (w > 0) { p += w; len -= (uint32_t)w; continue; }
    if (w < 0 && errno == EINTR) continue;
    if (w < 0 && errno == EAGAIN) {
      struct pollfd pf = {conns[slot], POLLOUT, 0};
      if (poll(&pf, 1, 5000) > 0) continue;
    }
    conn_close(slot, 1);
    return;
  }
}

/* ------------------------------------------------------------------ surface */

static int safe_name(const char *n) {
  if (!*n || strchr(n, '/') || strcmp(n, ".") == 0 || strcmp(n, "..") == 0) return 0;
  return 1;
}

/*
 * SURFACE payload: entries of NUL-terminated name, u32 length, bytes. Names: `env`,
 * `ca.pem`, `files/<n>`, `connections/<n>`. Each file is replaced atomically (a reader sees
 * the old or the new one); files and connections not listed are removed.
 */
static void do_surface(uint32_t id, const unsigned char *p, uint32_t len) {
  const unsigned char *end = p + len;
  char keep[2][256][256];
  int nkeep[2] = {0, 0};
  while (p < end) {
    const char *name = (const char *)p;
    size_t nl = strnlen(name, (size_t)(end - p));
    if (p + nl + 5 > end) break;
    uint32_t dl;
    memcpy(&dl, p + nl + 1, 4);
    const unsigned char *data = p + nl + 5;
    if (data + dl > end) break;
    p = data + dl;
    int sub = -1;
    const char *leaf = name;
    if (strncmp(name, "files/", 6) == 0) { sub = 0; leaf = name + 6; }
    else if (strncmp(name, "connections/", 12) == 0) { sub = 1; leaf = name + 12; }
    else if (strcmp(name, "env") != 0 && strcmp(name, "ca.pem") != 0) continue;
    if (!safe_name(leaf) || strlen(leaf) > 200) continue;
    if (sub >= 0 && nkeep[sub] < 256) snprintf(keep[sub][nkeep[sub]++], 256, "%s", leaf);
    char path[320], tmp[340];
    snprintf(path, sizeof path, "/run/service/%s", name);
    snprintf(tmp, sizeof tmp, "/run/service/.%s.tmp", sub < 0 ? name : leaf);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0) continue;
    (void)!write(fd, data, dl);
    fchmod(fd, sub < 0 ? 0644 : 0444);
    close(fd);
    rename(tmp, path);
  }
  const char *dirs[2] = {"/run/service/files", "/run/service/connections"};
  for (int s = 0; s < 2; s++) {
    DIR *d = opendir(dirs[s]);
    if (!d) continue;
    struct dirent *e;
    while ((e = readdir(d))) {
      if (e->d_name[0] == '.') continue;
      int listed = 0;
      for (int k = 0; k < nkeep[s]; k++) if (strcmp(keep[s][k], e->d_name) == 0) listed = 1;
      if (!listed) {
        char path[320];
        snprintf(path, sizeof path, "%s/%s", dirs[s], e->d_name);
        unlink(path);
      }
    }
    closedir(d);
  }
  send_frame(M_ACK, id, NULL, 0);
}

/* ------------------------------------------------------------------ clock, randomness */

static void do_settime(uint32_t id, const unsigned char *p, uint32_t len) {
  if (len >= 12) {
    int64_t sec;
    uint32_t nsec;
    memcpy(&sec, p, 8);
    memcpy(&nsec, p + 8, 4);
    struct timespec ts = {.tv_sec = sec, .tv_nsec = nsec};
    if (clock_settime(CLOCK_REALTIME, &ts) != 0) logf_("settime: %s", strerror(errno));
  }
  send_frame(M_ACK, id, NULL, 0);
}

/* Mixes host randomness into the pool and forces a reseed: two restores of one snapshot diverge. */
static void do_seed(uint32_t id, const unsigned char *p, uint32_t len) {
  if (len > 0 && len <= 512) {
    struct { int count; int size; unsigned char buf[512]; } e;
    e.count = (int)len * 8;
    e.size = (int)len;
    memcpy(e.buf, p, len);
    int fd = open("/dev/urandom", O_WRONLY | O_CLOEXEC);
    if (fd >= 0) {
      if (ioctl(fd, RNDADDENTROPY, &e) != 0) logf_("seed: %s", strerror(errno));
      if (ioctl(fd, RNDRESEEDCRNG) != 0) logf_("reseed: %s", strerror(errno));
      close(fd);
    }
  }
  send_frame(M_ACK, id, NULL, 0);
}

/* ------------------------------------------------------------------ main loop */

static int open_port(void) {
  for (int tries = 0; tries < 500; tries++) {
    DIR *d = opendir("/sys/class/virtio-ports");
    if (d) {
      struct dirent *e;
      while ((e = readdir(d))) {
        if (e->d_name[0] == '.') continue;
        char p[300], n[64] = {0};
        snprintf(p, sizeof p, "/sys/class/virtio-ports/%s/name", e->d_name);
        int fd = open(p, O_RDONLY);
        if (fd < 0) continue;
        ssize_t r = read(fd, n, sizeof n - 1);
        close(fd);
        if (r > 0 && strncmp(n, "agent", 5) == 0) {
          char dev[300];
          snprintf(dev, sizeof dev, "/dev/%s", e->d_name);
          closedir(d);
          return open(dev, O_RDWR | O_NONBLOCK | O_CLOEXEC);
        }
      }
      closedir(d);
    }
    usleep(10000);
  }
  return -1;
}

static unsigned char *inbuf;
static size_t inlen, incap;

static void handle(uint8_t type, uint32_t id, const unsigned char *p, uint32_t len) {
  switch (type) {
    case M_EXEC: do_exec(id, p, len); break;
    case M_KILL: { struct job *j = job_by_id(id); if (j) kill_job(j); break; }
    case M_SETTIME: do_settime(id, p, len); break;
    case M_SEED: do_seed(id, p, len); break;
    case M_PING: send_frame(M_PONG, id, NULL, 0); break;
    case M_SYNC: sync(); send_frame(M_ACK, id, NULL, 0); break;
    case M_SURFACE: do_surface(id, p, len); break;
    case M_CDATA: conn_write(id, p, len); break;
    case M_CCLOSE: { int slot = conn_slot(id); if (slot >= 0) conn_close(slot, 0); break; }
    default: break;
  }
}

static void read_port(void) {
  for (;;) {
    if (incap - inlen < 65536) {
      incap = incap ? incap * 2 : 1 << 20;
      inbuf = realloc(inbuf, incap);
      if (!inbuf) die("memory");
    }
    ssize_t r = read(port, inbuf + inlen, incap - inlen);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) {
      /* 0: the host is not connected (suspended, or between connections); wait for it. */
      if (r == 0) usleep(20000);
      break;
    }
    inlen += (size_t)r;
  }
  size_t off = 0;
  while (inlen - off >= 9) {
    uint32_t len, id;
    memcpy(&len, inbuf + off, 4);
    if (len > MAX_FRAME) { inlen = off = 0; break; }
    if (inlen - off < 9 + (size_t)len) break;
    uint8_t type = inbuf[off + 4];
    memcpy(&id, inbuf + off + 5, 4);
    handle(type, id, inbuf + off + 9, len);
    off += 9 + len;
  }
  memmove(inbuf, inbuf + off, inlen - off);
  inlen -= off;
}

int main(void) {
  if (getpid() != 1) {
    fprintf(stderr, "gw-agent runs as PID 1 of a microVM\n");
    return 2;
  }
  sigset_t mask;
  sigemptyset(&mask);
  sigaddset(&mask, SIGCHLD);
  sigprocmask(SIG_BLOCK, &mask, NULL);
  signal(SIGPIPE, SIG_IGN);
  int sfd = signalfd(-1, &mask, SFD_NONBLOCK | SFD_CLOEXEC);
  boot();
  for (size_t i = 0; i < NRELAYS; i++) spawn_relay(&relays[i], 0);
  control_listen();
  port = open_port();
  if (port < 0) die("no agent port");
  send_frame(M_READY, 0, NULL, 0);

  struct pollfd pf[3 + 2 * MAX_JOBS + MAX_CONNS];
  struct job *owner[3 + 2 * MAX_JOBS + MAX_CONNS];
  int conn_of[3 + 2 * MAX_JOBS + MAX_CONNS];
  unsigned char chunk[65536];
  for (;;) {
    int n = 0;
    pf[n].fd = port; pf[n].events = POLLIN; conn_of[n] = -1; owner[n++] = NULL;
    pf[n].fd = sfd; pf[n].events = POLLIN; conn_of[n] = -1; owner[n++] = NULL;
    pf[n].fd = control_fd; pf[n].events = POLLIN; conn_of[n] = -1; owner[n++] = NULL;
    for (int i = 0; i < MAX_CONNS; i++) {
      if (conns[i] >= 0) { pf[n].fd = conns[i]; pf[n].events = POLLIN; conn_of[n] = i; owner[n++] = NULL; }
    }
    for (int i = 0; i < MAX_JOBS; i++) {
      if (!jobs[i].used) continue;
      if (jobs[i].out >= 0) { pf[n].fd = jobs[i].out; pf[n].events = POLLIN; conn_of[n] = -1; owner[n++] = &jobs[i]; }
      if (jobs[i].err >= 0) { pf[n].fd = jobs[i].err; pf[n].events = POLLIN; conn_of[n] = -1; owner[n++] = &jobs[i]; }
    }
    int r = poll(pf, (nfds_t)n, 1000);
    if (r < 0) continue;
    if (pf[0].revents & (POLLIN | POLLHUP | POLLERR)) read_port();
    if (pf[1].revents & POLLIN) {
      struct signalfd_siginfo si;
      while (read(sfd, &si, sizeof si) > 0) {}
    }
    if (pf[2].revents & POLLIN) control_accept();
    for (int k = 3; k < n; k++) {
      if (!pf[k].revents) continue;
      if (conn_of[k] >= 0) {
        int slot = conn_of[k];
        if (conns[slot] != pf[k].fd) continue; /* closed meanwhile */
        ssize_t got = read(pf[k].fd, chunk, sizeof chunk);
        if (got > 0) send_frame(M_CDATA_UP, conn_ids[slot], chunk, (uint32_t)got);
        else if (got == 0 || (errno != EAGAIN && errno != EINTR)) conn_close(slot, 1);
        continue;
      }
      struct job *j = owner[k];
      int is_out = pf[k].fd == j->out;
      ssize_t got = read(pf[k].fd, chunk, sizeof chunk);
      if (got > 0) send_frame(is_out ? M_STDOUT : M_STDERR, j->id, chunk, (uint32_t)got);
      else if (got == 0 || (errno != EAGAIN && errno != EINTR)) {
        close(pf[k].fd);
        if (is_out) j->out = -1; else j->err = -1;
        finish_if_done(j);
      }
    }
    /* Reap everything (PID 1 adopts every orphan); note the jobs' and relays' ends. */
    int st;
    pid_t p;
    while ((p = waitpid(-1, &st, WNOHANG)) > 0) {
      for (int i = 0; i < MAX_JOBS; i++) {
        if (jobs[i].used && jobs[i].pid == p) {
          jobs[i].exited = 1;
          jobs[i].status = st;
          finish_if_done(&jobs[i]);
        }
      }
      for (size_t i = 0; i < NRELAYS; i++) if (relays[i].pid == p) spawn_relay(&relays[i], 1);
    }
  }
}
