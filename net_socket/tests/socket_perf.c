/* strand-socket benchmark against a raw-TCP reference (a benchmark, never a timed test).
 *
 *   socket_perf PLUGIN.so [--sizes 4M,64M] [--window 8] [--streams N] [--seconds S]
 *
 * Two processes (fork), like two ranks: one sends, one receives; each drives its side from one
 * thread that spins in test(), as NCCL's proxy does.
 *   bw    unidirectional bandwidth, `window` messages in flight;
 *   lat   8-byte ping-pong, half round trip.
 * Reference, same message sizes, window and stream count (N = the plugin's data streams, read
 * from STRAND_SOCKET_NSTREAMS or the plugin's automatic choice printed at INFO): each message is
 * cut into N equal parts, one blocking thread per TCP connection on each side; latency over one
 * connection with blocking send/recv. No headers, no matching, no copies beyond the kernel's. */
#include <arpa/inet.h>
#include <dlfcn.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "strand/abi/abi.h"

static strand_net_v11_t *net;
static void *ctx;
static size_t sizes[16];
static int nsizes, window = 8, streams = 2;
static double seconds = 1.0;

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}
static void die(const char *m) {
  fprintf(stderr, "socket_perf: %s\n", m);
  exit(1);
}
static void xwrite(int fd, const void *p, size_t n) {
  if (write(fd, p, n) != (ssize_t)n) die("pipe write");
}
static void xread(int fd, void *p, size_t n) {
  size_t got = 0;
  while (got < n) {
    ssize_t r = read(fd, (char *)p + got, n - got);
    if (r <= 0) die("pipe read");
    got += (size_t)r;
  }
}

/* ---- plugin side ---- */
static void plugin_load(const char *so) {
  void *lib = dlopen(so, RTLD_NOW | RTLD_LOCAL);
  if (!lib) die(dlerror());
  net = dlsym(lib, "ncclNetPlugin_v11");
  if (!net || net->init(&ctx, 7, NULL, NULL, NULL) != STRAND_SUCCESS) die("plugin init");
}
/* The receiver of a connection listens; the handle travels over a pipe. */
static void *p_accept(int to_peer) {
  char h[STRAND_NET_HANDLE_MAXSIZE];
  void *lc = NULL, *rc = NULL;
  if (net->listen(ctx, 0, h, &lc)) die("listen");
  xwrite(to_peer, h, sizeof h);
  while (!rc)
    if (net->accept(lc, &rc, NULL)) die("accept");
  net->closeListen(lc);
  return rc;
}
static void *p_connect(int from_peer) {
  char h[STRAND_NET_HANDLE_MAXSIZE];
  void *sc = NULL;
  xread(from_peer, h, sizeof h);
  while (!sc)
    if (net->connect(ctx, 0, h, &sc, NULL)) die("connect");
  return sc;
}
static void p_wait(void *req) {
  int done = 0;
  while (!done)
    if (net->test(req, &done, NULL)) die("test failed");
}

/* Moves `count` messages of `size` with `window` in flight; returns seconds. */
static double p_stream(void *comm, int is_send, char *buf, size_t size, int count) {
  void *reqs[64] = {0};
  int posted = 0, done = 0, tag = 0;
  double t0 = now_s();
  while (done < count) {
    while (posted < count && posted - done < window) {
      void **r = &reqs[posted % window];
      char *b = buf + (size_t)(posted % window) * size;
      void *d = b;
      size_t sz = size;
      *r = NULL;
      if (is_send) {
        if (net->isend(comm, b, size, 0, NULL, NULL, r)) die("isend");
      } else if (net->irecv(comm, 1, &d, &sz, &tag, NULL, NULL, r)) {
        die("irecv");
      }
      if (!*r) break;
      posted++;
    }
    int fin = 0;
    void *r = reqs[done % window];
    if (r && net->test(r, &fin, NULL)) die("test");
    if (fin) done++;
  }
  return now_s() - t0;
}

/* ---- raw TCP reference ---- */
static int tcp_listen(int *port) {
  int fd = socket(AF_INET, SOCK_STREAM, 0), one = 1;
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (bind(fd, (struct sockaddr *)&a, sizeof a) || listen(fd, 64)) die("tcp listen");
  socklen_t l = sizeof a;
  getsockname(fd, (struct sockaddr *)&a, &l);
  *port = ntohs(a.sin_port);
  return fd;
}
static int tcp_connect(int port) {
  int fd = socket(AF_INET, SOCK_STREAM, 0), one = 1;
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port),
                          .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  if (connect(fd, (struct sockaddr *)&a, sizeof a)) die("tcp connect");
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  return fd;
}
static int tcp_accept(int lfd) {
  int fd = accept(lfd, NULL, NULL), one = 1;
  if (fd < 0) die("tcp accept");
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  return fd;
}
typedef struct {
  int fd, is_send, count;
  char *buf;
  size_t part;
} tcp_job_t;
static void *tcp_worker(void *arg) {
  tcp_job_t *j = arg;
  for (int m = 0; m < j->count; m++) {
    size_t off = 0;
    while (off < j->part) {
      ssize_t n = j->is_send ? send(j->fd, j->buf + off, j->part - off, MSG_NOSIGNAL)
                             : recv(j->fd, j->buf + off, j->part - off, 0);
      if (n <= 0) die("tcp io");
      off += (size_t)n;
    }
  }
  return NULL;
}
static double tcp_stream(int *fds, int is_send, char *buf, size_t size, int count) {
  pthread_t th[64];
  tcp_job_t jobs[64];
  double t0 = now_s();
  for (int s = 0; s < streams; s++) {
    jobs[s] = (tcp_job_t){fds[s], is_send, count, buf + (size_t)s * (size / (size_t)streams),
                          size / (size_t)streams};
    pthread_create(&th[s], NULL, tcp_worker, &jobs[s]);
  }
  for (int s = 0; s < streams; s++) pthread_join(th[s], NULL);
  return now_s() - t0;
}

static int count_for(size_t size) {
  int c = (int)(seconds * 2e9 / (double)size); /* ~2 GB/s guess, adjusted by the first run */
  return c < 4 ? 4 : c > 200000 ? 200000 : c;
}

/* side 0 = sender of the bandwidth test, side 1 = receiver. */
static void run_side(int side, const char *so, int rd, int wr) {
  size_t maxs = 0;
  for (int i = 0; i < nsizes; i++) maxs = sizes[i] > maxs ? sizes[i] : maxs;
  char *buf = malloc(maxs * (size_t)window);
  memset(buf, side, maxs * (size_t)window);
  /* raw TCP first (before the plugin's threads exist in this process) */
  int fds[64], lat_fd;
  if (side == 1) {
    int port, lfd = tcp_listen(&port);
    xwrite(wr, &port, sizeof port);
    for (int s = 0; s < streams; s++) fds[s] = tcp_accept(lfd);
    lat_fd = tcp_accept(lfd);
    close(lfd);
  } else {
    int port;
    xread(rd, &port, sizeof port);
    for (int s = 0; s < streams; s++) fds[s] = tcp_connect(port);
    lat_fd = tcp_connect(port);
  }
  double ref_bw[16], ref_lat;
  for (int i = 0; i < nsizes; i++) {
    int c = count_for(sizes[i]);
    xwrite(wr, &c, sizeof c); /* both sides agree on the count (sender's choice) */
    int cc;
    xread(rd, &cc, sizeof cc);
    if (side == 1) c = cc;
    if (side == 1) { /* receiver measures */
      double t = tcp_stream(fds, 0, buf, sizes[i], c);
      ref_bw[i] = (double)sizes[i] * c / t / 1e9;
    } else {
      tcp_stream(fds, 1, buf, sizes[i], c);
    }
  }
  int iters = (int)(seconds * 20000);
  double t0 = now_s();
  char b8[8] = {0};
  for (int i = 0; i < iters; i++) {
    if (side == 0) {
      if (send(lat_fd, b8, 8, 0) != 8 || recv(lat_fd, b8, 8, MSG_WAITALL) != 8) die("lat");
    } else {
      if (recv(lat_fd, b8, 8, MSG_WAITALL) != 8 || send(lat_fd, b8, 8, 0) != 8) die("lat");
    }
  }
  ref_lat = (now_s() - t0) / iters / 2 * 1e6;
  for (int s = 0; s < streams; s++) close(fds[s]);
  close(lat_fd);

  /* the plugin: connection side0 -> side1 (bandwidth, ping), side1 -> side0 (pong) */
  plugin_load(so);
  void *sc, *rc;
  if (side == 1) {
    rc = p_accept(wr);
    sc = p_connect(rd);
  } else {
    sc = p_connect(rd);
    rc = p_accept(wr);
  }
  double bw[16];
  for (int i = 0; i < nsizes; i++) {
    int c = count_for(sizes[i]);
    xwrite(wr, &c, sizeof c);
    int cc;
    xread(rd, &cc, sizeof cc);
    if (side == 1) c = cc;
    double t = p_stream(side == 0 ? sc : rc, side == 0, buf, sizes[i], c);
    bw[i] = (double)sizes[i] * c / t / 1e9;
  }
  t0 = now_s();
  for (int i = 0; i < iters; i++) {
    void *r = NULL, *d = b8;
    size_t sz = 8;
    int tag = 0;
    if (side == 0) {
      while (!r) net->isend(sc, b8, 8, 0, NULL, NULL, &r);
      p_wait(r);
      r = NULL;
      while (!r) net->irecv(rc, 1, &d, &sz, &tag, NULL, NULL, &r);
      p_wait(r);
    } else {
      while (!r) net->irecv(rc, 1, &d, &sz, &tag, NULL, NULL, &r);
      p_wait(r);
      r = NULL;
      while (!r) net->isend(sc, b8, 8, 0, NULL, NULL, &r);
      p_wait(r);
    }
  }
  double lat = (now_s() - t0) / iters / 2 * 1e6;
  if (side == 1) {
    printf("# socket_perf: %d data streams (reference: %d TCP connections, one thread each), "
           "window %d\n", streams, streams, window);
    printf("# %12s %14s %14s %8s\n", "size(B)", "plugin(GB/s)", "rawtcp(GB/s)", "ratio");
    for (int i = 0; i < nsizes; i++)
      printf("  %12zu %14.2f %14.2f %7.0f%%\n", sizes[i], bw[i], ref_bw[i],
             100 * bw[i] / ref_bw[i]);
    printf("# 8-byte ping-pong, half round trip: plugin %.1f us, raw TCP %.1f us (%.2fx)\n", lat,
           ref_lat, lat / ref_lat);
    fflush(stdout);
  }
  net->closeSend(sc);
  net->closeRecv(rc);
  net->finalize(ctx);
}

int main(int argc, char **argv) {
  if (argc < 2) die("usage: socket_perf PLUGIN.so [--sizes 4M,64M] [--window W] [--streams N]");
  const char *so = argv[1];
  char deflt[] = "4M,64M";
  char *list = deflt;
  const char *env = getenv("STRAND_SOCKET_NSTREAMS");
  long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
  /* the plugin's automatic choice: 2 streams when it runs without workers (<= 4 CPUs) */
  streams = env ? atoi(env) : (ncpu <= 4 ? 2 : 16);
  for (int i = 2; i < argc; i++) {
    if (!strcmp(argv[i], "--sizes") && i + 1 < argc) list = argv[++i];
    else if (!strcmp(argv[i], "--window") && i + 1 < argc) window = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--streams") && i + 1 < argc) streams = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--seconds") && i + 1 < argc) seconds = atof(argv[++i]);
    else die("unknown argument");
  }
  if (window < 1 || window > 64 || streams < 1 || streams > 64) die("bad window/streams");
  for (char *t = strtok(list, ","); t && nsizes < 16; t = strtok(NULL, ",")) {
    char *end;
    double v = strtod(t, &end);
    if (*end == 'K') v *= 1024;
    if (*end == 'M') v *= 1048576;
    sizes[nsizes++] = (size_t)v;
  }
  int a[2], b[2];
  if (pipe(a) || pipe(b)) die("pipe");
  pid_t pid = fork();
  if (pid == 0) {
    run_side(0, so, b[0], a[1]);
    _exit(0);
  }
  run_side(1, so, a[0], b[1]);
  int st;
  waitpid(pid, &st, 0);
  return WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : 1;
}
