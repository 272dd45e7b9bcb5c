/*
 * The emulators' one runtime (fmsa_cuda_emu_bwd.cpp, fmsa_cuda_emu_bwd_f32.cpp,
 * fmsa_cuda_emu_fwd.cpp): the globals shadow/'s fmsa_cuda_mma.cuh declares, the
 * cooperative block scheduler and the grid launch.  Every thread of a block is a
 * ucontext; a warp collective (shuffle, vote, __syncwarp, ldmatrix, mma.sync) is
 * resolved once all 32 lanes have reached it, a block barrier once every live
 * thread waits at it (ORing __syncthreads_or's predicates over the block), and a
 * divergent warp, a barrier some threads exited before, or a deadlock stops the
 * run (EMU_EAGER=1: each collective as soon as its last thread arrives; 2: and
 * the threads in reverse order).
 * EMU_WGMMA adds the warpgroup collectives (fmsa_cuda_emu_wg.h), EMU_CP_ASYNC_DEFER
 * copies that land at their thread's wait.  Include it after the kernel files with
 * EMU_PARAMS defined as the kernels' parameter struct (fmsa_cuda_fwd_params or
 * fmsa_cuda_bwd_params).
 */
#ifndef FMSA_CUDA_EMU_SCHED_H
#define FMSA_CUDA_EMU_SCHED_H

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ucontext.h>

#ifndef EMU_PARAMS
#error "define EMU_PARAMS as the kernels' parameter struct before including fmsa_cuda_emu_sched.h"
#endif /* EMU_PARAMS */

alignas(128) unsigned char fmsa_smem[256 * 1024];
emu_u3 emu_tidx[EMU_MAXT];
int emu_cur;
emu_u3 blockIdx, blockDim, gridDim;
emu_slot emu_slots[EMU_MAXT];

typedef void (*kfn)(const EMU_PARAMS);
/// A kernel of the emulator's list, by its name in the library's module.
struct kent { const char *name; kfn fn; };

/// The kernel called name among the n entries of ks; a name the list lacks stops the run.
static kfn emu_find(const kent *ks, size_t n, const char *name) {
    for (size_t i = 0; i < n; ++i)
        if (!strcmp(ks[i].name, name)) return ks[i].fn;
    fprintf(stderr, "kernel %s not in the emulator\n", name);
    exit(2);
}

struct emu_thread { ucontext_t uc; int done, op; };
static emu_thread th[EMU_MAXT];
static ucontext_t sched;
static kfn g_fn;
static const EMU_PARAMS *g_p;
static char stacks[EMU_MAXT][128 * 1024];
/// Barriers the last runs passed, and those of them where __syncthreads_or voted 1.
static long long g_barriers, g_or_barriers;
void emu_yield(int op) { th[emu_cur].op = op; swapcontext(&th[emu_cur].uc, &sched); }
static void entry(int t) { g_fn(*g_p); th[t].done = 1; }
static unsigned short h16(unsigned addr, int col) {
    unsigned short v;
    memcpy(&v, fmsa_smem + addr + 2 * col, 2);
    return v;
}
/* double -> float toward zero: the truncating accumulation of the tf32 mma */
static double rz(double x) {
    float f = (float)x;
    if (std::fabs((double)f) > std::fabs(x)) f = std::nextafter(f, 0.0f);
    return f;
}

#ifdef EMU_CP_ASYNC_DEFER
#include <vector>
/* a copy in flight: its bytes as read at issue (global memory does not change during a kernel) */
struct emu_cp { unsigned dst; int size, group; unsigned char bytes[16]; };
static std::vector<emu_cp> cp_q[EMU_MAXT];
static int cp_committed[EMU_MAXT];
/* EMU_LATE=1: copies land at issue instead (with EMU_EAGER=3 the adversary of a
   stage released too early: the overwrite is there before its reader retires) */
static const int g_late = getenv("EMU_LATE") && atoi(getenv("EMU_LATE"));
void emu_cp_async(unsigned dst, const void *src, int src_bytes, int size) {
    emu_cp c;
    if (g_late) {
        if (dst + (unsigned)size > sizeof fmsa_smem) { fprintf(stderr, "cp.async past shared memory: %u\n", dst); exit(3); }
        memset(fmsa_smem + dst, 0, (size_t)size);
        if (src_bytes) memcpy(fmsa_smem + dst, src, (size_t)src_bytes);
        return;
    }
    c.dst = dst, c.size = size, c.group = cp_committed[emu_cur];
    memset(c.bytes, 0, sizeof c.bytes);
    if (src_bytes) memcpy(c.bytes, src, (size_t)src_bytes);
    if (dst + (unsigned)size > sizeof fmsa_smem) { fprintf(stderr, "cp.async past shared memory: %u\n", dst); exit(3); }
    cp_q[emu_cur].push_back(c);
}
void emu_cp_commit(void) { ++cp_committed[emu_cur]; }
/* retires every group of this thread but the newest n committed ones (uncommitted copies stay) */
void emu_cp_wait(int n) {
    std::vector<emu_cp> &q = cp_q[emu_cur], keep;
    for (const emu_cp &c : q) {
        if (c.group < cp_committed[emu_cur] - n) memcpy(fmsa_smem + c.dst, c.bytes, (size_t)c.size);
        else keep.push_back(c);
    }
    q.swap(keep);
}
#endif /* EMU_CP_ASYNC_DEFER */
#ifdef EMU_WGMMA
#include "fmsa_cuda_emu_wg.h"
#endif /* EMU_WGMMA */

/* One warp collective op of warp w, every lane's operands in emu_slots. */
static void resolve_warp(int w, int op) {
    emu_slot *s = &emu_slots[32 * w];
    if (op == OP_SHFL || op == OP_SHFLI) {
        float v[32];
        for (int l = 0; l < 32; ++l) v[l] = s[l].fv;
        for (int l = 0; l < 32; ++l) s[l].fv = v[op == OP_SHFL ? (l ^ s[l].mask) : (s[l].mask & 31)];
    } else if (op == OP_VOTE) {
        int all = 1;
        for (int l = 0; l < 32; ++l) all &= s[l].mask;
        for (int l = 0; l < 32; ++l) s[l].mask = all;
    } else if (op == OP_WSYNC) {
    } else if (op >= OP_LDM4 && op <= OP_LDM2T) {
        const int n = (op == OP_LDM4 || op == OP_LDM4T) ? 4 : 2, tr = (op == OP_LDM4T || op == OP_LDM2T);
        unsigned short m[4][8][8];
        for (int i = 0; i < n; ++i)
            for (int r = 0; r < 8; ++r) {
                const unsigned a = s[8 * i + r].addr;
                if (a % 16 || a + 16 > sizeof fmsa_smem) { fprintf(stderr, "ldmatrix bad addr %u\n", a); exit(3); }
                for (int c = 0; c < 8; ++c) m[i][r][c] = h16(a, c);
            }
        for (int l = 0; l < 32; ++l)
            for (int i = 0; i < n; ++i) {
                unsigned lo, hi;
                if (!tr) lo = m[i][l / 4][2 * (l % 4)], hi = m[i][l / 4][2 * (l % 4) + 1];
                else lo = m[i][2 * (l % 4)][l / 4], hi = m[i][2 * (l % 4) + 1][l / 4];
                s[l].r[i] = lo | (hi << 16);
            }
    } else if (op == OP_MMA1 || op == OP_MMA0) {
        float A[16][16], B[16][8], C[16][8];
        auto cv = [&](unsigned x, int hi) { unsigned short h = (unsigned short)(hi ? x >> 16 : x & 0xffff);
            return op == OP_MMA1 ? fmsa_half_to_float<1>(h) : fmsa_half_to_float<0>(h); };
        for (int l = 0; l < 32; ++l) {
            const int g = l / 4, t = l % 4;
            for (int e = 0; e < 2; ++e) {
                A[g][2 * t + e] = cv(s[l].a[0], e); A[g + 8][2 * t + e] = cv(s[l].a[1], e);
                A[g][2 * t + 8 + e] = cv(s[l].a[2], e); A[g + 8][2 * t + 8 + e] = cv(s[l].a[3], e);
                B[2 * t + e][g] = cv(s[l].b0, e); B[2 * t + 8 + e][g] = cv(s[l].b1, e);
                C[g][2 * t + e] = s[l].c[e]; C[g + 8][2 * t + e] = s[l].c[2 + e];
            }
        }
        for (int i = 0; i < 16; ++i)
            for (int j = 0; j < 8; ++j) {
                double acc = C[i][j];
                for (int k = 0; k < 16; ++k) acc += (double)A[i][k] * B[k][j];
                C[i][j] = (float)acc;
            }
        for (int l = 0; l < 32; ++l) {
            const int g = l / 4, t = l % 4;
            s[l].c[0] = C[g][2 * t]; s[l].c[1] = C[g][2 * t + 1]; s[l].c[2] = C[g + 8][2 * t]; s[l].c[3] = C[g + 8][2 * t + 1];
        }
    } else if (op == OP_MMATF32) {
        double A[16][8], B[8][8], C[16][8];
        auto tf = [](unsigned x) {
            if ((x & 0x1fffu) != 0) { fprintf(stderr, "mma input not tf32: %08x\n", x); exit(6); }
            return (double)__uint_as_float(x);
        };
        for (int l = 0; l < 32; ++l) {
            const int g = l / 4, t = l % 4;
            A[g][t] = tf(s[l].a[0]); A[g + 8][t] = tf(s[l].a[1]);
            A[g][t + 4] = tf(s[l].a[2]); A[g + 8][t + 4] = tf(s[l].a[3]);
            B[t][g] = tf(s[l].b0); B[t + 4][g] = tf(s[l].b1);
            C[g][2 * t] = s[l].c[0]; C[g][2 * t + 1] = s[l].c[1];
            C[g + 8][2 * t] = s[l].c[2]; C[g + 8][2 * t + 1] = s[l].c[3];
        }
        for (int i = 0; i < 16; ++i)
            for (int j = 0; j < 8; ++j) {
                double acc = C[i][j];
                for (int k = 0; k < 8; ++k) acc += A[i][k] * B[k][j]; /* tf32 products are exact */
                C[i][j] = rz(acc);
            }
        for (int l = 0; l < 32; ++l) {
            const int g = l / 4, t = l % 4;
            s[l].c[0] = C[g][2 * t]; s[l].c[1] = C[g][2 * t + 1]; s[l].c[2] = C[g + 8][2 * t]; s[l].c[3] = C[g + 8][2 * t + 1];
        }
    } else { fprintf(stderr, "op %d not emulated\n", op); exit(6); }
}

/* EMU_EAGER=1: a collective resolves as soon as its last thread reaches it,
 * before the threads after it in the block run, so a warpgroup can read
 * shared memory another warpgroup's copies have not reached yet (a missing
 * block barrier shows); 2: the same with the threads run from the last one
 * down, so computing warpgroups run ahead of a loader in warpgroup 0 as far
 * as their waits let them (a missing mbarrier wait shows); 3 (with
 * EMU_LATE=1): a wgmma wait retires only when no thread can run otherwise,
 * so a stage released before its product retired is overwritten first; by
 * default every runnable thread runs first, in order. */
static const int g_eager = getenv("EMU_EAGER") ? atoi(getenv("EMU_EAGER")) : 0;

/* bar.arrive: counts toward named barrier id's next release without waiting */
static int bar_arrived[16];
void fmsa_bar_arrive(int id, int threads) {
    (void)threads;
    if (id < 1 || id > 15) { fprintf(stderr, "bar.arrive %d\n", id); exit(7); }
    ++bar_arrived[id];
}

/* Resolves every warp collective, warpgroup collective and named barrier whose
 * threads have all reached it; 1 if any did. */
static int resolve_collectives(int nthr) {
    int progressed = 0;
    for (int w = 0; w < nthr / 32; ++w) {
        int op = -1, ok = 1, ndone = 0, waiting = 0;
        for (int l = 0; l < 32; ++l) {
            emu_thread *x = &th[32 * w + l];
            if (x->done) { ++ndone; continue; }
            waiting |= x->op == OP_NONE; /* a lane still to run (EMU_EAGER) */
            if (op < 0) op = x->op; else if (op != x->op) ok = 0;
        }
        if (ndone == 32 || waiting || op == OP_SYNC || op == OP_BAR || op == OP_WGMMA || op == OP_WGWAIT ||
            op == OP_MBAR)
            continue;
        if (!ok || ndone) { fprintf(stderr, "divergent warp %d (op %d, %d done)\n", w, op, ndone); exit(4); }
        resolve_warp(w, op);
        for (int l = 0; l < 32; ++l) th[32 * w + l].op = OP_NONE;
        progressed = 1;
    }
#ifdef EMU_WGMMA
    /* warpgroup collectives: products, and their waits (EMU_EAGER=3: only once nothing else moves) */
    progressed |= emu_wg_step(nthr, g_eager != 3);
#endif /* EMU_WGMMA */
    int at_bar[16] = {0}, bar_want[16] = {0}; /* named barriers (fmsa_bar_sync): `sv` threads at id */
    for (int t = 0; t < nthr; ++t)
        if (!th[t].done && th[t].op == OP_BAR && emu_slots[t].mask > 0 && emu_slots[t].mask < 16)
            ++at_bar[emu_slots[t].mask], bar_want[emu_slots[t].mask] = emu_slots[t].sv;
    for (int id = 1; id < 16; ++id) {
        const int n = at_bar[id], want = bar_want[id];
        if (n && n + bar_arrived[id] == want) {
            for (int t = 0; t < nthr; ++t)
                if (!th[t].done && th[t].op == OP_BAR && emu_slots[t].mask == id) th[t].op = OP_NONE;
            bar_arrived[id] = 0;
            progressed = 1;
        } else if (n && n + bar_arrived[id] > want) {
            fprintf(stderr, "named barrier %d: %d waiting + %d arrived > %d\n", id, n, bar_arrived[id], want);
            exit(7);
        }
    }
#ifdef EMU_WGMMA
    if (g_eager == 3 && !progressed) {
        int runnable = 0;
        for (int t = 0; t < nthr; ++t) runnable |= !th[t].done && th[t].op == OP_NONE;
        if (!runnable) progressed = emu_wg_step(nthr, 1);
    }
#endif /* EMU_WGMMA */
    return progressed;
}

/* Runs one block of nthr threads of fn on p to its end. */
static void run_block(kfn fn, const EMU_PARAMS *p, int nthr) {
    g_fn = fn, g_p = p;
    for (int t = 0; t < nthr; ++t) {
        th[t].done = 0, th[t].op = OP_NONE;
        emu_tidx[t] = emu_u3{(unsigned)t, 0, 0};
        getcontext(&th[t].uc);
        th[t].uc.uc_stack.ss_sp = stacks[t];
        th[t].uc.uc_stack.ss_size = sizeof stacks[t];
        th[t].uc.uc_link = &sched;
        makecontext(&th[t].uc, (void (*)())entry, 1, t);
    }
#ifdef EMU_CP_ASYNC_DEFER
    for (int t = 0; t < nthr; ++t) cp_q[t].clear(), cp_committed[t] = 0;
#endif /* EMU_CP_ASYNC_DEFER */
    memset(bar_arrived, 0, sizeof bar_arrived);
#ifdef EMU_WGMMA
    emu_wg_begin(nthr);
#endif /* EMU_WGMMA */
    for (;;) {
        int progressed = 0, live = 0;
        for (int k = 0; k < nthr; ++k) {
            const int t = g_eager == 2 ? nthr - 1 - k : k;
            if (!th[t].done && th[t].op == OP_NONE) {
                emu_cur = t;
                swapcontext(&sched, &th[t].uc);
                progressed = 1;
                if (g_eager) progressed |= resolve_collectives(nthr);
            }
        }
        progressed |= resolve_collectives(nthr);
        int all_sync = 1, any_done = 0;

        for (int t = 0; t < nthr; ++t) {
            if (th[t].done) any_done = 1;
            else { ++live; if (th[t].op != OP_SYNC) all_sync = 0; }
        }
        if (!live) break;
        if (all_sync) {
            if (any_done) { fprintf(stderr, "barrier with exited threads\n"); exit(7); }
            int any = 0;
            for (int t = 0; t < nthr; ++t) any |= emu_slots[t].sv;
            if (any) ++g_or_barriers;
            ++g_barriers;
            for (int t = 0; t < nthr; ++t) th[t].op = OP_NONE, emu_slots[t].sv = any;
            progressed = 1;
        }
        if (!progressed) { fprintf(stderr, "deadlock\n"); exit(5); }
    }
#ifdef EMU_CP_ASYNC_DEFER
    for (int t = 0; t < nthr; ++t)
        if (!cp_q[t].empty()) { fprintf(stderr, "thread %d exited with cp.async never waited\n", t); exit(8); }
#endif /* EMU_CP_ASYNC_DEFER */
    for (int id = 1; id < 16; ++id)
        if (bar_arrived[id]) { fprintf(stderr, "named barrier %d: %d arrivals never waited for\n", id, bar_arrived[id]); exit(7); }
#ifdef EMU_WGMMA
    emu_wg_end(nthr);
#endif /* EMU_WGMMA */
}

/* Runs fn's grid block by block in grid order (the deterministic backward's
 * tickets are taken in that order too); shared memory starts as garbage
 * before each block, so bytes a kernel does not write must not matter. */
static void emu_launch(kfn fn, const unsigned grid[3], unsigned threads, const EMU_PARAMS *p) {
    gridDim = emu_u3{grid[0], grid[1], grid[2]};
    blockDim = emu_u3{threads, 1, 1};
    for (unsigned z = 0; z < grid[2]; ++z)
        for (unsigned y = 0; y < grid[1]; ++y)
            for (unsigned x = 0; x < grid[0]; ++x) {
                blockIdx = emu_u3{x, y, z};
                memset(fmsa_smem, 0x7f, sizeof fmsa_smem);
                run_block(fn, p, (int)threads);
            }
}

#endif /* FMSA_CUDA_EMU_SCHED_H */
