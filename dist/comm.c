/* Communicator handles over a transport vtable, and the checked calls. */
#include <stdlib.h>

#include "common/error.h"
#include "dist/transport.h"

fmsa_status fmsa_dist_comm_create(const fmsa_dist_transport *t, void *impl, int rank, int size,
                                  fmsa_dist_comm **comm) {
    fmsa_dist_comm *c;
    fmsa_clear_error();
    if (!comm) return fmsa_fail(FMSA_ERR_INVALID_ARGUMENT, "comm is NULL");
    *comm = NULL;
    if (!t || !t->exchange_start || !t->exchange_wait || !t->allreduce_sum_f32)
        return fmsa_fail(FMSA_ERR_INVALID_ARGUMENT,
                         "t: the transport needs exchange_start, exchange_wait and "
                         "allreduce_sum_f32");
    if (size < 1 || rank < 0 || rank >= size)
        return fmsa_fail(FMSA_ERR_INVALID_ARGUMENT, "rank = %d, size = %d: need 0 <= rank < size",
                         rank, size);
    c = (fmsa_dist_comm *)calloc(1, sizeof *c);
    if (!c) return fmsa_fail(FMSA_ERR_OUT_OF_MEMORY, "fmsa_dist_comm_create");
    c->rank = rank;
    c->size = size;
    c->ops = t;
    c->impl = impl;
    *comm = c;
    return FMSA_SUCCESS;
}

fmsa_status fmsa_dist_comm_loopback(int ranks, fmsa_dist_comm **comms) {
    fmsa_clear_error();
    if (!comms) return fmsa_fail(FMSA_ERR_INVALID_ARGUMENT, "comms is NULL");
    return fmsa_transport_loopback_make(ranks, comms);
}

void fmsa_dist_comm_destroy(fmsa_dist_comm *comm) {
    if (!comm) return;
    if (comm->ops->destroy) comm->ops->destroy(comm->impl);
    free(comm);
}

fmsa_status fmsa_dist_comm_rank(const fmsa_dist_comm *comm, int *rank, int *size) {
    fmsa_clear_error();
    if (!comm || !rank || !size)
        return fmsa_fail(FMSA_ERR_INVALID_ARGUMENT, "%s is NULL",
                         !comm ? "comm" : !rank ? "rank" : "size");
    *rank = comm->rank;
    *size = comm->size;
    return FMSA_SUCCESS;
}

/* A failing member keeps its own message; otherwise the ring names it. */
static fmsa_status dist_checked(fmsa_status st, const fmsa_dist_comm *c, const char *member) {
    if (st == FMSA_SUCCESS) return st;
    if (fmsa_last_error()[0]) return st;
    return fmsa_fail(st, "ring: transport %s: %s failed on rank %d (%s)",
                     c->ops->name ? c->ops->name : "(unnamed)", member, c->rank,
                     fmsa_status_string(st));
}

fmsa_status fmsa_dist_exchange_start(fmsa_dist_comm *c, const void *send, void *recv,
                                     size_t bytes) {
    return dist_checked(c->ops->exchange_start(c->impl, send, recv, bytes), c, "exchange_start");
}

fmsa_status fmsa_dist_exchange_wait(fmsa_dist_comm *c) {
    return dist_checked(c->ops->exchange_wait(c->impl), c, "exchange_wait");
}

fmsa_status fmsa_dist_allreduce(fmsa_dist_comm *c, float *buf, size_t n) {
    return dist_checked(c->ops->allreduce_sum_f32(c->impl, buf, n), c, "allreduce_sum_f32");
}
