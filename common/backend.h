/*
 * The backend interface: one const vtable per backend, filled with designated
 * initialisers.  Adding a backend = one folder under backends/, one line in
 * common/backend_list.h and one CMake line (backends/README.md).  The common
 * layer validates every argument before calling any member, so members may
 * assume a well-formed fmsa_problem.
 *
 * GPU backends are compiled in but load their vendor runtime lazily (dlopen of
 * libOpenCL.so.1, libcuda.so.1, libamdhip64.so at first use), so a build with
 * every backend enabled still runs the CPU backend on a machine with no GPU
 * runtime installed: device_count then reports 0 devices.
 */
#ifndef FMSA_COMMON_BACKEND_H
#define FMSA_COMMON_BACKEND_H

#include "common/backend_list.h"
#include "common/accumulate.h"
#include "common/problem.h"

/// Bumped whenever a member's meaning changes; modules built against another
/// version are refused at load time.
#define FMSA_BACKEND_API_VERSION 2

/// What a peak probe's loop multiplies.
typedef enum fmsa_peak_kind {
    FMSA_PEAK_FP32 = 0, ///< fp32 multiply-adds
    FMSA_PEAK_BF16 = 1, ///< bf16 products accumulated in fp32
} fmsa_peak_kind;

/// A backend's peak-throughput probe (`flashmsa peak`, `flashmsa bench`): what
/// a register-resident multiply-add loop reaches on each of its kernel paths,
/// so speed figures read as a fraction of what the device does.  The program
/// reaches it through the vtable so that it needs no backend-internal header.
typedef struct fmsa_backend_peak {
    int path_count;                     ///< kernel paths this backend knows, usable or not
    const char *(*path_name)(int path); ///< "avx2", ...
    int (*path_usable)(int path);       ///< this machine and build can run the path
    /// The path the backend's passes run now; -1 if an override names no usable path.
    int (*path_selected)(void);
    /// GFLOP/s (a multiply-add counts 2) of path on `threads` threads (<= 0: all)
    /// for about `seconds`; FMSA_ERR_NOT_SUPPORTED where the path lacks the kind.
    fmsa_status (*measure)(int path, fmsa_peak_kind kind, int threads, double seconds,
                           double *gflops);
} fmsa_backend_peak;

/// How validation may read a backend's metadata tensors (cu_seqlens, block
/// tables, seqused_k).
typedef enum fmsa_meta_access {
    /// Validation reads them through copy_to_host (host memory on the CPU, a
    /// synchronous copy on OpenCL) and checks them before the pass runs.
    FMSA_META_READ = 0,
    /// No host read where the call gives what validation would compute
    /// (max_seqlen_q/k); the backend checks the contents on the device and
    /// reports at the next synchronize, so a pass can be captured (CUDA graphs).
    FMSA_META_DEFERRED = 1,
} fmsa_meta_access;

typedef struct fmsa_backend_vtable {
    int api_version;      ///< FMSA_BACKEND_API_VERSION the backend was built with
    fmsa_backend kind;    ///< which backend this is
    const char *name;     ///< "cpu", "cuda", ...
    fmsa_meta_access meta_access; ///< how validation reads metadata (0 = FMSA_META_READ)

    /// Number of usable devices; 0 (and FMSA_SUCCESS) when the runtime or
    /// driver is missing.  Must not fail on a machine without the vendor stack.
    fmsa_status (*device_count)(int *count);
    /// Fills info for device index (backend-local).
    fmsa_status (*device_info)(int index, fmsa_device_info *info);

    /// Creates per-context state for device index.
    fmsa_status (*context_create)(int index, void **state);
    /// Releases what context_create made.
    void (*context_destroy)(void *state);

    fmsa_status (*mem_alloc)(void *state, size_t bytes, void **ptr);     ///< device allocation
    fmsa_status (*mem_free)(void *state, void *ptr);                     ///< device free
    fmsa_status (*copy_to_device)(void *state, void *dst, size_t dst_offset, const void *src,
                                  size_t bytes);                         ///< host -> device
    fmsa_status (*copy_to_host)(void *state, void *dst, const void *src, size_t src_offset,
                                size_t bytes);                           ///< device -> host
    fmsa_status (*synchronize)(void *state, void *stream);               ///< wait for a stream

    /// Optional (NULL = everything valid is supported): FMSA_ERR_NOT_SUPPORTED
    /// with a message naming the feature and backend for what it cannot run.
    fmsa_status (*supports)(void *state, const fmsa_problem *p);
    /// Bytes of workspace the pass needs.  Must call the same variant
    /// selection that forward/backward use.
    fmsa_status (*workspace_size)(void *state, const fmsa_problem *p, size_t *bytes);
    /// Runs the forward pass.
    fmsa_status (*forward)(void *state, const fmsa_problem *p, void *workspace,
                           size_t workspace_bytes, void *stream);
    /// Runs the backward pass (preprocess, main, postprocess).
    fmsa_status (*backward)(void *state, const fmsa_problem *p, void *workspace,
                            size_t workspace_bytes, void *stream);

    /// Optional (NULL = FMSA_ERR_NOT_SUPPORTED naming the backend): merges two
    /// partial results (fmsa_merge_states) on stream.
    fmsa_status (*merge)(void *state, const fmsa_merge_problem *mp, void *stream);

    /// Optional (NULL = none): the peak probe of the backend's kernel paths.
    const fmsa_backend_peak *peak;

    /// 1 when tensor data are opaque handles (cl_mem), which views share only
    /// by being the same handle; 0 (default) when they are addresses (host or
    /// device pointers), compared as such (common/validate_memory.c).
    int data_handles;
    /// Optional (NULL = the allocation's size cannot be asked): the byte size
    /// of the allocation a handle refers to (OpenCL: CL_MEM_SIZE), so that
    /// validation refuses a view reaching past it.
    fmsa_status (*mem_size)(void *state, const void *data, size_t *bytes);
    /// Optional (NULL = not asked), for address backends: the allocation that
    /// holds addr, [*base, *base + *bytes) (CUDA: cuMemGetAddressRange), so that
    /// validation refuses a view outside device memory or reaching past its
    /// allocation; fails when addr lies in none.
    fmsa_status (*mem_range)(void *state, uintptr_t addr, uintptr_t *base, size_t *bytes);

    /// Optional (NULL = FMSA_ERR_NOT_SUPPORTED naming the backend): the ring's
    /// elementwise op (common/accumulate.h) on stream, fp32 arithmetic.
    fmsa_status (*accumulate)(void *state, const fmsa_accumulate_problem *ap, void *stream);
    /// Optional (NULL = FMSA_ERR_NOT_SUPPORTED): bytes from src + src_offset to
    /// dst + dst_offset, both device memory of this context, on stream.
    fmsa_status (*copy_device)(void *state, void *dst, size_t dst_offset, const void *src,
                               size_t src_offset, size_t bytes, void *stream);
} fmsa_backend_vtable;

/// One getter per backend of backend_list.h; only those of compiled-in
/// backends (FLASHMSA_HAVE_<ID>) exist at link time.
#define FMSA_BACKEND_GETTER_DECL_(ID, name) \
    const fmsa_backend_vtable *fmsa_backend_##name##_vtable(void);
FMSA_BACKEND_LIST(FMSA_BACKEND_GETTER_DECL_)
#undef FMSA_BACKEND_GETTER_DECL_

#endif /* FMSA_COMMON_BACKEND_H */
