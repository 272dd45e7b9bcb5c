/*
 * Problem setup shared by `flashmsa run` and `flashmsa bench`: one dense
 * [batch, seqlen, heads, dim] attention problem, its seeded random inputs,
 * device buffers through the backend-neutral fmsa_malloc / copy helpers, and
 * host copies for the fp64 reference.
 *
 * Inputs are generated on the host in the problem's dtype (so the reference
 * sees exactly the rounded values the device sees) and copied once.  Outputs
 * are poisoned with NaN before each pass, so an element the kernel forgot to
 * write shows up as a NaN in the check instead of a stale plausible value.
 */
#ifndef FMSA_APPS_CLI_WORKLOAD_H
#define FMSA_APPS_CLI_WORKLOAD_H

#include <stdint.h>

#include "common/problem.h"
#include "flashmsa/flashmsa.h"

/// Creates the context the options ask for, applies --threads and fills
/// *info; prints the reason on failure.
fmsa_status cli_context_open(fmsa_backend backend, int device, int threads, fmsa_context **ctx,
                             fmsa_device_info *info);

/// The shape and features of one problem.
typedef struct cli_shape {
    fmsa_dtype dtype;      ///< q/k/v/o/dout/dq/dk/dv element type
    int64_t batch;         ///< sequences
    int64_t seqlen_q;      ///< query rows per sequence
    int64_t seqlen_k;      ///< keys per sequence
    int64_t heads_q;       ///< query heads
    int64_t heads_kv;      ///< key/value heads (divides heads_q)
    int64_t head_dim;      ///< D (q, k)
    int64_t head_dim_v;    ///< Dv (v, o, dout, dv); 0 = D
    int causal;            ///< bottom-right aligned causal mask
    int64_t window_left;   ///< -1 = unlimited
    int64_t window_right;  ///< -1 = unlimited
    float softcap;         ///< 0 = off
    int backward;          ///< allocate dout/dq/dk/dv and run the backward too
    int sinks;             ///< 0 none; 1 a random logit per head in [-2, 4]; 2 every head sink_value
    float sink_value;      ///< the logit of sinks = 2
} cli_shape;

/// The value head dim of a shape (head_dim_v, or head_dim when 0).
static inline int64_t cli_shape_dv(const cli_shape *s) {
    return s->head_dim_v > 0 ? s->head_dim_v : s->head_dim;
}

/// One problem with its host and device buffers.
typedef struct cli_workload {
    cli_shape shape;           ///< what this is
    fmsa_context *ctx;         ///< borrowed; owns the device buffers' memory
    fmsa_attention_desc desc;  ///< scale 1/sqrt(D) plus the shape's features
    size_t q_bytes;            ///< bytes of q/dq
    size_t kv_bytes;           ///< bytes of k/dk
    size_t o_bytes;            ///< bytes of o/dout ([B, Sq, Hq, Dv])
    size_t v_bytes;            ///< bytes of v/dv ([B, Sk, Hkv, Dv])
    size_t lse_bytes;          ///< bytes of lse (fp32 [B, Hq, Sq])
    size_t sink_bytes;         ///< bytes of sinks/dsink (fp32 [Hq]; 0 without sinks)

    void *h_q, *h_k, *h_v, *h_dout; ///< host inputs, dtype
    void *h_o, *h_dq, *h_dk, *h_dv; ///< host outputs (after cli_workload_fetch), dtype
    float *h_lse;                   ///< host lse
    float *h_sinks, *h_dsink;       ///< host sink logits and (after fetch) dsink

    void *d_q, *d_k, *d_v, *d_o, *d_lse;  ///< device buffers
    void *d_dout, *d_dq, *d_dk, *d_dv;    ///< device buffers (backward only)
    void *d_sinks, *d_dsink;              ///< device buffers (with sinks; dsink backward)
    void *d_ws;                           ///< workspace, max over both passes
    size_t ws_bytes;                      ///< its size

    fmsa_tensor q, k, v, o, lse, dout, dq, dk, dv; ///< device tensors
    fmsa_tensor dsink;                             ///< device dsink (data NULL without sinks)
} cli_workload;

/// Allocates everything, fills inputs from seed and copies them to the device.
/// On failure everything allocated so far is released.
fmsa_status cli_workload_create(fmsa_context *ctx, const cli_shape *shape, uint64_t seed,
                                cli_workload *w);
/// Releases host and device buffers.
void cli_workload_destroy(cli_workload *w);

/// Fills the outputs of pass on the device with NaN (unwritten elements stay NaN).
fmsa_status cli_workload_poison(cli_workload *w, fmsa_pass pass);
/// Runs one pass and waits for it to finish.
fmsa_status cli_workload_run(cli_workload *w, fmsa_pass pass);
/// Copies the outputs of pass back into the host buffers.
fmsa_status cli_workload_fetch(cli_workload *w, fmsa_pass pass);
/// Validates the host copies into *p (forward: q, k, v, o, lse; backward:
/// adds dout, dq, dk, dv and dsink), for the reference and the checks; the
/// sink logits are the host copy.
fmsa_status cli_workload_host_problem(const cli_workload *w, fmsa_pass pass, fmsa_problem *p);

/// Query-key pairs that are visible (summed over batch, not heads).  Causal
/// without a window counts sq*sk/2, the convention every flash-attention
/// paper's FLOP count uses; windows count the exact visible pairs.
double cli_shape_pairs(const cli_shape *s);
/// FLOPs of one pass: forward 2*b*h*pairs*(D + Dv) (= 4*b*h*pairs*d when
/// Dv = D), backward 2.5x forward.
double cli_shape_flops(const cli_shape *s, fmsa_pass pass);
/// One-line description: "fp32 b2 sq1024 sk1024 h8/8 d128 causal".
void cli_shape_describe(const cli_shape *s, char *buf, size_t n);

#endif /* FMSA_APPS_CLI_WORKLOAD_H */
