/*
 * The CPU-device variant: selection, configuration, program and launches.
 *
 * Why a second set of kernels: a CPU OpenCL runtime (PoCL) runs a
 * work-group as loops over its work-items; the generic kernels' __local
 * tiles and barriers become memory copies and loop fission with every live
 * private value spilled per work-item, and their -D specialisation builds a
 * program per dtype x head dim x tile x feature set (seconds to minutes of
 * compile each).  The CPU kernels are barrier-free work-items of a tile of
 * rows with explicit float8 arithmetic, specialised only by the tile shape
 * (one per device): one program, its five kernels (with the panel packer)
 * compiled once per runtime cache.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backends/opencl/cpu/ocl_cpu.h"
#include "backends/opencl/ocl_args.h"
#include "backends/opencl/ocl_aux.h"
#include "common/error.h"
#include "common/fmsa_limits.h"
#include "common/planner.h"

/* Kernels: FMSA_OCL_K_* and the panel packer. */
#define FMSA_OCL_CPU_K_PACK FMSA_OCL_K_COUNT
static const char *const fmsa_ocl_cpu_names[FMSA_OCL_K_COUNT + 1] = {
    "fmsa_ocl_cpu_forward", "fmsa_ocl_cpu_bwd_preprocess", "fmsa_ocl_cpu_bwd_dkdv",
    "fmsa_ocl_cpu_bwd_dq", "fmsa_ocl_cpu_pack"};

/* Query rows per work-item of the preprocess kernel. */
#define FMSA_OCL_CPU_PRE_ROWS 64

/* Panel bytes per chunk of slots: the panels of a chunk are written and
 * read back while they are still in the last-level cache (32 MiB on the
 * CI machine's EPYC, shared), and the workspace stays bounded for long KV
 * caches.  At least one slot per chunk. */
#define FMSA_OCL_CPU_PANEL_BYTES ((size_t)16 << 20)

/* How a pass is cut into chunks of (sequence, kv head) slots and where its
 * panels live in the workspace (floats).  One function, used by the
 * configuration (workspace size) and the launches. */
typedef struct fmsa_ocl_cpu_layout {
    int64_t slots;      ///< batch * heads_kv
    int64_t chunk;      ///< slots per chunk
    int64_t group;      ///< heads_q / heads_kv
    int64_t rows_k;     ///< K/V panel rows per slot
    int64_t rows_q;     ///< Q/dO panel rows per query head (backward)
    int64_t d_floats;   ///< backward: D = rowsum(dO * O) floats at the start
    int64_t k_off;      ///< K/V panels of the chunk
    int64_t q_off;      ///< Q/dO panels of the chunk (backward)
    int64_t dsink_off;  ///< backward with dsink: the partials (fmsa_ocl_aux.c)
    int64_t floats;     ///< workspace floats
} fmsa_ocl_cpu_layout;

static int64_t fmsa_ocl_cpu_round(int64_t x, int64_t m) { return (x + m - 1) / m * m; }

/* A step's last register block (tiles.block rows) may read up to block - 1
 * rows past the sequence, so panels carry block zero rows (rounded up to 8)
 * past the longest sequence.  A slot's panels are D + Dv floats per row (K
 * then V, Q then dO). */
static void fmsa_ocl_cpu_layout_make(const fmsa_problem *p, const fmsa_ocl_cpu_tiles *t,
                                     fmsa_ocl_cpu_layout *L) {
    const int bwd = p->pass == FMSA_PASS_BACKWARD;
    const int64_t bq = p->is_varlen ? 1 : p->batch;
    int64_t per_slot;
    memset(L, 0, sizeof *L);
    L->slots = p->batch * p->heads_kv;
    L->group = p->heads_kv > 0 ? p->heads_q / p->heads_kv : 1;
    L->rows_k = fmsa_ocl_cpu_round(p->seqlen_k + t->block, 8);
    L->rows_q = bwd ? fmsa_ocl_cpu_round(p->seqlen_q + t->block, 8) : 0;
    L->d_floats = bwd ? fmsa_ocl_cpu_round(bq * p->heads_q * p->total_q, 16) : 0;
    const int64_t width = p->head_dim + p->head_dim_v;
    per_slot = (L->rows_k + L->group * L->rows_q) * width;
    L->chunk = (int64_t)(FMSA_OCL_CPU_PANEL_BYTES / sizeof(float)) / (per_slot > 0 ? per_slot : 1);
    if (L->chunk > L->slots) L->chunk = L->slots;
    if (L->chunk < 1) L->chunk = 1;
    L->k_off = L->d_floats;
    L->q_off = L->k_off + L->chunk * L->rows_k * width;
    L->dsink_off = L->slots > 0 ? L->q_off + L->chunk * L->group * L->rows_q * width
                                : L->d_floats;
    L->floats = L->dsink_off + (int64_t)fmsa_ocl_dsink_floats(p);
}

/* Positions inside one sequence are int lanes in the kernels. */
#define FMSA_OCL_CPU_MAX_SEQ ((int64_t)1 << 30)

int fmsa_ocl_cpu_selected(const fmsa_ocl_state *st, const fmsa_problem *p) {
    const char *env = getenv("FLASHMSA_OCL_VARIANT");
    cl_device_type type = 0;
    /* Past int lane positions: the generic kernels (the private tiles hold
     * every head dim the API allows, FMSA_HEAD_DIM_MAX). */
    if (p->seqlen_q >= FMSA_OCL_CPU_MAX_SEQ || p->seqlen_k >= FMSA_OCL_CPU_MAX_SEQ) return 0;
    if (env && strcmp(env, "cpu") == 0) return 1;
    if (env && strcmp(env, "generic") == 0) return 0;
    if (getenv("FLASHMSA_OCL_TILES")) return 0; /* a tuning run of the generic kernels */
    if (st->cl->clGetDeviceInfo(st->dev->id, CL_DEVICE_TYPE, sizeof type, &type, NULL) !=
        CL_SUCCESS)
        return 0;
    return (type & CL_DEVICE_TYPE_CPU) != 0;
}

/* Rows of a step handled per inner block: the planner rows give rows and
 * step; the block is the kernels' unroll, not a cache shape. */
#define FMSA_OCL_CPU_BLOCK 4

/* Work-item rows are float8 lanes; the kernels' private arrays grow with
 * rows x step, so both stay within what a CPU runtime keeps in cache. */
fmsa_status fmsa_ocl_cpu_tiles_check(const fmsa_ocl_cpu_tiles *t) {
    if (t->rows < 8 || t->rows > 32 || t->rows % 8 != 0)
        return fmsa_fail(FMSA_ERR_INTERNAL,
                         "opencl: CPU tiles: rows = %d must be 8, 16, 24 or 32", t->rows);
    if (t->block < 1 || t->block > 8)
        return fmsa_fail(FMSA_ERR_INTERNAL, "opencl: CPU tiles: block = %d must be in [1, 8]",
                         t->block);
    if (t->step < t->block || t->step > 128 || t->step % t->block != 0)
        return fmsa_fail(FMSA_ERR_INTERNAL,
                         "opencl: CPU tiles: step = %d must be a multiple of block = %d in "
                         "[block, 128]",
                         t->step, t->block);
    if (t->dmax != FMSA_HEAD_DIM_SMALL_MAX && t->dmax != FMSA_HEAD_DIM_MAX)
        return fmsa_fail(FMSA_ERR_INTERNAL, "opencl: CPU tiles: dmax = %d must be %d or %d",
                         t->dmax, FMSA_HEAD_DIM_SMALL_MAX, FMSA_HEAD_DIM_MAX);
    return FMSA_SUCCESS;
}

fmsa_status fmsa_ocl_cpu_config_make(const fmsa_ocl_state *st, const fmsa_problem *p,
                                     const fmsa_tile_plan *plan, fmsa_ocl_config *cfg) {
    fmsa_ocl_cpu_layout L;
    /* rows owned per work-item x rows streamed per step, forward (keys
     * streamed) or backward (KV-stationary: query rows streamed) */
    const int own = p->pass == FMSA_PASS_FORWARD ? plan->block_m : plan->block_n;
    const int step = p->pass == FMSA_PASS_FORWARD ? plan->block_n : plan->block_m;
    (void)st;
    memset(cfg, 0, sizeof *cfg);
    cfg->variant = FMSA_OCL_VARIANT_CPU;
    cfg->table_row = plan->table_row;
    cfg->cpu.rows = own;
    cfg->cpu.step = step;
    cfg->cpu.block = FMSA_OCL_CPU_BLOCK;
    /* Private tiles for head dims up to 256, or up to 576: two programs, so
     * the common dims keep the stack frames they were measured with. */
    cfg->cpu.dmax =
        p->head_dim <= FMSA_HEAD_DIM_SMALL_MAX && p->head_dim_v <= FMSA_HEAD_DIM_SMALL_MAX
            ? FMSA_HEAD_DIM_SMALL_MAX
            : FMSA_HEAD_DIM_MAX;
    FMSA_TRY(fmsa_ocl_cpu_tiles_check(&cfg->cpu));
    for (int k = 0; k < FMSA_OCL_K_COUNT; ++k) {
        /* the dQ kernel takes the backward pair the other way round */
        const int dq = k == FMSA_OCL_K_BWD_DQ;
        cfg->kernel[k].block_m = dq ? plan->block_n : plan->block_m;
        cfg->kernel[k].block_n = dq ? plan->block_m : plan->block_n;
        cfg->kernel[k].wg = 1;
    }
    /* Backward: D = rowsum(dO * O), one fp32 per (query row, head), as the
     * generic kernels; both passes: the fp32 panels of one chunk of slots. */
    fmsa_ocl_cpu_layout_make(p, &cfg->cpu, &L);
    cfg->workspace_bytes = (size_t)L.floats * sizeof(float);
    return FMSA_SUCCESS;
}

/* Build options of the CPU program: the tile shape and nothing else. */
static void fmsa_ocl_cpu_options(const fmsa_ocl_cpu_tiles *t, char *buf, size_t size) {
    snprintf(buf, size,
             "-cl-std=CL1.2 -DFMSA_OCL_VARIANT_CPU=1 -DFC_RB=%d -DFC_KC=%d -DFC_KB=%d "
             "-DFC_DMAX=%d",
             t->rows / 8, t->step, t->block, t->dmax);
}

/* The kernel `which`, from the one CPU program of tiles t.  Each kernel is
 * a cache entry of its own (keyed "cpu:<name> <options>", which no generic
 * -D string can equal) with its own clBuildProgram of the same source and
 * options: the runtime's program cache (PoCL: POCL_CACHE_DIR) makes the
 * repeats cheap. */
static fmsa_status fmsa_ocl_cpu_kernel(fmsa_ocl_state *st, const fmsa_ocl_cpu_tiles *t,
                                       int which, cl_kernel *out) {
    char options[160], key[224];
    fmsa_ocl_cpu_options(t, options, sizeof options);
    snprintf(key, sizeof key, "cpu:%s %s", fmsa_ocl_cpu_names[which], options);
    return fmsa_ocl_cached_kernel(st, key, fmsa_ocl_cpu_kernel_source, options,
                                  fmsa_ocl_cpu_names[which], out);
}

/* ---- kernel arguments ---------------------------------------------------- */


/* The feature switches of the generic kernels' -D options, as flag bits
 * (FC_* in fmsa_ocl_cpu_common.cl). */
static int fmsa_ocl_cpu_flags(const fmsa_problem *p) {
    int f = 0;
    if (p->window_left >= 0 || p->window_right >= 0) f |= 1;
    if (p->softcap > 0.0f) f |= 2;
    if (p->has_alibi) f |= 4;
    if (p->has_mask) f |= 8;
    if (p->is_varlen) f |= 16;
    if (p->is_paged) f |= 32;
    if (p->is_paged && p->has_seqused_k) f |= 64;
    if (p->has_lse) f |= 128;
    if (p->has_sinks) f |= 512;
    if (p->has_dlse) f |= 1024;
    return f;
}

/* cfg = (dtype, D, flags | extra, Dv); extra: FC_QSIDE (256) for the pack. */
static void fmsa_ocl_cpu_arg_cfg(fmsa_ocl_args *a, const fmsa_problem *p, int extra) {
    cl_int4 c;
    c.s[0] = (cl_int)p->dtype;
    c.s[1] = (cl_int)p->head_dim;
    c.s[2] = fmsa_ocl_cpu_flags(p) | extra;
    c.s[3] = (cl_int)p->head_dim_v;
    fmsa_ocl_arg(a, sizeof c, &c);
}

/* dims = (sq, sk, Hq, group), window, fp = (scale, scale * log2 e, softcap), cfg. */
static void fmsa_ocl_cpu_arg_dims(fmsa_ocl_args *a, const fmsa_problem *p) {
    fmsa_ocl_arg_dims(a, p);
    fmsa_ocl_cpu_arg_cfg(a, p, 0);
}

static void fmsa_ocl_cpu_arg_dimsonly(fmsa_ocl_args *a, const fmsa_problem *p) {
    fmsa_ocl_arg_long4(a, p->seqlen_q, p->seqlen_k, p->heads_q, p->heads_q / p->heads_kv);
}

/* Packs slots [slot0, slot0 + n) of two tensors into panels at float
 * offset off: key side (K, V: paging, seqused_k) or query side (Q, dO;
 * slots are then (sequence, query head), heads = Hq). */
static fmsa_status fmsa_ocl_cpu_pack(fmsa_ocl_state *st, cl_command_queue queue,
                                     const fmsa_problem *p, const fmsa_ocl_config *cfg,
                                     int qside, const fmsa_view4 *x, const fmsa_view4 *y,
                                     cl_mem ws, int64_t slot0, int64_t n, int64_t rows,
                                     int64_t off) {
    fmsa_ocl_args a = {st->cl, NULL, 0, CL_SUCCESS};
    const size_t e = fmsa_problem_elem_size(p);
    FMSA_TRY(fmsa_ocl_cpu_kernel(st, &cfg->cpu, FMSA_OCL_CPU_K_PACK, &a.kernel));
    fmsa_ocl_arg_view4(&a, x, e);
    fmsa_ocl_arg_view4(&a, y, e);
    fmsa_ocl_arg_mem(&a, ws);
    fmsa_ocl_arg_long4(&a, slot0, rows, qside ? p->heads_q : p->heads_kv, off);
    fmsa_ocl_arg_cu(&a, p);
    fmsa_ocl_arg_paged(&a, p);
    fmsa_ocl_cpu_arg_dimsonly(&a, p);
    fmsa_ocl_cpu_arg_cfg(&a, p, qside ? 256 : 0);
    return fmsa_ocl_enqueue(st, queue, &a, fmsa_ocl_cpu_names[FMSA_OCL_CPU_K_PACK],
                            fmsa_ocl_groups(rows, (int64_t)cfg->cpu.rows), (size_t)n, 1, 1);
}

fmsa_status fmsa_ocl_cpu_run_forward(fmsa_ocl_state *st, const fmsa_problem *p,
                                     const fmsa_ocl_config *cfg, cl_mem workspace,
                                     size_t workspace_bytes, cl_command_queue queue) {
    const size_t e = fmsa_problem_elem_size(p);
    fmsa_ocl_cpu_layout L;
    cl_long2 uv;
    FMSA_TRY(fmsa_ocl_check_workspace(cfg, workspace, workspace_bytes, "forward"));
    if (p->batch == 0 || p->seqlen_q == 0 || p->heads_q == 0) return FMSA_SUCCESS;
    fmsa_ocl_cpu_layout_make(p, &cfg->cpu, &L);
    for (int64_t slot0 = 0; slot0 < L.slots; slot0 += L.chunk) {
        const int64_t n = L.slots - slot0 < L.chunk ? L.slots - slot0 : L.chunk;
        fmsa_ocl_args a = {st->cl, NULL, 0, CL_SUCCESS};
        FMSA_TRY(fmsa_ocl_cpu_pack(st, queue, p, cfg, 0, &p->k, &p->v, workspace, slot0, n,
                                   L.rows_k, L.k_off));
        FMSA_TRY(fmsa_ocl_cpu_kernel(st, &cfg->cpu, FMSA_OCL_K_FORWARD, &a.kernel));
        fmsa_ocl_arg_view4(&a, &p->q, e);
        fmsa_ocl_arg_view4(&a, &p->o, e);
        fmsa_ocl_arg_viewn(&a, &p->lse, 4);
        fmsa_ocl_arg_alibi(&a, p);
        fmsa_ocl_arg_viewn(&a, &p->mask, 1);
        fmsa_ocl_arg_cu(&a, p);
        fmsa_ocl_arg_mem(&a, p->seqused_k.data);
        uv.s[0] = p->seqused_k.data ? p->seqused_k.byte_offset / 4 : 0;
        uv.s[1] = p->seqused_k.s0;
        fmsa_ocl_arg(&a, sizeof uv, &uv);
        fmsa_ocl_arg_mem(&a, workspace);
        fmsa_ocl_arg_long4(&a, slot0, L.rows_k, p->heads_kv, L.k_off);
        fmsa_ocl_cpu_arg_dims(&a, p);
        fmsa_ocl_arg_viewn(&a, &p->sinks, 4);
        FMSA_TRY(fmsa_ocl_enqueue(st, queue, &a, fmsa_ocl_cpu_names[FMSA_OCL_K_FORWARD],
                                  fmsa_ocl_groups(p->seqlen_q, (int64_t)cfg->cpu.rows),
                                  (size_t)(n * L.group), 1, 1));
    }
    return FMSA_SUCCESS;
}

/* The tail every backward kernel ends with. */
static void fmsa_ocl_cpu_arg_bwd_tail(fmsa_ocl_args *a, const fmsa_problem *p, cl_mem ws,
                                      int64_t slot0, int64_t rows, int64_t off,
                                      int64_t rows2, int64_t off2) {
    fmsa_ocl_arg_viewn(a, &p->lse, 4);
    fmsa_ocl_arg_mem(a, ws);
    fmsa_ocl_arg_long(a, p->total_q);
    fmsa_ocl_arg_alibi(a, p);
    fmsa_ocl_arg_viewn(a, &p->mask, 1);
    fmsa_ocl_arg_cu(a, p);
    fmsa_ocl_arg_long4(a, slot0, rows, p->heads_kv, off);
    fmsa_ocl_arg_long4(a, off2, rows2, 0, 0);
    fmsa_ocl_cpu_arg_dims(a, p);
}

fmsa_status fmsa_ocl_cpu_run_backward(fmsa_ocl_state *st, const fmsa_problem *p,
                                      const fmsa_ocl_config *cfg, cl_mem workspace,
                                      size_t workspace_bytes, cl_command_queue queue) {
    const size_t e = fmsa_problem_elem_size(p);
    const int64_t bq = p->is_varlen ? 1 : p->batch;
    fmsa_ocl_cpu_layout L;
    FMSA_TRY(fmsa_ocl_check_workspace(cfg, workspace, workspace_bytes, "backward"));
    if (p->batch == 0 || p->heads_q == 0) return FMSA_SUCCESS;
    fmsa_ocl_cpu_layout_make(p, &cfg->cpu, &L);
    {
        fmsa_ocl_args a = {st->cl, NULL, 0, CL_SUCCESS};
        FMSA_TRY(fmsa_ocl_cpu_kernel(st, &cfg->cpu, FMSA_OCL_K_BWD_PRE, &a.kernel));
        fmsa_ocl_arg_view4(&a, &p->o, e);
        fmsa_ocl_arg_view4(&a, &p->dout, e);
        fmsa_ocl_arg_mem(&a, workspace);
        fmsa_ocl_arg_long(&a, p->total_q);
        fmsa_ocl_arg_long(&a, p->heads_q);
        fmsa_ocl_cpu_arg_cfg(&a, p, 0);
        fmsa_ocl_arg_viewn(&a, &p->dlse, 4);
        FMSA_TRY(fmsa_ocl_enqueue(st, queue, &a, fmsa_ocl_cpu_names[FMSA_OCL_K_BWD_PRE],
                                  fmsa_ocl_groups(p->total_q, FMSA_OCL_CPU_PRE_ROWS),
                                  (size_t)p->heads_q, (size_t)bq, 1));
    }
    /* dsink from the preprocess's D - dlse (the workspace's first floats) */
    FMSA_TRY(fmsa_ocl_run_dsink(st, p, workspace, L.dsink_off, queue));
    for (int64_t slot0 = 0; slot0 < L.slots; slot0 += L.chunk) {
        const int64_t n = L.slots - slot0 < L.chunk ? L.slots - slot0 : L.chunk;
        FMSA_TRY(fmsa_ocl_cpu_pack(st, queue, p, cfg, 0, &p->k, &p->v, workspace, slot0, n,
                                   L.rows_k, L.k_off));
        FMSA_TRY(fmsa_ocl_cpu_pack(st, queue, p, cfg, 1, &p->q, &p->dout, workspace,
                                   slot0 * L.group, n * L.group, L.rows_q, L.q_off));
        {
            fmsa_ocl_args a = {st->cl, NULL, 0, CL_SUCCESS};
            FMSA_TRY(fmsa_ocl_cpu_kernel(st, &cfg->cpu, FMSA_OCL_K_BWD_DKDV, &a.kernel));
            fmsa_ocl_arg_view4(&a, &p->dk, e);
            fmsa_ocl_arg_view4(&a, &p->dv, e);
            fmsa_ocl_cpu_arg_bwd_tail(&a, p, workspace, slot0, L.rows_q, L.q_off, L.rows_k,
                                      L.k_off);
            FMSA_TRY(fmsa_ocl_enqueue(st, queue, &a, fmsa_ocl_cpu_names[FMSA_OCL_K_BWD_DKDV],
                                      fmsa_ocl_groups(p->seqlen_k, (int64_t)cfg->cpu.rows),
                                      (size_t)n, 1, 1));
        }
        {
            fmsa_ocl_args a = {st->cl, NULL, 0, CL_SUCCESS};
            FMSA_TRY(fmsa_ocl_cpu_kernel(st, &cfg->cpu, FMSA_OCL_K_BWD_DQ, &a.kernel));
            fmsa_ocl_arg_view4(&a, &p->dq, e);
            fmsa_ocl_cpu_arg_bwd_tail(&a, p, workspace, slot0, L.rows_k, L.k_off, L.rows_q,
                                      L.q_off);
            FMSA_TRY(fmsa_ocl_enqueue(st, queue, &a, fmsa_ocl_cpu_names[FMSA_OCL_K_BWD_DQ],
                                      fmsa_ocl_groups(p->seqlen_q, (int64_t)cfg->cpu.rows),
                                      (size_t)(n * L.group), 1, 1));
        }
    }
    return FMSA_SUCCESS;
}
