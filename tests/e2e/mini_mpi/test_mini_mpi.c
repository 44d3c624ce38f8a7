/* tests/e2e/mini_mpi/test_mini_mpi.c — the stand-in MPI driven the way nccl-tests (and NCCL's
 * examples) drive it, by 3 processes: host-hash allgather in place, colour split, node split, id
 * broadcast, barrier, allreduce of long / long long / double / int64 with SUM, MIN and MAX, gather
 * of fixed-size lines to rank 0.
 *   test_mini_mpi          forks the 3 ranks itself (on a free port) and checks their exits */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include "mpi.h"

#define CHECK(c)                                                                                   \
  do {                                                                                             \
    if (!(c)) {                                                                                    \
      fprintf(stderr, "rank %d: FAIL %s:%d: %s\n", rank, __FILE__, __LINE__, #c);                  \
      return 1;                                                                                    \
    }                                                                                              \
  } while (0)

static int rank_main(void) {
  int rank = -1, size = 0;
  MPI_Init(NULL, NULL);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  CHECK(size == 3 && rank >= 0 && rank < 3);
  uint64_t hashes[3] = {0};
  hashes[rank] = 1000 + (uint64_t)rank;
  MPI_Allgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, hashes, sizeof(uint64_t), MPI_BYTE,
                MPI_COMM_WORLD);
  for (int r = 0; r < 3; r++) CHECK(hashes[r] == 1000 + (uint64_t)r);
  MPI_Comm c;
  MPI_Comm_split(MPI_COMM_WORLD, 0, rank, &c);
  int n = 0, me = -1;
  MPI_Comm_size(c, &n);
  MPI_Comm_rank(c, &me);
  CHECK(n == 3 && me == rank);
  /* NCCL's examples: the node's communicator (one host here) gives the local GPU index */
  MPI_Comm node;
  MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &node);
  MPI_Comm_rank(node, &me);
  CHECK(me == rank);
  MPI_Comm_free(&node);
  char id[128];
  memset(id, rank == 0 ? 0x5a : 0, sizeof id);
  MPI_Bcast(id, sizeof id, MPI_BYTE, 0, c);
  for (size_t i = 0; i < sizeof id; i++) CHECK(id[i] == 0x5a);
  MPI_Barrier(MPI_COMM_WORLD);
  long mem = 100 - rank;
  MPI_Allreduce(MPI_IN_PLACE, &mem, 1, MPI_LONG, MPI_MIN, MPI_COMM_WORLD);
  CHECK(mem == 98);
  long long errs = rank;
  MPI_Allreduce(MPI_IN_PLACE, &errs, 1, MPI_LONG_LONG, MPI_SUM, MPI_COMM_WORLD);
  CHECK(errs == 3);
  double t[2] = {1.5 * rank, -rank};
  MPI_Allreduce(MPI_IN_PLACE, t, 2, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  CHECK(t[0] == 3.0 && t[1] == 0.0);
  int64_t used = 7 + rank, got = 0;
  MPI_Allreduce(&used, &got, 1, MPI_INT64_T, MPI_MAX, MPI_COMM_WORLD);
  CHECK(got == 9);
  char line[16], lines[48];
  snprintf(line, sizeof line, "rank %d", rank);
  MPI_Gather(line, sizeof line, MPI_BYTE, lines, sizeof line, MPI_BYTE, 0, MPI_COMM_WORLD);
  if (rank == 0)
    for (int r = 0; r < 3; r++) {
      char want[16];
      snprintf(want, sizeof want, "rank %d", r);
      CHECK(strcmp(lines + 16 * r, want) == 0);
    }
  MPI_Comm_free(&c);
  MPI_Finalize();
  return 0;
}

/* A port nobody listens on now, below Linux's ephemeral range (32768+), so that neither another
 * test's listener nor a connection's local port holds it (a pid-derived port in 20000-39999 did,
 * now and then, under meson's parallel tests: rank 0 could not bind and the others waited). */
static int free_port(void) {
  int start = 20000 + (int)(getpid() % 12000);
  for (int i = 0; i < 12000; i++) {
    int p = 20000 + (start - 20000 + i) % 12000;
    int fd = socket(AF_INET, SOCK_STREAM, 0), one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)p)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    int ok = bind(fd, (struct sockaddr *)&a, sizeof a) == 0;
    close(fd);
    if (ok) return p;
  }
  return 20000;
}

int main(void) {
  char port[16], r[8];
  snprintf(port, sizeof port, "%d", free_port());
  setenv("MINI_MPI_PORT", port, 1);
  setenv("MINI_MPI_SIZE", "3", 1);
  pid_t pids[3];
  for (int i = 0; i < 3; i++) {
    snprintf(r, sizeof r, "%d", i);
    setenv("MINI_MPI_RANK", r, 1);
    fflush(NULL);
    pids[i] = fork();
    if (pids[i] == 0) _exit(rank_main());
  }
  int bad = 0;
  for (int i = 0; i < 3; i++) {
    int st = 0;
    waitpid(pids[i], &st, 0);
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
      fprintf(stderr, "rank %d exited with status %d\n", i, st);
      bad++;
    }
  }
  printf("%s\n", bad ? "FAIL" : "ok: 3 ranks");
  return bad ? 1 : 0;
}
