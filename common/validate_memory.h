/*
 * Memory checks of one call, after the shape checks of validate.c and before
 * any write: every view's data pointer aligned to its element size, every view
 * inside its allocation where the backend can tell (OpenCL: CL_MEM_SIZE; CUDA:
 * the driver's address range), and
 * no output sharing a byte with an input, another output, the workspace or
 * itself.  Inputs may share memory with each other and broadcast (stride 0).
 *
 * Two views can only overlap within one allocation: for address backends (CPU,
 * CUDA: data is a pointer) their absolute byte ranges are compared, for handle
 * backends (OpenCL: data is a cl_mem) only views of the same handle, by byte
 * offset.  Ranges that intersect are then tested element by element through
 * their strides (fmsa_mem_views_overlap), so interleaved views of one packed
 * buffer (dq, dk, dv as slices of a [B, S, 3, H, D] gradient) are accepted.
 */
#ifndef FMSA_COMMON_VALIDATE_MEMORY_H
#define FMSA_COMMON_VALIDATE_MEMORY_H

#include "common/validate.h"

/// One strided byte view: the bytes data + byte_offset + sum_i idx_i * strides_i
/// * elem + [0, elem), idx_i in [0, shape_i).
typedef struct fmsa_mem_view {
    const char *name;  ///< field name for messages ("dq", "desc.mask", "workspace")
    const void *data;  ///< pointer or handle; NULL for absent or empty tensors
    int64_t byte_offset;
    int64_t elem;      ///< element size in bytes
    int32_t ndim;
    int64_t shape[FMSA_MAX_DIMS];
    int64_t strides[FMSA_MAX_DIMS]; ///< in elements
    int is_output;     ///< written by the call
} fmsa_mem_view;

/// How the backend's tensor data are addressed (from its vtable).
typedef struct fmsa_mem_policy {
    int handles; ///< 1: data are opaque handles (cl_mem), 0: addresses
    /// Optional: the byte size of the allocation a handle refers to.
    fmsa_status (*mem_size)(void *state, const void *data, size_t *bytes);
    /// Optional, for addresses: the allocation holding an address (backend.h).
    fmsa_status (*mem_range)(void *state, uintptr_t addr, uintptr_t *base, size_t *bytes);
    void *state; ///< passed to mem_size / mem_range
} fmsa_mem_policy;

/// 1 when views a and b (b == a: a with itself) may share a byte, given that
/// both lie in one allocation and *delta = (b's origin - a's origin) in bytes.
/// Exact for the layouts tensors use; reports an overlap when the search
/// exceeds its budget (the caller's message then says "may overlap").
int fmsa_mem_views_overlap(const fmsa_mem_view *a, const fmsa_mem_view *b, int64_t delta);

/// Checks the given views (alignment, allocation extent, overlaps) and fails
/// with FMSA_ERR_INVALID_ARGUMENT naming the field(s).
fmsa_status fmsa_check_views_memory(const fmsa_mem_view *views, int count,
                                    const fmsa_mem_policy *policy);

/// The tensors of one call (inputs and outputs of the pass, the description's
/// tensors), checked as above; the workspace is checked on its own (below),
/// once its size is known.
fmsa_status fmsa_check_call_memory(fmsa_pass pass, const fmsa_attention_desc *desc,
                                   const fmsa_call_tensors *t, const fmsa_mem_policy *policy);

/// workspace_need bytes of workspace against the call's tensors: inside its
/// allocation, aligned, sharing no byte with any of them.
fmsa_status fmsa_check_workspace_memory(fmsa_pass pass, const fmsa_attention_desc *desc,
                                        const fmsa_call_tensors *t, const void *workspace,
                                        size_t workspace_need, const fmsa_mem_policy *policy);

/// The views of one fmsa_merge_states call: o may be exactly o_a or o_b (and
/// lse exactly lse_a or lse_b), in place; any other sharing with an output is
/// refused.
fmsa_status fmsa_check_merge_memory(const fmsa_tensor *o_a, const fmsa_tensor *lse_a,
                                    const fmsa_tensor *o_b, const fmsa_tensor *lse_b,
                                    const fmsa_tensor *o, const fmsa_tensor *lse,
                                    const fmsa_mem_policy *policy);

#endif /* FMSA_COMMON_VALIDATE_MEMORY_H */
