/*
 * The ring driver's view of a communicator: the public transport vtable
 * (flashmsa_dist.h) with its state, rank and size, and the checked calls the
 * driver makes through it (a failing member gets a message naming the
 * transport and the member when it left none).
 */
#ifndef FMSA_DIST_TRANSPORT_H
#define FMSA_DIST_TRANSPORT_H

#include <stddef.h>

#include "flashmsa/flashmsa_dist.h"

struct fmsa_dist_comm {
    int rank, size;                 ///< this rank, ranks in the ring
    const fmsa_dist_transport *ops; ///< the transport
    void *impl;                     ///< its state
    fmsa_context *ctx;              ///< the context of the ring pass running now (the
                                    ///< loopback copies device blocks through it)
};

/// ops->exchange_start, with a message on failure.
fmsa_status fmsa_dist_exchange_start(fmsa_dist_comm *c, const void *send, void *recv,
                                     size_t bytes);
/// ops->exchange_wait, with a message on failure.
fmsa_status fmsa_dist_exchange_wait(fmsa_dist_comm *c);
/// ops->allreduce_sum_f32, with a message on failure.
fmsa_status fmsa_dist_allreduce(fmsa_dist_comm *c, float *buf, size_t n);

/// The loopback group (transport_loopback.c).
fmsa_status fmsa_transport_loopback_make(int ranks, fmsa_dist_comm **comms);

#endif /* FMSA_DIST_TRANSPORT_H */
