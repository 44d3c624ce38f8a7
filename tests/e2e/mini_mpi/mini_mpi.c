/* tests/e2e/mini_mpi/mini_mpi.c — a one-host stand-in for the MPI calls nccl-tests makes
 * (mpi.h says which and how to start a job). Every collective is a gather to rank 0 over TCP
 * loopback, rank 0 combining, and a broadcast back: slow, but nccl-tests only uses MPI to start
 * (exchange the NCCL id, host hashes, device lines) and to combine a few numbers per size.
 * Any failure prints one line naming the call and exits: a test without its peers cannot go on.
 *   cc -shared -fPIC -O2 -o libmpi.so mini_mpi.c */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "mpi.h"

static int rank_, size_ = 1;
static int *peer_fd;  /* rank 0: fd of each other rank; others: peer_fd[0] = rank 0 */

static void die(const char *what, const char *detail) {
  fprintf(stderr, "mini_mpi rank %d/%d: %s: %s\n", rank_, size_, what, detail);
  exit(3);
}

static void xfer(int fd, void *buf, size_t n, int sending, const char *what) {
  char *p = buf;
  while (n > 0) {
    ssize_t r = sending ? send(fd, p, n, MSG_NOSIGNAL) : recv(fd, p, n, 0);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) die(what, r == 0 ? "peer closed the connection" : strerror(errno));
    p += r;
    n -= (size_t)r;
  }
}

static size_t type_size(MPI_Datatype t) {
  switch (t) {
    case MPI_BYTE: return 1;
    case MPI_INT: return sizeof(int);
    case MPI_LONG: return sizeof(long);
    case MPI_LONG_LONG: return sizeof(long long);
    case MPI_INT64_T: return sizeof(int64_t);
    case MPI_DOUBLE: return sizeof(double);
    default: return 0;
  }
}

static int env_int(const char *name, int dflt) {
  const char *v = getenv(name);
  return v && *v ? atoi(v) : dflt;
}

int MPI_Init(int *argc, char ***argv) {
  (void)argc, (void)argv;
  rank_ = env_int("MINI_MPI_RANK", 0);
  size_ = env_int("MINI_MPI_SIZE", 1);
  int port = env_int("MINI_MPI_PORT", 0);
  if (size_ < 1 || rank_ < 0 || rank_ >= size_) die("MPI_Init", "bad MINI_MPI_RANK / MINI_MPI_SIZE");
  peer_fd = calloc((size_t)size_, sizeof *peer_fd);
  if (size_ == 1) return MPI_SUCCESS;
  if (port <= 0) die("MPI_Init", "MINI_MPI_PORT not set");
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  int one = 1;
  if (rank_ == 0) {
    int l = socket(AF_INET, SOCK_STREAM, 0);
    setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (bind(l, (struct sockaddr *)&a, sizeof a) != 0 || listen(l, size_) != 0)
      die("MPI_Init: listen on 127.0.0.1:MINI_MPI_PORT", strerror(errno));
    for (int i = 1; i < size_; i++) {
      int fd = accept(l, NULL, NULL);
      if (fd < 0) die("MPI_Init: accept", strerror(errno));
      int r = -1;
      xfer(fd, &r, sizeof r, 0, "MPI_Init: hello");
      if (r <= 0 || r >= size_ || peer_fd[r]) die("MPI_Init", "a peer sent a bad or duplicate rank");
      setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
      peer_fd[r] = fd;
    }
    close(l);
  } else {
    time_t t0 = time(NULL);
    int fd;
    for (;;) {
      fd = socket(AF_INET, SOCK_STREAM, 0);
      if (connect(fd, (struct sockaddr *)&a, sizeof a) == 0) break;
      close(fd);
      if (time(NULL) - t0 > 60) die("MPI_Init: connect to rank 0 (60 s)", strerror(errno));
      usleep(20000);
    }
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    xfer(fd, &rank_, sizeof rank_, 1, "MPI_Init: hello");
    peer_fd[0] = fd;
  }
  return MPI_SUCCESS;
}

int MPI_Finalize(void) {
  MPI_Barrier(MPI_COMM_WORLD);
  for (int i = 0; i < size_; i++)
    if (peer_fd[i] > 0) close(peer_fd[i]);
  return MPI_SUCCESS;
}

int MPI_Comm_size(MPI_Comm comm, int *size) {
  (void)comm;
  *size = size_;
  return MPI_SUCCESS;
}
int MPI_Comm_rank(MPI_Comm comm, int *rank) {
  (void)comm;
  *rank = rank_;
  return MPI_SUCCESS;
}
int MPI_Comm_split_type(MPI_Comm comm, int split_type, int key, MPI_Info info, MPI_Comm *newcomm) {
  (void)info;
  if (split_type != MPI_COMM_TYPE_SHARED) die("MPI_Comm_split_type", "only MPI_COMM_TYPE_SHARED exists here");
  return MPI_Comm_split(comm, 0, key, newcomm);
}
int MPI_Error_string(int code, char *str, int *len) {
  *len = snprintf(str, MPI_MAX_ERROR_STRING, "mini_mpi error %d", code);
  return MPI_SUCCESS;
}
int MPI_Comm_free(MPI_Comm *comm) {
  *comm = 0;
  return MPI_SUCCESS;
}
int MPI_Abort(MPI_Comm comm, int code) {
  (void)comm;
  exit(code);
}

/* Rank 0 receives n bytes from every rank into all[r * n] (its own copied from mine). */
static void gather0(const void *mine, void *all, size_t n) {
  if (rank_ == 0) {
    if (all && mine != (char *)all) memmove(all, mine, n);
    for (int r = 1; r < size_; r++) xfer(peer_fd[r], (char *)all + (size_t)r * n, n, 0, "gather");
  } else {
    xfer(peer_fd[0], (void *)mine, n, 1, "gather");
  }
}
/* Rank 0 sends n bytes of buf to every rank. */
static void bcast0(void *buf, size_t n) {
  if (rank_ == 0)
    for (int r = 1; r < size_; r++) xfer(peer_fd[r], buf, n, 1, "broadcast");
  else
    xfer(peer_fd[0], buf, n, 0, "broadcast");
}

int MPI_Barrier(MPI_Comm comm) {
  (void)comm;
  char b = 0, all[1];
  (void)all;
  if (rank_ == 0)
    for (int r = 1; r < size_; r++) xfer(peer_fd[r], &b, 1, 0, "barrier");
  else
    xfer(peer_fd[0], &b, 1, 1, "barrier");
  bcast0(&b, 1);
  return MPI_SUCCESS;
}

int MPI_Bcast(void *buf, int count, MPI_Datatype type, int root, MPI_Comm comm) {
  (void)comm;
  if (root != 0) die("MPI_Bcast", "only root 0 is supported");
  bcast0(buf, (size_t)count * type_size(type));
  return MPI_SUCCESS;
}

int MPI_Gather(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf,
               int recvcount, MPI_Datatype recvtype, int root, MPI_Comm comm) {
  (void)comm, (void)recvcount, (void)recvtype;
  if (root != 0) die("MPI_Gather", "only root 0 is supported");
  gather0(sendbuf, rank_ == 0 ? recvbuf : NULL, (size_t)sendcount * type_size(sendtype));
  return MPI_SUCCESS;
}

int MPI_Allgather(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf,
                  int recvcount, MPI_Datatype recvtype, MPI_Comm comm) {
  (void)comm;
  size_t n = (size_t)recvcount * type_size(recvtype);
  char *mine = (char *)recvbuf + (size_t)rank_ * n;
  if (sendbuf != MPI_IN_PLACE) memcpy(mine, sendbuf, (size_t)sendcount * type_size(sendtype));
  if (rank_ == 0) {
    for (int r = 1; r < size_; r++) xfer(peer_fd[r], (char *)recvbuf + (size_t)r * n, n, 0, "allgather");
  } else {
    xfer(peer_fd[0], mine, n, 1, "allgather");
  }
  bcast0(recvbuf, n * (size_t)size_);
  return MPI_SUCCESS;
}

#define COMBINE(T)                                                                                 \
  for (int i = 0; i < count; i++) {                                                                \
    T a = ((T *)acc)[i], b = ((const T *)in)[i];                                                   \
    ((T *)acc)[i] = op == MPI_SUM ? a + b : op == MPI_MIN ? (b < a ? b : a) : (b > a ? b : a);     \
  }

static void combine(void *acc, const void *in, int count, MPI_Datatype type, MPI_Op op) {
  switch (type) {
    case MPI_INT: COMBINE(int); break;
    case MPI_LONG: COMBINE(long); break;
    case MPI_LONG_LONG: COMBINE(long long); break;
    case MPI_INT64_T: COMBINE(int64_t); break;
    case MPI_DOUBLE: COMBINE(double); break;
    default: die("MPI_Allreduce", "unsupported datatype");
  }
}

int MPI_Allreduce(const void *sendbuf, void *recvbuf, int count, MPI_Datatype type, MPI_Op op,
                  MPI_Comm comm) {
  (void)comm;
  size_t n = (size_t)count * type_size(type);
  if (op != MPI_SUM && op != MPI_MIN && op != MPI_MAX) die("MPI_Allreduce", "unsupported op");
  if (sendbuf != MPI_IN_PLACE) memcpy(recvbuf, sendbuf, n);
  if (rank_ == 0) {
    char *tmp = malloc(n ? n : 1);
    if (!tmp) die("MPI_Allreduce", "out of memory");
    for (int r = 1; r < size_; r++) {
      xfer(peer_fd[r], tmp, n, 0, "allreduce");
      combine(recvbuf, tmp, count, type, op);
    }
    free(tmp);
  } else {
    xfer(peer_fd[0], recvbuf, n, 1, "allreduce");
  }
  bcast0(recvbuf, n);
  return MPI_SUCCESS;
}

int MPI_Comm_split(MPI_Comm comm, int color, int key, MPI_Comm *newcomm) {
  (void)key;
  int *colors = malloc(sizeof(int) * (size_t)size_);
  if (!colors) die("MPI_Comm_split", "out of memory");
  colors[rank_] = color;
  MPI_Allgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, colors, 1, MPI_INT, comm);
  for (int r = 0; r < size_; r++)
    if (colors[r] != color)
      die("MPI_Comm_split", "processes gave different colours (NCCL_TESTS_SPLIT is not supported)");
  free(colors);
  *newcomm = comm;
  return MPI_SUCCESS;
}
