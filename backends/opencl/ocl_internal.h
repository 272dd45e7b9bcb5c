/*
 * State shared by the OpenCL backend's files: the device list, the
 * per-context state (context, default queue, program cache) and the launch
 * configuration that one function (fmsa_ocl_config) derives from the planner.
 */
#ifndef FMSA_OCL_INTERNAL_H
#define FMSA_OCL_INTERNAL_H

#include <pthread.h>

#include "backends/opencl/ocl_loader.h"
#include "common/problem.h"

/// Kernels of one built program; which are present depends on the pass.
enum {
    FMSA_OCL_K_FORWARD = 0,    ///< fmsa_ocl_forward
    FMSA_OCL_K_BWD_PRE = 1,    ///< fmsa_ocl_bwd_preprocess: D = rowsum(dO * O)
    FMSA_OCL_K_BWD_DKDV = 2,   ///< fmsa_ocl_bwd_dkdv: one work-group per key tile
    FMSA_OCL_K_BWD_DQ = 3,     ///< fmsa_ocl_bwd_dq: one work-group per query tile
    FMSA_OCL_K_COUNT = 4,
};

/// One compiled variant; the build-option string is its cache key.
typedef struct fmsa_ocl_program {
    char *options;                       ///< exact -D string it was built with
    cl_program program;                  ///< the built program
    cl_kernel kernel;                    ///< the one kernel the options select
    struct fmsa_ocl_program *next;       ///< cache list
} fmsa_ocl_program;

/// One enumerated device.
typedef struct fmsa_ocl_device {
    cl_platform_id platform; ///< its platform
    cl_device_id id;         ///< the device
    size_t max_work_group;   ///< CL_DEVICE_MAX_WORK_GROUP_SIZE
    fmsa_device_info info;   ///< what fmsa_device_get reports
} fmsa_ocl_device;

/// Per-context state (what context_create returns).
typedef struct fmsa_ocl_state {
    const fmsa_ocl_api *cl;     ///< the loaded runtime
    const fmsa_ocl_device *dev; ///< the device
    cl_context context;         ///< one context per fmsa_context
    cl_command_queue queue;     ///< default (in-order) queue
    pthread_mutex_t lock;       ///< guards the cache and kernel arguments
    fmsa_ocl_program *programs; ///< build cache
} fmsa_ocl_state;

/// Launch shape of one kernel: tiles from the planner, the work-group size
/// and how it splits over the score tile and the output-shaped tile.
typedef struct fmsa_ocl_kernel_config {
    int block_m, block_n; ///< Br, Bc
    int wg;               ///< work-items per work-group
    int s_nx;             ///< work-items along the keys of the Br x Bc score tile
    int o_nx;             ///< work-items along head_dim/4 of the output tile (O, dQ, dK/dV)
    int qs16;             ///< Q-shaped tiles (Q, dO) staged as raw 16-bit values (QS16)
    int ks16;             ///< K-shaped tiles (K, V) staged as raw 16-bit values (KS16)
    int qdo2;             ///< dK/dV kernel: separate Q and dO tiles (QDO2)
    int pf;               ///< backward kernels: next streamed tile fetched into registers (PF)
    int kv1;              ///< dQ kernel: one __local tile for V then K (KV1)
    size_t local_bytes;   ///< __local bytes the kernel declares
} fmsa_ocl_kernel_config;

/// Tile shape of the CPU-device kernels (cpu/fmsa_ocl_cpu_*.cl), passed to
/// their program as -D values; fmsa_ocl_cpu_tiles_check says what is legal.
typedef struct fmsa_ocl_cpu_tiles {
    int rows;  ///< rows one work-item owns (query rows; keys in dK/dV): FC_L = 8 * FC_RB
    int step;  ///< streamed rows per step (keys; query rows in dK/dV): FC_KC
    int block; ///< streamed rows per register block: FC_KB (step is a multiple of it)
    int dmax;  ///< head dim the private tiles hold: FC_DMAX (FMSA_HEAD_DIM_SMALL_MAX or _MAX)
} fmsa_ocl_cpu_tiles;

/// Everything one pass runs, indexed by FMSA_OCL_K_*.
typedef struct fmsa_ocl_config {
    fmsa_ocl_kernel_config kernel[FMSA_OCL_K_COUNT]; ///< per kernel (unused entries zero)
    size_t workspace_bytes;                          ///< global scratch the pass needs
    const char *table_row;                           ///< planner row (for logs)
    int variant; ///< FMSA_OCL_VARIANT_* (cpu/ocl_cpu.h): generic kernels, or the CPU-device ones
    fmsa_ocl_cpu_tiles cpu; ///< the CPU-device kernels' tiles (variant CPU only)
} fmsa_ocl_config;

/// __local bytes of one kernel for a launch shape and head dims D (q/k) and
/// Dv (v/o) (mirrors the .cl declarations; reads block_m, block_n, s_nx,
/// qs16, ks16, qdo2, kv1 of kc).
size_t fmsa_ocl_local_bytes(int kernel, const fmsa_ocl_kernel_config *kc, int64_t head_dim,
                            int64_t head_dim_v);


/// Enumerates once; returns the device list (count may be 0).
const fmsa_ocl_device *fmsa_ocl_devices(int *count);

/// The one function deciding what runs: plan + work-group shape + local and
/// workspace bytes.  Used by supports, workspace_size, forward and backward.
fmsa_status fmsa_ocl_config_make(const fmsa_ocl_state *st, const fmsa_problem *p,
                                 fmsa_ocl_config *cfg);

/// Returns the kernel `which` (FMSA_OCL_K_*) built for this problem's dtype,
/// head dim and features with launch shape kc, building it on first use.
/// Caller holds st->lock.
fmsa_status fmsa_ocl_kernel_get(fmsa_ocl_state *st, const fmsa_problem *p, int which,
                                const fmsa_ocl_kernel_config *kc, cl_kernel *out);

/// Frees every cached program.
/// Kernel `name` of program source src built with options, from the
/// context's cache under key (built and cached on first use; a failed build
/// returns FMSA_ERR_DEVICE with the build log).
fmsa_status fmsa_ocl_cached_kernel(fmsa_ocl_state *st, const char *key, const char *src,
                                   const char *options, const char *name, cl_kernel *out);
void fmsa_ocl_program_cache_free(fmsa_ocl_state *st);

/// Embedded OpenCL C source (generated at build time).
extern const char fmsa_ocl_kernel_source[];

/// Runs the forward / backward pass (caller holds st->lock).
fmsa_status fmsa_ocl_run_forward(fmsa_ocl_state *st, const fmsa_problem *p, cl_mem workspace,
                                 size_t workspace_bytes, cl_command_queue queue);
fmsa_status fmsa_ocl_run_backward(fmsa_ocl_state *st, const fmsa_problem *p, cl_mem workspace,
                                  size_t workspace_bytes, cl_command_queue queue);

#endif /* FMSA_OCL_INTERNAL_H */
