/*
 * flashmsa — portable exact flash attention, public C11 API.
 *
 * Every call returns an fmsa_status (0 = success).  On failure a thread-local
 * message naming the offending field or vendor call is available from
 * fmsa_last_error().  Arguments are validated completely before anything is
 * written, so a failed call leaves every output buffer bit-identical.
 *
 * Tensors are described DLPack-style (fmsa_tensor): a device pointer (a cl_mem
 * for OpenCL) plus a byte offset, a dtype and int64 shape/strides counted in
 * elements.  Attention tensors use the layout [batch, seqlen, heads, head_dim]
 * with any strides whose last is 1.
 *
 * ABI and API policy.  Before 1.0 every minor release (0.x) may change any
 * declaration here: rebuild against the header you link with (the shared
 * library's soname stays libflashmsa.so.0 until 1.0; compare fmsa_version()
 * with FLASHMSA_VERSION if a program may meet another build).  0.2 added
 * desc.sinks, the value head dim, head dims up to 576, fmsa_backward_tensors
 * (dlse, dsink) and fmsa_merge_states; fmsa_backward's arguments changed.
 * From 1.0 on, a 1.x release only adds: new functions, new enum values and
 * new status codes.  It never changes the size or layout of a public struct:
 * a struct that must grow gets a new name (e.g. fmsa_attention_desc2) and new
 * entry points, and the old ones keep working, so a program built against
 * 1.0 runs unchanged with every 1.x library.
 */
#ifndef FLASHMSA_FLASHMSA_H
#define FLASHMSA_FLASHMSA_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif /* __cplusplus */

#define FLASHMSA_VERSION_MAJOR 0 ///< incompatible API changes
#define FLASHMSA_VERSION_MINOR 2 ///< compatible additions (before 1.0: any change, see below)
#define FLASHMSA_VERSION_PATCH 0 ///< fixes
/// One integer for compile-time comparisons: major*10000 + minor*100 + patch.
#define FLASHMSA_VERSION                                                       \
    (FLASHMSA_VERSION_MAJOR * 10000 + FLASHMSA_VERSION_MINOR * 100 +           \
     FLASHMSA_VERSION_PATCH)

#if defined(_WIN32) && defined(FLASHMSA_BUILDING)
#define FMSA_API __declspec(dllexport)
#elif defined(__GNUC__)
#define FMSA_API __attribute__((visibility("default")))
#else
#define FMSA_API
#endif /* defined(_WIN32) && defined(FLASHMSA_BUILDING) */

/* ------------------------------------------------------------------------ */
/* Status, errors, logging                                                  */
/* ------------------------------------------------------------------------ */

/// Result of every flashmsa call.
typedef enum fmsa_status {
    FMSA_SUCCESS = 0,                    ///< the call did what it was asked
    FMSA_ERR_INVALID_ARGUMENT = 1,       ///< an argument is malformed; the message names it
    FMSA_ERR_NOT_SUPPORTED = 2,          ///< valid, but this backend/build cannot do it
    FMSA_ERR_OUT_OF_MEMORY = 3,          ///< a host or device allocation failed
    FMSA_ERR_BACKEND_UNAVAILABLE = 4,    ///< the backend is not compiled in or has no usable runtime/device
    FMSA_ERR_DEVICE = 5,                 ///< a vendor runtime call failed; the message names the call
    FMSA_ERR_INSUFFICIENT_WORKSPACE = 6, ///< workspace smaller than fmsa_workspace_size() asked for
    FMSA_ERR_INTERNAL = 7,               ///< a flashmsa bug; please report the message
} fmsa_status;

/// Static English name of a status ("FMSA_ERR_INVALID_ARGUMENT: ..."); never NULL.
FMSA_API const char *fmsa_status_string(fmsa_status status);

/// Detail of the last failed call on this thread ("" if none); valid until the
/// next flashmsa call on the same thread.
FMSA_API const char *fmsa_last_error(void);

/// Packed version of the library actually loaded (FLASHMSA_VERSION form).
FMSA_API int fmsa_version(void);

/// Log levels; the environment variable FLASHMSA_LOG=error|warn|info|debug sets
/// the initial threshold (default warn).
typedef enum fmsa_log_level {
    FMSA_LOG_ERROR = 0, ///< a call failed
    FMSA_LOG_WARN = 1,  ///< something surprising but handled
    FMSA_LOG_INFO = 2,  ///< decisions: which backend/device AUTO chose, plans
    FMSA_LOG_DEBUG = 3, ///< per-call detail
} fmsa_log_level;

/// Receives log lines at or below the threshold. The library never prints on
/// its own: with no callback set, log lines are dropped.
typedef void (*fmsa_log_fn)(fmsa_log_level level, const char *message, void *user);

/// Installs (or with fn = NULL removes) the process-wide log callback.
FMSA_API void fmsa_set_log_callback(fmsa_log_fn fn, void *user);
/// Sets the process-wide log threshold.
FMSA_API void fmsa_set_log_level(fmsa_log_level level);

/* ------------------------------------------------------------------------ */
/* Backends and devices                                                     */
/* ------------------------------------------------------------------------ */

/// Which implementation runs a context.
typedef enum fmsa_backend {
    FMSA_BACKEND_AUTO = 0,   ///< best usable device: GPUs first, the CPU last
    FMSA_BACKEND_CPU = 1,    ///< OpenMP + SIMD on the host; always present
    FMSA_BACKEND_CUDA = 2,   ///< NVIDIA GPUs (sm_80, sm_90a)
    FMSA_BACKEND_HIP = 3,    ///< AMD GPUs (gfx942, gfx90a)
    FMSA_BACKEND_OPENCL = 4, ///< any OpenCL 1.2+ device
} fmsa_backend;

/// Lower-case name ("cpu", "cuda", "hip", "opencl", "auto"); never NULL.
FMSA_API const char *fmsa_backend_name(fmsa_backend backend);

/// What kind of processor a device is; AUTO prefers GPUs over the CPU backend
/// and the CPU backend over other CPU-like devices (e.g. OpenCL on a CPU).
typedef enum fmsa_device_kind {
    FMSA_DEVICE_KIND_OTHER = 0, ///< accelerators of unknown kind, OpenCL CPU devices
    FMSA_DEVICE_KIND_CPU = 1,   ///< the host CPU driven by the CPU backend
    FMSA_DEVICE_KIND_GPU = 2,   ///< a GPU
} fmsa_device_kind;

/// What the planner needs to know about a device, filled by its backend.
typedef struct fmsa_device_info {
    fmsa_backend backend;          ///< backend that drives this device
    fmsa_device_kind kind;         ///< GPU, the host CPU, or other
    int index;                     ///< index within that backend (FLASHMSA_DEVICE)
    char name[128];                ///< marketing name ("NVIDIA H200", CPU brand string)
    char arch[32];                 ///< architecture key of the planner tables ("sm90", "gfx942", "x86-avx512", ...)
    size_t sram_per_block;         ///< on-chip memory one block may use by default (CPU: L1d per core)
    size_t sram_per_block_optin;   ///< same after opt-in (CUDA dynamic smem limit; CPU: L2 per core)
    size_t sram_per_multiprocessor;///< on-chip memory per SM/CU (CPU: L2 per core)
    int multiprocessors;           ///< SMs, CUs or CPU cores/threads usable
    int warp_size;                 ///< 32 on NVIDIA, 64 on CDNA, SIMD lanes of fp32 on CPU
    int registers_per_block;       ///< 32-bit registers per block (0 where not meaningful)
    size_t global_memory;          ///< bytes of device (or host) memory
} fmsa_device_info;

/// Number of usable devices across every compiled-in backend whose runtime
/// loads.  Never fails on a machine without GPU runtimes (the CPU is always 1).
FMSA_API fmsa_status fmsa_device_count(int *count);
/// Information on device i of the global enumeration (AUTO order: GPUs first).
FMSA_API fmsa_status fmsa_device_get(int i, fmsa_device_info *info);

/* ------------------------------------------------------------------------ */
/* Context and backend-neutral memory helpers                               */
/* ------------------------------------------------------------------------ */

/// Opaque: one device of one backend, plus its plan cache.
typedef struct fmsa_context fmsa_context;

/// Creates a context.  With backend AUTO, device indexes the global order of
/// fmsa_device_get (0 = the best device) and the environment variables
/// FLASHMSA_BACKEND (auto|cpu|cuda|hip|opencl) and FLASHMSA_DEVICE, when set,
/// replace both arguments; AUTO logs its choice at INFO.  An explicit backend
/// uses its own device numbering, and if it is not usable the call fails with
/// FMSA_ERR_BACKEND_UNAVAILABLE (never a silent fallback).
FMSA_API fmsa_status fmsa_context_create(fmsa_backend backend, int device,
                                         fmsa_context **ctx);
/// Destroys a context (NULL is allowed).  On the CPU backend a context keeps
/// the buffers of its largest pass between calls (packed K/V panels, up to
/// about 64 MiB, and per-thread tiles), so repeated calls do not fault in
/// fresh pages; this frees them.  Passes may run on one CPU context from
/// several threads at once: one of them uses the kept buffers, the others
/// allocate their own for the call.  An OpenCL context serialises passes
/// from several threads (one at a time on its queue, each bit-identical to
/// the same pass run alone), so it may be shared the same way.
FMSA_API void fmsa_context_destroy(fmsa_context *ctx);
/// The device this context runs on.
FMSA_API fmsa_status fmsa_context_device(const fmsa_context *ctx, fmsa_device_info *info);

/// Allocates device memory (host memory for CPU, a cl_mem for OpenCL).
FMSA_API fmsa_status fmsa_malloc(fmsa_context *ctx, size_t bytes, void **ptr);
/// Frees what fmsa_malloc returned (NULL is allowed).
FMSA_API fmsa_status fmsa_free(fmsa_context *ctx, void *ptr);
/// Copies bytes from host memory to ptr + offset on the device.
FMSA_API fmsa_status fmsa_copy_to_device(fmsa_context *ctx, void *dst, size_t dst_offset,
                                         const void *src, size_t bytes);
/// Copies bytes from ptr + offset on the device to host memory.
FMSA_API fmsa_status fmsa_copy_to_host(fmsa_context *ctx, void *dst, const void *src,
                                       size_t src_offset, size_t bytes);
/// Waits until all work queued on stream (NULL = the context's default) is done.
/// On CUDA it also reports the device-side metadata checks of the passes
/// before it (see "CUDA: what is checked where" below): FMSA_ERR_INVALID_ARGUMENT
/// naming the check, after which the outputs of the passes since the previous
/// fmsa_synchronize are undefined; the report is cleared.
FMSA_API fmsa_status fmsa_synchronize(fmsa_context *ctx, void *stream);

/* ------------------------------------------------------------------------ */
/* Tensors                                                                  */
/* ------------------------------------------------------------------------ */

/// Element types.
typedef enum fmsa_dtype {
    FMSA_DTYPE_INVALID = 0, ///< zero-initialised descriptors are rejected
    FMSA_DTYPE_F32 = 1,     ///< IEEE binary32
    FMSA_DTYPE_F16 = 2,     ///< IEEE binary16
    FMSA_DTYPE_BF16 = 3,    ///< bfloat16
    FMSA_DTYPE_I32 = 4,     ///< int32 (cu_seqlens, block tables, seqused_k)
    FMSA_DTYPE_U8 = 5,      ///< bytes (bit-packed mask)
} fmsa_dtype;

/// Bytes per element of dtype (0 for FMSA_DTYPE_INVALID).
FMSA_API size_t fmsa_dtype_size(fmsa_dtype dtype);

#define FMSA_MAX_DIMS 4 ///< tensors here have at most four dimensions

/// A strided view of device memory.  An absent optional tensor has data == NULL.
typedef struct fmsa_tensor {
    void *data;                      ///< device pointer (cl_mem for OpenCL, host pointer for CPU)
    int64_t byte_offset;             ///< added to data before indexing (the only way to offset a cl_mem)
    fmsa_dtype dtype;                ///< element type
    int32_t ndim;                    ///< number of dimensions used in shape/strides
    int64_t shape[FMSA_MAX_DIMS];    ///< extent of each dimension
    int64_t strides[FMSA_MAX_DIMS];  ///< step of each dimension, in elements (may be 0 to broadcast where documented)
} fmsa_tensor;

/// Fills a contiguous (row-major) descriptor.
FMSA_API fmsa_tensor fmsa_tensor_contiguous(void *data, fmsa_dtype dtype, int32_t ndim,
                                            const int64_t *shape);

/* ------------------------------------------------------------------------ */
/* The attention problem                                                    */
/* ------------------------------------------------------------------------ */

/*
 * Shapes (B = batch, Sq/Sk = sequence lengths, Hq/Hkv = heads, D = the q/k
 * head dim, Dv = the value head dim, V's last dimension):
 *   q, dq          : [B, Sq, Hq, D]       k, dk : [B, Sk, Hkv, D]
 *   o, dout        : [B, Sq, Hq, Dv]      v, dv : [B, Sk, Hkv, Dv]
 *   lse, dlse      : [B, Hq, Sq] fp32     (last stride need not be 1)
 *   sinks, dsink   : [Hq] fp32
 * Hq must be a multiple of Hkv (GQA/MQA: query head h reads kv head h / (Hq/Hkv)).
 * D and Dv are multiples of 8 in [8, 576] (Dv = D is the usual case; MLA uses
 * 192/128 and 576/512).  Every backend runs D = Dv <= 256; what else each
 * backend's kernels fit is in the README's feature matrix, and a shape a
 * backend cannot run is refused with FMSA_ERR_NOT_SUPPORTED naming the backend
 * and the dims, never computed wrongly.  q, k, v (and o, dout, dq, dk, dv)
 * share one dtype: f32, f16 or bf16; what is rounded where is below.
 *
 * Rounding.  Inputs are read exactly; scores, the softmax state and every
 * sum are fp32, and each output is rounded once to its dtype (nearest even)
 * at the end.  Besides that, 16-bit matrix units round an intermediate to the
 * input dtype before its product: the CPU's bf16-product kernels (bf16
 * inputs on AMX, AVX512-BF16, or the generic-bf16 twin) round P to bf16
 * before P·V, and in the backward P and dS before dV, dK and dQ; CUDA's
 * tensor-core kernels (f16/bf16 inputs) likewise round P and dS to the
 * input dtype.  The CPU's fp32 paths and the OpenCL kernels round nothing
 * in between.  The tests hold every path to the rule of common/check_rule.h
 * (2x the naive same-precision error for O and LSE, 3x for gradients, plus
 * a derived floor that counts one such rounding).
 *
 * LSE accuracy.  lse is fp32, computed from the base-2 running state as
 * (m + log2 l) ln 2 and multiplied back by log2 e in the backward: its error
 * is a few fp32 roundings of |lse| (measured up to ~21 u_f32 |lse|, u_f32 =
 * 2^-24) on top of the naive fp32 error, and the tests bound it by 2x the
 * naive fp32 LSE error + 3 u_f32 (1 + max |lse|) + 4 u_f32 max |lse|.
 *
 * Memory.  Every view's data + byte_offset must be aligned to its element
 * size (OpenCL: byte_offset a multiple of it), and must lie inside its
 * allocation (checked against CL_MEM_SIZE on OpenCL).  No output (o and lse
 * of the forward; dq, dk, dv, dsink of the backward) may share a byte with
 * an input, another output, itself (through its strides) or the workspace;
 * such a call is refused with FMSA_ERR_INVALID_ARGUMENT naming both tensors
 * before anything is written.  Overlap means a common element, not a common
 * range: outputs interleaved in one packed buffer (dq, dk, dv as slices of a
 * [B, S, 3, H, D] gradient) are fine.  Inputs may share memory (k and v as
 * views of one buffer, q passed as k) and the documented ones may broadcast
 * with stride 0.  A tensor with zero elements needs no memory: its data may
 * be NULL (fmsa_malloc(0) returns NULL); its strides over the non-empty
 * dimensions must still keep every offset within int64.  A key that no query row of any
 * head reading it sees (masked, outside every window) never reaches an
 * output: NaN or Inf in its K or V changes nothing (CPU and OpenCL; OpenCL
 * also for a key hidden from some rows only, in those rows).
 *
 * Varlen (cu_seqlens_q.data != NULL): q/o are [1, total_q, Hq, D], k/v are
 * [1, total_k, Hkv, D], lse is [1, Hq, total_q]; cu_seqlens_q/k are int32
 * [batch + 1] (not broadcast: stride != 0), non-decreasing from 0, last entry =
 * total.  Sequence b uses rows cu[b] .. cu[b+1]-1.  Empty sequences are
 * allowed.  max_seqlen_q/k bound the per-sequence lengths (0 = computed by the
 * library).
 *
 * Paged KV (forward only, block_table.data != NULL, not with varlen): k and v
 * are pools [num_pages, page_size, Hkv, D]; block_table is int32 [B, max_pages];
 * key j of sequence b lives in page block_table[b][j / page_size], row
 * j % page_size.  seqused_k (int32 [B], optional) gives each sequence's number
 * of keys; without it every sequence has max_pages * page_size keys.
 *
 * Score of query i and key j of one sequence (sq, sk its lengths):
 *   s = softmax_scale * dot(q_i, k_j)
 *   s = softcap * tanh(s / softcap)                 if softcap > 0
 *   s = s - alibi_slope[h] * |i + sk - sq - j|        if alibi_slopes given
 *   key j is visible iff
 *     (window_left  < 0 or j >= i + sk - sq - window_left) and
 *     (window_right < 0 or j <= i + sk - sq + window_right) and
 *     (no mask or bit (j & 7) of mask[b][h][i][j >> 3] is 1)
 *   causal means window_right = 0 (bottom-right aligned, as FlashAttention 2.1+).
 * Attention sinks (desc.sinks, fp32 [Hq], logits t_h): the softmax of every
 * row of head h gets one more term, which has no value:
 *   P_ij = exp(s_ij - lse_i),  lse_i = log(exp(t_h) + sum_j exp(s_ij)),
 *   O_i  = sum_j P_ij v_j
 * (gpt-oss, DeepSeek-V4).  The backward then writes, when dsink is given,
 *   dsink_h = -sum over b, i of exp(t_h - lse_i) * (D_i - dlse_i),
 *   D_i = rowsum(dO_i * O_i), dlse_i = 0 without dlse.
 * A row with no visible key gives O = 0, LSE = -inf (with sinks: LSE = t_h)
 * and zero gradients dq/dk/dv.
 *
 * The LSE gradient (fmsa_backward_tensors.dlse): when a caller's loss also
 * depends on the forward's lse (as ring attention's merge does), dlse is its
 * gradient, and the backward uses dS_ij = P_ij (dP_ij - (D_i - dlse_i)).
 *
 * CUDA: what is checked where.  A CUDA pass can be captured into a CUDA graph
 * (no host synchronisation, allocation or device-to-host read) whenever it is
 * not varlen, or is varlen with max_seqlen_q and max_seqlen_k both > 0.  The
 * metadata contents the host cannot read without a copy are then checked on
 * the device, in stream order before the attention kernels, and reported by
 * the next fmsa_synchronize on that stream:
 *   - cu_seqlens_q/k (start at 0, non-decreasing, end at the packed total,
 *     no sequence longer than max_seqlen_q/k): on the device when both
 *     max_seqlen are given; otherwise read with a synchronous copy and checked
 *     in the call, as on every other backend (then the call is not capturable);
 *   - block_table entries of the pages a sequence's used keys live in, within
 *     [0, num_pages): always on the device;
 *   - seqused_k within [0, max_pages * page_size]: always on the device (the
 *     keys bound is then max_pages * page_size for every sequence).
 * Everything else (shapes, strides, dtypes, the description, and on CUDA that
 * every tensor lies inside one device allocation) is checked in the call.
 * On the CPU and OpenCL backends every check happens in the call.
 */

/// Everything about the attention besides q/k/v/o.  Zero-initialise, then set
/// what you use; fmsa_attention_desc_init() gives the defaults.
typedef struct fmsa_attention_desc {
    float softmax_scale;       ///< multiplies q·k; must be finite (1/sqrt(D) is typical)
    int causal;                ///< non-zero: window_right = 0, bottom-right aligned
    int64_t window_left;       ///< keys further left than this are masked; -1 = unlimited
    int64_t window_right;      ///< keys further right than this are masked; -1 = unlimited
    float softcap;             ///< > 0: tanh soft-capping of scores; 0 = off
    fmsa_tensor alibi_slopes;  ///< optional fp32 [Hq] or [B, Hq]
    fmsa_tensor mask;          ///< optional u8 [B|1, Hq|1, Sq, ceil(Sk/8)]; stride 0 broadcasts; bit = 1 keeps
    fmsa_tensor cu_seqlens_q;  ///< optional (varlen) int32 [B+1]
    fmsa_tensor cu_seqlens_k;  ///< required with cu_seqlens_q: int32 [B+1]
    int64_t max_seqlen_q;      ///< varlen: longest query sequence (0 = library computes)
    int64_t max_seqlen_k;      ///< varlen: longest key sequence (0 = library computes)
    fmsa_tensor block_table;   ///< optional (paged KV, forward only) int32 [B, max_pages]
    int64_t page_size;         ///< paged KV: rows per page (> 0)
    fmsa_tensor seqused_k;     ///< optional with paged KV: int32 [B] keys used per sequence
    int deterministic;         ///< backward: bit-identical results run to run
    fmsa_tensor sinks;         ///< optional fp32 [Hq]: per-head sink logits (see above)
} fmsa_attention_desc;

/// Defaults: scale 1/sqrt(head_dim), no mask, windows -1, no softcap.
FMSA_API fmsa_attention_desc fmsa_attention_desc_init(int64_t head_dim);

/// Which pass a workspace query is for.
typedef enum fmsa_pass {
    FMSA_PASS_FORWARD = 0,  ///< fmsa_forward
    FMSA_PASS_BACKWARD = 1, ///< fmsa_backward
} fmsa_pass;

/// Bytes of workspace fmsa_forward/fmsa_backward need for this problem (may be
/// 0).  q, k, v (and desc, including desc.sinks) describe the problem exactly
/// as it will be passed; whether a backward gets dlse or dsink does not change
/// the size (with desc.sinks it already counts dsink's partial sums).
FMSA_API fmsa_status fmsa_workspace_size(fmsa_context *ctx, fmsa_pass pass,
                                         const fmsa_attention_desc *desc,
                                         const fmsa_tensor *q, const fmsa_tensor *k,
                                         const fmsa_tensor *v, size_t *bytes);

/// O = softmax(score(Q, K)) V; writes lse too when lse != NULL and lse->data != NULL.
/// workspace is device memory of at least fmsa_workspace_size() bytes (NULL if 0).
/// stream is the backend's native queue (cudaStream_t, hipStream_t,
/// cl_command_queue; NULL = the context's default; ignored on the CPU).
FMSA_API fmsa_status fmsa_forward(fmsa_context *ctx, const fmsa_attention_desc *desc,
                                  const fmsa_tensor *q, const fmsa_tensor *k,
                                  const fmsa_tensor *v, const fmsa_tensor *o,
                                  const fmsa_tensor *lse, void *workspace,
                                  size_t workspace_bytes, void *stream);

/// The tensors of one backward pass.  Zero-initialise, then set them; the
/// optional ones stay absent (data == NULL).
typedef struct fmsa_backward_tensors {
    fmsa_tensor q, k, v; ///< the forward's inputs
    fmsa_tensor o;       ///< the forward's output [B, Sq, Hq, Dv]
    fmsa_tensor dout;    ///< gradient of o [B, Sq, Hq, Dv]
    fmsa_tensor lse;     ///< the forward's lse [B, Hq, Sq] fp32 (required)
    fmsa_tensor dlse;    ///< optional fp32 [B, Hq, Sq]: gradient of lse
    fmsa_tensor dq;      ///< output, like q
    fmsa_tensor dk;      ///< output, like k
    fmsa_tensor dv;      ///< output, like v
    fmsa_tensor dsink;   ///< optional output fp32 [Hq], only with desc.sinks: overwritten, summed over the batch
} fmsa_backward_tensors;

/// dQ, dK, dV (and dsink) from Q, K, V, O, dO and the forward's LSE
/// (recomputes P, never stores it).  With GQA, dK/dV sum over the query heads
/// of each kv head.
FMSA_API fmsa_status fmsa_backward(fmsa_context *ctx, const fmsa_attention_desc *desc,
                                   const fmsa_backward_tensors *t, void *workspace,
                                   size_t workspace_bytes, void *stream);

/// Merges two partial attention results over disjoint key sets of the same
/// queries, (o_a, lse_a) and (o_b, lse_b), into (o, lse), exactly as the
/// online softmax merges its states (ring attention, split-KV decode and
/// shared-prefix attention are this call):
///   lse = log(exp(lse_a) + exp(lse_b)),
///   o   = exp(lse_a - lse) o_a + exp(lse_b - lse) o_b,
/// where a side with lse = -inf (no visible key) contributes nothing, and both
/// -inf give o = 0, lse = -inf.  o_a, o_b, o: [B, S, H, Dv], each f32, f16 or
/// bf16 (they may differ: fp32 partials into a bf16 result), arithmetic fp32;
/// lse_a, lse_b, lse: fp32 [B, H, S].  o may be the same view as o_a or o_b
/// and lse the same view as lse_a or lse_b (in place); any other overlap of an
/// output with an input is refused.  Varlen results are [1, total, H, Dv].
FMSA_API fmsa_status fmsa_merge_states(fmsa_context *ctx, const fmsa_tensor *o_a,
                                       const fmsa_tensor *lse_a, const fmsa_tensor *o_b,
                                       const fmsa_tensor *lse_b, const fmsa_tensor *o,
                                       const fmsa_tensor *lse, void *stream);

#ifdef __cplusplus
} /* extern "C" */
#endif /* __cplusplus */

#endif /* FLASHMSA_FLASHMSA_H */
