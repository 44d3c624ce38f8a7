/* tests/e2e/mini_mpi/mpi.h — the part of MPI that NVIDIA's nccl-tests (2.19) and NCCL's own examples
 * (examples/common, built with MPI=1: tests/e2e/gin_e2e.sh procs) call, for machines
 * without an MPI: start N copies of a test with MINI_MPI_RANK=r, MINI_MPI_SIZE=N and
 * MINI_MPI_PORT=p (rank 0 listens on 127.0.0.1:p; one host only) and they behave as one MPI job of
 * N processes (tests/e2e/run_nccl_tests.sh does this). Written from the MPI standard's function
 * signatures; only what nccl-tests uses exists, and only on MPI_COMM_WORLD (MPI_Comm_split must be
 * given one colour by every process). Not a general MPI. */
#ifndef STRAND_MINI_MPI_H
#define STRAND_MINI_MPI_H

#ifdef __cplusplus
extern "C" {
#endif

typedef int MPI_Comm;
typedef int MPI_Datatype;
typedef int MPI_Op;
typedef int MPI_Info;

#define MPI_COMM_WORLD ((MPI_Comm)1)
#define MPI_IN_PLACE ((void *)1)
#define MPI_SUCCESS 0
#define MPI_INFO_NULL ((MPI_Info)0)
#define MPI_COMM_TYPE_SHARED 1
#define MPI_MAX_ERROR_STRING 64

/* Datatypes: the value is the element size's code (mini_mpi.c: type_size). */
#define MPI_DATATYPE_NULL ((MPI_Datatype)0)
#define MPI_BYTE ((MPI_Datatype)1)
#define MPI_INT ((MPI_Datatype)2)
#define MPI_LONG ((MPI_Datatype)3)
#define MPI_LONG_LONG ((MPI_Datatype)4)
#define MPI_INT64_T ((MPI_Datatype)5)
#define MPI_DOUBLE ((MPI_Datatype)6)

#define MPI_SUM ((MPI_Op)1)
#define MPI_MIN ((MPI_Op)2)
#define MPI_MAX ((MPI_Op)3)

int MPI_Init(int *argc, char ***argv);
int MPI_Finalize(void);
int MPI_Comm_size(MPI_Comm comm, int *size);
int MPI_Comm_rank(MPI_Comm comm, int *rank);
int MPI_Comm_split(MPI_Comm comm, int color, int key, MPI_Comm *newcomm);
/* One host: every process shares memory with every other, so the node's communicator is the
 * world (what NCCL's examples use to pick the local GPU: the rank in it). */
int MPI_Comm_split_type(MPI_Comm comm, int split_type, int key, MPI_Info info, MPI_Comm *newcomm);
int MPI_Comm_free(MPI_Comm *comm);
int MPI_Barrier(MPI_Comm comm);
int MPI_Bcast(void *buf, int count, MPI_Datatype type, int root, MPI_Comm comm);
int MPI_Gather(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf,
               int recvcount, MPI_Datatype recvtype, int root, MPI_Comm comm);
int MPI_Allgather(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf,
                  int recvcount, MPI_Datatype recvtype, MPI_Comm comm);
int MPI_Allreduce(const void *sendbuf, void *recvbuf, int count, MPI_Datatype type, MPI_Op op,
                  MPI_Comm comm);
int MPI_Abort(MPI_Comm comm, int code);
int MPI_Error_string(int code, char *str, int *len);

#ifdef __cplusplus
}
#endif

#endif
