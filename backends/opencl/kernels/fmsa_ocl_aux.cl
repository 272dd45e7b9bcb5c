/*
 * The OpenCL backend's small kernels that both kernel families share: the
 * sink gradient's two deterministic reduction stages and fmsa_merge_states.
 * One program (no -D specialisation: dtypes are arguments), built once per
 * context, so neither family's program changes for them and a CPU device
 * compiles them once.
 *
 * dsink_h = -sum_{b,i} exp(t_h - lse_i) (D_i - dlse_i): the backward's
 * preprocess leaves D_i - dlse_i in the workspace (ws), stage 1 sums a chunk
 * of FMSA_OCL_DSINK_ROWS rows of one (sequence, head) in row order into a
 * partial, stage 2 sums one head's partials in (sequence, chunk) order: the
 * same additions in the same order on every run, no atomics.
 */

/* Rows per stage-1 work-item (ocl_aux.c sizes the partials with the same). */
#define FMSA_OCL_DSINK_ROWS 128

/* Stage 1.  Global size (ceil(seqlen_q / ROWS), Hq, batch); part[(h * batch +
 * b) * nchunk + c].  ws row of query row i: (q_batch * Hq + h) * ws_rows +
 * q_row0 + i, as the backward kernels read it.  dims = (seqlen_q, seqlen_k,
 * Hq, varlen); tv = (sinks offset, head stride, -, -). */
__kernel void fmsa_ocl_dsink_partial(__global const float *lse, long4 lv,
                                     __global const float *ws, long ws_rows,
                                     __global const int *cuq, __global const int *cuk, long4 cv,
                                     __global const float *sinks, long4 tv, __global float *part,
                                     long part_off, long4 dims) {
    const long c = get_global_id(0), h = get_global_id(1), b = get_global_id(2);
    const long nchunk = get_global_size(0), batch = get_global_size(2);
    const fmsa_seq s = fmsa_ocl_seq(b, dims, dims.w != 0, 0, 0, cuq, cuk, cv,
                                    (__global const int *)0, (long2)(0));
    const float t = sinks[tv.x + h * tv.y];
    const long i_end = min(s.sq, (c + 1) * FMSA_OCL_DSINK_ROWS);
    float sum = 0.0f;
    /* t = -inf: the sink has no weight (and exp(-inf - -inf) must not be formed) */
    if (t != -INFINITY)
        for (long i = c * FMSA_OCL_DSINK_ROWS; i < i_end; ++i) {
            const float l = lse[fmsa_ocl_lse_row(lv, &s, i, h)];
            const float dd = ws[(s.q_batch * dims.z + h) * ws_rows + s.q_row0 + i];
            sum = fma(exp(t - l), dd, sum);
        }
    part[part_off + (h * batch + b) * nchunk + c] = sum;
}

/* Stage 2.  Global size (Hq); dsink[dv.x + h * dv.y] = -(sum of head h's
 * batch * nchunk partials in order). */
__kernel void fmsa_ocl_dsink_sum(__global const float *part, long part_off, long count,
                                 __global float *dsink, long4 dv) {
    const long h = get_global_id(0);
    __global const float *p = part + part_off + h * count;
    float sum = 0.0f;
    for (long x = 0; x < count; ++x) sum += p[x];
    dsink[dv.x + h * dv.y] = -sum;
}

/* One element of a dtype buffer (1 f32, 2 f16, 3 bf16) as fp32. */
inline float fmsa_ocl_aux_load(__global const uchar *p, int dtype, long i) {
    if (dtype == 1) return ((__global const float *)p)[i];
    if (dtype == 2) return vload_half(i, (__global const half *)p);
    return as_float((uint)((__global const ushort *)p)[i] << 16);
}

/* fp32 -> dtype, round to nearest even (bf16: NaN stays a quiet NaN). */
inline void fmsa_ocl_aux_store(__global uchar *p, int dtype, long i, float x) {
    if (dtype == 1) {
        ((__global float *)p)[i] = x;
    } else if (dtype == 2) {
        vstore_half_rte(x, i, (__global half *)p);
    } else {
        const uint u = as_uint(x);
        const uint r = isnan(x) ? ((u >> 16) | 0x40u) : ((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
        ((__global ushort *)p)[i] = (ushort)r;
    }
}

/* fmsa_merge_states: work-item (i, h, b) merges one row with
 * fmsa_softmax_merge_lse.  A weight-0 side (lse = -inf) is skipped, never
 * multiplied (its row may hold anything).  Each element is read from both
 * sides before it is written, so o may be o_a or o_b (in place).
 * dt = (dtype a, dtype b, dtype o, Dv). */
__kernel void fmsa_ocl_merge(__global const uchar *oa, long4 av, __global const uchar *ob,
                             long4 bv, __global uchar *o, long4 ov, __global const float *la,
                             long4 lav, __global const float *lb, long4 lbv, __global float *lo,
                             long4 lov, int4 dt) {
    const long i = get_global_id(0), h = get_global_id(1), b = get_global_id(2);
    const long ia = av.x + b * av.y + i * av.z + h * av.w;
    const long ib = bv.x + b * bv.y + i * bv.z + h * bv.w;
    const long io = ov.x + b * ov.y + i * ov.z + h * ov.w;
    float wa, wb;
    const float lse = fmsa_softmax_merge_lse(la[lav.x + b * lav.y + h * lav.z + i * lav.w],
                                             lb[lbv.x + b * lbv.y + h * lbv.z + i * lbv.w],
                                             &wa, &wb);
    for (int d = 0; d < dt.w; ++d) {
        const float x = wa != 0.0f ? wa * fmsa_ocl_aux_load(oa, dt.x, ia + d) : 0.0f;
        const float y = wb != 0.0f ? wb * fmsa_ocl_aux_load(ob, dt.y, ib + d) : 0.0f;
        fmsa_ocl_aux_store(o, dt.z, io + d, x + y);
    }
    lo[lov.x + b * lov.y + h * lov.z + i * lov.w] = lse;
}

/* The ring's elementwise op (common/accumulate.h): work-item n is element n of
 * a 4-d view in row-major order.  dv, sv: element offsets; ds, ss: strides;
 * sh = (-, n1, n2, n3); mt = (mode 0 copy / 1 add / 2 fill / 3 add fill * src, dst dtype, src
 * dtype, -).  Each element is read and written by its own work-item only. */
__kernel void fmsa_ocl_accumulate(__global uchar *d, long dv, long4 ds, __global const uchar *s,
                                  long sv, long4 ss, long4 sh, int4 mt, float fill) {
    const long n = get_global_id(0);
    const long e = n % sh.w, c = (n / sh.w) % sh.z, b = (n / (sh.w * sh.z)) % sh.y,
               a = n / (sh.w * sh.z * sh.y);
    const long di = dv + a * ds.x + b * ds.y + c * ds.z + e * ds.w;
    const long si = sv + a * ss.x + b * ss.y + c * ss.z + e * ss.w;
    float x;
    if (mt.x == 0 && mt.y == mt.z) { /* equal dtypes: the bits move as they are */
        if (mt.y == 1) ((__global float *)d)[di] = ((__global const float *)s)[si];
        else ((__global ushort *)d)[di] = ((__global const ushort *)s)[si];
        return;
    }
    x = mt.x == 2 ? fill : fmsa_ocl_aux_load(s, mt.z, si);
    if (mt.x == 3) x = fma(x, fill, fmsa_ocl_aux_load(d, mt.y, di)); /* one rounding */
    if (mt.x == 1) x += fmsa_ocl_aux_load(d, mt.y, di);
    fmsa_ocl_aux_store(d, mt.y, di, x);
}
