/*
 * The MPI transport, the whole of library flashmsa_dist: nonblocking
 * MPI_Isend / MPI_Irecv to the ring neighbours, in pieces of at most 1 GiB
 * (MPI counts are int), and MPI_Allreduce.  Progress of a started exchange
 * while the rank computes is up to the MPI library (most move eager-sized
 * messages at once and larger ones at the wait).  Built on the public API
 * only (fmsa_dist_comm_create), so libflashmsa never links MPI; failures
 * return a status, and the ring names the MPI call in its message.
 */
#include <mpi.h>
#include <stdlib.h>

#include "flashmsa/flashmsa_dist.h"

enum { MPI_PIECE = 1 << 30, MPI_MAX_REQS = 64 };

typedef struct mpi_rank {
    MPI_Comm comm;
    int rank, size;
    MPI_Request req[MPI_MAX_REQS];
    int nreq;
} mpi_rank;

static fmsa_status mpi_start(void *impl, const void *send, void *recv, size_t bytes) {
    mpi_rank *me = (mpi_rank *)impl;
    const int next = (me->rank + 1) % me->size, prev = (me->rank + me->size - 1) % me->size;
    size_t off = 0;
    int tag = 0;
    me->nreq = 0;
    if ((bytes + MPI_PIECE - 1) / MPI_PIECE > MPI_MAX_REQS / 2) return FMSA_ERR_NOT_SUPPORTED;
    do {
        const int n = (int)(bytes - off < MPI_PIECE ? bytes - off : MPI_PIECE);
        if (MPI_Irecv((char *)recv + off, n, MPI_BYTE, prev, tag, me->comm,
                      &me->req[me->nreq++]) != MPI_SUCCESS ||
            MPI_Isend((const char *)send + off, n, MPI_BYTE, next, tag, me->comm,
                      &me->req[me->nreq++]) != MPI_SUCCESS)
            return FMSA_ERR_DEVICE;
        off += (size_t)n;
        ++tag;
    } while (off < bytes);
    return FMSA_SUCCESS;
}

static fmsa_status mpi_wait(void *impl) {
    mpi_rank *me = (mpi_rank *)impl;
    const int rc = MPI_Waitall(me->nreq, me->req, MPI_STATUSES_IGNORE);
    me->nreq = 0;
    return rc == MPI_SUCCESS ? FMSA_SUCCESS : FMSA_ERR_DEVICE;
}

static fmsa_status mpi_allreduce(void *impl, float *buf, size_t n) {
    mpi_rank *me = (mpi_rank *)impl;
    if (n > (size_t)MPI_PIECE) return FMSA_ERR_NOT_SUPPORTED;
    return MPI_Allreduce(MPI_IN_PLACE, buf, (int)n, MPI_FLOAT, MPI_SUM, me->comm) == MPI_SUCCESS
               ? FMSA_SUCCESS
               : FMSA_ERR_DEVICE;
}

static void mpi_destroy(void *impl) { free(impl); }

static const fmsa_dist_transport mpi_ops = {
    .name = "mpi",
    .exchange_start = mpi_start,
    .exchange_wait = mpi_wait,
    .allreduce_sum_f32 = mpi_allreduce,
    .destroy = mpi_destroy,
};

fmsa_status fmsa_dist_comm_from_mpi(const void *mpi_comm, fmsa_dist_comm **comm) {
    mpi_rank *me;
    int init = 0;
    fmsa_status st;
    if (!mpi_comm || !comm) return FMSA_ERR_INVALID_ARGUMENT;
    if (MPI_Initialized(&init) != MPI_SUCCESS || !init) return FMSA_ERR_INVALID_ARGUMENT;
    me = (mpi_rank *)calloc(1, sizeof *me);
    if (!me) return FMSA_ERR_OUT_OF_MEMORY;
    me->comm = *(const MPI_Comm *)mpi_comm;
    if (MPI_Comm_rank(me->comm, &me->rank) != MPI_SUCCESS ||
        MPI_Comm_size(me->comm, &me->size) != MPI_SUCCESS) {
        free(me);
        return FMSA_ERR_INVALID_ARGUMENT;
    }
    st = fmsa_dist_comm_create(&mpi_ops, me, me->rank, me->size, comm);
    if (st != FMSA_SUCCESS) free(me);
    return st;
}
