/*
 * flashmsa_dist — ring (context-parallel) attention over a communicator the
 * caller already has, in the library `flashmsa_dist` (CMake target
 * flashmsa::dist), built on the public API of flashmsa.h only.
 *
 * P ranks each hold c = S / P tokens of one sequence (q, k, v, o, ... of
 * shape [B, c, H, D]); the ranks' shards together are the sequence in the
 * order a layout says.  Every rank calls fmsa_ring_forward (or _backward)
 * with its shard; K and V travel around the ring (rank r sends to r + 1 and
 * receives from r - 1) while each rank attends its queries to the block it
 * holds, and the partial results merge exactly through the online-softmax
 * merge (fmsa_merge_states).  The result on each rank is its rows of the
 * attention over the whole sequence, under the project's correctness rule.
 *
 * Layouts (global token positions of local row i, c rows per rank, P ranks):
 *   CONTIGUOUS  r c + i                              (causal work is unbalanced)
 *   ZIGZAG      rows [0, c/2): r c/2 + i; rows [c/2, c): (2P - 1 - r) c/2 + i - c/2
 *               (c even; every rank does the same causal work at every step)
 *   STRIPED     r + P i
 * Masks come from global positions: causal is "key position <= query
 * position" over the whole sequence, and a window keeps the keys at
 * positions [query - window_left, query + window_right] (causal: right 0),
 * each rank running only the row and key ranges of a block that the band
 * reaches (with the local kernels' own window, shifted to the block).
 *
 * What the ring supports today: the CPU and CUDA backends, non-varlen
 * [B, c, H, D] shards with every rank holding the same c, causal or not,
 * windows (sliding, two-sided, one-sided), GQA, softcap, sinks (counted once
 * per row, at the rank's own block), a value head dim of its own, dlse and
 * dsink in the backward (dsink summed over all ranks), ALiBi with every
 * layout (its distance is the whole sequence's: contiguous and zigzag run
 * each pair of contiguous chunks as a pass whose local distance is shifted to
 * the global one; striped runs each side of a block's local diagonal as a
 * pass with the slopes times P and that side's constant in its lse, so a
 * striped block off the rank's own costs up to three passes), and bit masks
 * with the contiguous and zigzag layouts (below), each as far as the
 * backend's own passes support it.  Every tensor and the workspace live in
 * the context's memory (fmsa_malloc: device memory on a GPU); all the ring's
 * arithmetic runs there, on the context's default stream.
 *
 * Bit masks (desc.mask): each rank passes its own query rows, in its shard's
 * order, over the whole sequence's key columns in global order: u8
 * [B|1, Hq|1, c, >= ceil(P c / 8)], bit (k & 7) of byte k >> 3 of row i keeps
 * global key k for the rank's local row i (so rank r's rows are rows
 * pos(r, i) of the whole sequence's mask).  Each local pass reads the mask
 * through a view that starts at the byte of its first key's column, so every
 * chunk of keys must start at a multiple of 8: the contiguous layout needs c
 * a multiple of 8 when P > 1 (any c with one rank), the zigzag layout c / 2 a
 * multiple of 8.  Refused with FMSA_ERR_NOT_SUPPORTED, naming the field and
 * the layout: other shard sizes, and the striped layout (a rank's keys are
 * every P-th column, which no byte view selects); a mask narrower than
 * ceil(P c / 8) bytes or with other than c rows is FMSA_ERR_INVALID_ARGUMENT.
 *
 * Refused with FMSA_ERR_NOT_SUPPORTED besides: varlen, paged KV, and OpenCL
 * (its buffers are cl_mem handles, which a transport's send/recv pointers
 * cannot name).
 * Transports: MPI (fmsa_dist_comm_from_mpi, in the separate library
 * flashmsa_dist, which links MPI, so that libflashmsa itself never needs it;
 * host memory, or device memory with a CUDA-aware MPI), NCCL and RCCL
 * (fmsa_dist_comm_from_nccl / _rccl: loaded with dlopen, never linked), an
 * in-process loopback (P ranks as P threads of one process on the host or
 * one GPU, for tests), and any transport of the caller's through
 * fmsa_dist_comm_create.
 *
 * Arithmetic: each block's result is rounded to the input dtype by the local
 * pass, then merged (forward) or summed (backward) in fp32 workspace; the
 * result is rounded once more.  That adds at most one rounding of the input
 * dtype per block to what a single-device pass does (striped ALiBi: an fp32
 * rounding of P times each slope and of each shifted lse besides).
 */
#ifndef FLASHMSA_FLASHMSA_DIST_H
#define FLASHMSA_FLASHMSA_DIST_H

#include "flashmsa/flashmsa.h"

#ifdef __cplusplus
extern "C" {
#endif /* __cplusplus */

/// Opaque: one rank's handle on a communicator.
typedef struct fmsa_dist_comm fmsa_dist_comm;

/// What the ring needs from a communicator.  Each member returns FMSA_SUCCESS
/// or a failure status (a transport may leave the message to the ring, which
/// then names the transport and the member).  One exchange is in flight per
/// rank at a time.  Exchange buffers are in the ring context's memory (device
/// memory on a GPU); a device transport may complete an exchange in stream
/// order on the context's default stream instead of on the host (NCCL does):
/// the ring enqueues everything there.  The all-reduce is on host floats.
typedef struct fmsa_dist_transport {
    const char *name; ///< "mpi", "loopback", ...: used in messages
    /// Starts sending `bytes` of `send` to rank + 1 (mod size) and receiving
    /// as many from rank - 1 into `recv`; send and recv never overlap.
    fmsa_status (*exchange_start)(void *impl, const void *send, void *recv, size_t bytes);
    /// Waits for the started exchange: recv is filled and send may be reused.
    fmsa_status (*exchange_wait)(void *impl);
    /// buf[0..n) becomes the element-wise sum over every rank's buf, on every rank.
    fmsa_status (*allreduce_sum_f32)(void *impl, float *buf, size_t n);
    /// Releases impl when the handle is destroyed (NULL: nothing to release).
    void (*destroy)(void *impl);
} fmsa_dist_transport;

/// A handle on rank `rank` of `size` over transport t (kept by pointer: it
/// must outlive the handle) and its state impl.
FMSA_API fmsa_status fmsa_dist_comm_create(const fmsa_dist_transport *t, void *impl, int rank,
                                           int size, fmsa_dist_comm **comm);

/// Wraps an MPI communicator (library flashmsa_dist, target flashmsa::dist): mpi_comm points to an MPI_Comm (the caller keeps
/// it alive and has initialised MPI).  FMSA_ERR_BACKEND_UNAVAILABLE when the
/// library was built without MPI.
FMSA_API fmsa_status fmsa_dist_comm_from_mpi(const void *mpi_comm, fmsa_dist_comm **comm);

/// Wraps an NCCL communicator (the ncclComm_t itself; the caller keeps it
/// alive) for ring passes on ctx, a CUDA context on the communicator's
/// device.  libnccl.so.2 is loaded with dlopen at the first call, so
/// libflashmsa runs without NCCL: FMSA_ERR_BACKEND_UNAVAILABLE when it cannot
/// be loaded (put its folder, e.g. Python's nvidia/nccl/lib, on
/// LD_LIBRARY_PATH).  Exchanges are ncclSend/ncclRecv in one group on a
/// stream of the transport's own, ordered against the context's default
/// stream by events (the CUDA runtime the process holds, or libcudart found
/// on the library path, makes them; call from a thread whose current CUDA
/// device is ctx's, as NCCL itself needs), so a transfer runs beside the
/// passes and the host never waits for it; without a loadable runtime they
/// run on the default stream (correct, no overlap; logged at INFO).
FMSA_API fmsa_status fmsa_dist_comm_from_nccl(void *nccl_comm, fmsa_context *ctx,
                                              fmsa_dist_comm **comm);

/// The same over RCCL (librccl.so.1, same API) for a HIP context.  Built,
/// not yet run: no HIP backend or AMD machine exists here yet, so today it
/// refuses every context (FMSA_ERR_INVALID_ARGUMENT naming the backend).
FMSA_API fmsa_status fmsa_dist_comm_from_rccl(void *rccl_comm, fmsa_context *ctx,
                                              fmsa_dist_comm **comm);

/// Makes `ranks` in-process ranks: comms[r] is rank r's handle.  Each rank's
/// ring calls must run on their own thread, all at the same time, each on its
/// own context of one device (the host, or one GPU: blocks move by the
/// backend's device copy on the receiver's default stream, which every
/// context of a CUDA device shares in issue order, so no rank waits on the
/// host for a copy).
FMSA_API fmsa_status fmsa_dist_comm_loopback(int ranks, fmsa_dist_comm **comms);

/// Releases a handle (NULL allowed).  Loopback handles of one group are freed
/// with the last of them.
FMSA_API void fmsa_dist_comm_destroy(fmsa_dist_comm *comm);

/// This rank's index and the communicator's size.
FMSA_API fmsa_status fmsa_dist_comm_rank(const fmsa_dist_comm *comm, int *rank, int *size);

/// How the ranks' shards form the sequence (see above).
typedef enum fmsa_ring_layout {
    FMSA_RING_CONTIGUOUS = 0, ///< rank r holds tokens [r c, (r + 1) c)
    FMSA_RING_ZIGZAG = 1,     ///< rank r holds chunks r and 2P - 1 - r of 2P
    FMSA_RING_STRIPED = 2,    ///< rank r holds tokens r, r + P, r + 2P, ...
} fmsa_ring_layout;

/// Bytes of workspace fmsa_ring_forward / fmsa_ring_backward need on this
/// rank, in the context's memory (the K/V double buffers, fp32 partial
/// state, the local pass's workspace; striped ALiBi: the scaled slopes and,
/// in the backward, an fp32 lse copy).  q, k, v are this rank's shards.
FMSA_API fmsa_status fmsa_ring_workspace_size(fmsa_context *ctx, const fmsa_dist_comm *comm,
                                              fmsa_ring_layout layout, fmsa_pass pass,
                                              const fmsa_attention_desc *desc,
                                              const fmsa_tensor *q, const fmsa_tensor *k,
                                              const fmsa_tensor *v, size_t *bytes);

/// The forward over the whole sequence: writes this rank's o (and lse, which
/// the backward needs).  Collective: every rank calls it with the same
/// layout, description and shapes.
FMSA_API fmsa_status fmsa_ring_forward(fmsa_context *ctx, fmsa_dist_comm *comm,
                                       fmsa_ring_layout layout, const fmsa_attention_desc *desc,
                                       const fmsa_tensor *q, const fmsa_tensor *k,
                                       const fmsa_tensor *v, const fmsa_tensor *o,
                                       const fmsa_tensor *lse, void *workspace,
                                       size_t workspace_bytes);

/// The backward over the whole sequence from this rank's shards and the ring
/// forward's o and lse: writes this rank's dq, dk, dv (dk/dv summed over the
/// queries of every rank) and, with desc.sinks, dsink (summed over all ranks,
/// the same on every rank).  Collective like the forward.
FMSA_API fmsa_status fmsa_ring_backward(fmsa_context *ctx, fmsa_dist_comm *comm,
                                        fmsa_ring_layout layout, const fmsa_attention_desc *desc,
                                        const fmsa_backward_tensors *t, void *workspace,
                                        size_t workspace_bytes);

#ifdef __cplusplus
} /* extern "C" */
#endif /* __cplusplus */

#endif /* FLASHMSA_FLASHMSA_DIST_H */
