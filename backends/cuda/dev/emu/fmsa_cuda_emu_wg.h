/*
 * The wgmma part of the emulators' runtime (included by fmsa_cuda_emu_sched.h
 * under EMU_WGMMA; the kernels' side is shadow/'s fmsa_cuda_wgmma.cuh).  A
 * product resolves once the 128 threads of its warpgroup reach it with the
 * same operands; its result waits in the warpgroup's list until a
 * wait_group retires its group, which recomputes it from the shared memory
 * of that moment (a difference: an operand overwritten in flight) and only
 * then writes the accumulators.  Operands in shared memory are read through
 * the descriptor as fmsa_cuda_wgmma.cuh documents it: 128-byte swizzle on the
 * address bits (bits 4-6 ^= bits 7-9), K-major element (row r, k) at start +
 * (r / 8) SBO + (r % 8) 128 + 2 k, MN-major element (mn, k) at start + (k / 8)
 * SBO + (k % 8) 128 + 2 (mn % 64) + (mn / 64) LBO.  mbarriers keep their
 * count, pending arrivals and phase; a wait blocks its thread until the
 * phase of its parity has completed; a phase left part-arrived at the end
 * of a block stops the run.
 */
#ifndef FMSA_CUDA_EMU_WG_H
#define FMSA_CUDA_EMU_WG_H

#include <vector>

emu_wg_slot emu_wg_slots[EMU_MAXT];
int emu_wg_open[EMU_MAXT], emu_wg_committed[EMU_MAXT];

/* one product of one warpgroup, in flight */
struct emu_wg_op {
    emu_wg_slot s; /* the uniform operands (thread 0's slot) */
    int group;
    float *d[128];
    unsigned a[128][4];
    float din[128][64], out[128][64];
};
static std::vector<emu_wg_op *> wg_ops[EMU_MAXT / 128];
/* products and waits the last runs resolved */
static long long g_wg_products, g_wg_waits;

static void emu_wg_fail(const char *what, int w) {
    fprintf(stderr, "wgmma: %s (warpgroup %d, block %u %u %u)\n", what, w, blockIdx.x, blockIdx.y, blockIdx.z);
    exit(9);
}

static float emu_wg_elem(unsigned long long desc, int mn, int k, int trans, int bf16, int w) {
    const unsigned start = (unsigned)(desc & 0x3fffu) << 4, lbo = (unsigned)((desc >> 16) & 0x3fffu) << 4,
                   sbo = (unsigned)((desc >> 32) & 0x3fffu) << 4;
    if ((desc >> 62) != 1u || ((desc >> 49) & 7u)) emu_wg_fail("descriptor is not 128-byte swizzle at base offset 0", w);
    unsigned a = trans ? start + (unsigned)(k >> 3) * sbo + (unsigned)(k & 7) * 128u + 2u * (unsigned)(mn & 63) +
                             (unsigned)(mn >> 6) * lbo
                       : start + (unsigned)(mn >> 3) * sbo + (unsigned)(mn & 7) * 128u + 2u * (unsigned)k;
    a ^= ((a >> 7) & 7u) << 4;
    if (a + 2 > sizeof fmsa_smem) emu_wg_fail("operand past shared memory", w);
    unsigned short h;
    memcpy(&h, fmsa_smem + a, 2);
    return bf16 ? fmsa_half_to_float<1>(h) : fmsa_half_to_float<0>(h);
}

/* out = A B + din (m64 nN k16) from the slot's operands and the current shared memory */
static void emu_wg_product(const emu_wg_op *op, float (*out)[64], int w) {
    const emu_wg_slot &s = op->s;
    static float A[64][16], B[16][128];
    for (int m = 0; m < 64; ++m)
        for (int k = 0; k < 16; ++k) A[m][k] = s.rs ? 0.0f : emu_wg_elem(s.da, m, k, s.ta, s.bf16, w);
    if (s.rs)
        for (int t = 0; t < 128; ++t) {
            const int r = 16 * (t / 32) + (t % 32) / 4, c = 2 * (t % 4);
            for (int e = 0; e < 2; ++e) {
                auto cv = [&](unsigned x) {
                    const unsigned short h = (unsigned short)(e ? x >> 16 : x & 0xffffu);
                    return s.bf16 ? fmsa_half_to_float<1>(h) : fmsa_half_to_float<0>(h);
                };
                A[r][c + e] = cv(op->a[t][0]), A[r + 8][c + e] = cv(op->a[t][1]);
                A[r][c + 8 + e] = cv(op->a[t][2]), A[r + 8][c + 8 + e] = cv(op->a[t][3]);
            }
        }
    for (int k = 0; k < 16; ++k)
        for (int n = 0; n < s.n; ++n) B[k][n] = emu_wg_elem(s.db, n, k, s.tb, s.bf16, w);
    for (int t = 0; t < 128; ++t) {
        const int r = 16 * (t / 32) + (t % 32) / 4, c = 2 * (t % 4);
        for (int i = 0; i < s.n / 2; ++i) {
            const int m = r + 8 * ((i >> 1) & 1), n = 8 * (i >> 2) + c + (i & 1);
            double acc = op->din[t][i];
            for (int k = 0; k < 16; ++k) acc += (double)A[m][k] * B[k][n];
            out[t][i] = (float)acc;
        }
    }
}

/* the block's mbarriers, by shared-memory address */
struct emu_mbar { unsigned addr, count, pending, phase; };
static std::vector<emu_mbar> mbars;
static emu_mbar *emu_mbar_at(unsigned addr) {
    for (emu_mbar &m : mbars)
        if (m.addr == addr) return &m;
    fprintf(stderr, "mbarrier at %u used before its init (block %u %u %u)\n", addr, blockIdx.x, blockIdx.y, blockIdx.z);
    exit(9);
}
void fmsa_mbar_init(unsigned addr, unsigned count) {
    if (addr % 8 || count == 0) { fprintf(stderr, "mbarrier init at %u, count %u\n", addr, count); exit(9); }
    for (emu_mbar &m : mbars)
        if (m.addr == addr) { m.count = m.pending = count, m.phase = 0; return; }
    mbars.push_back(emu_mbar{addr, count, count, 0});
}
/* one arrival; the last of a phase completes it and opens the next */
void fmsa_mbar_arrive(unsigned addr) {
    emu_mbar *m = emu_mbar_at(addr);
    if (--m->pending == 0) m->pending = m->count, ++m->phase;
}
/* a wait for the phase of parity p has completed once the current phase's parity differs */
static int emu_mbar_done(unsigned addr, unsigned parity) { return (emu_mbar_at(addr)->phase & 1u) != (parity & 1u); }

static void emu_wg_begin(int nthr) {
    for (int t = 0; t < nthr; ++t) emu_wg_open[t] = 0, emu_wg_committed[t] = 0;
    mbars.clear();
}
static void emu_wg_end(int nthr) {
    for (int w = 0; w < nthr / 128; ++w)
        if (!wg_ops[w].empty()) emu_wg_fail("products still in flight when the block ended", w);
    for (const emu_mbar &m : mbars)
        if (m.pending != m.count) {
            fprintf(stderr, "mbarrier at %u: a phase with %u of %u arrivals when the block ended\n", m.addr,
                    m.count - m.pending, m.count);
            exit(9);
        }
}

/* warpgroup w's 128 threads are all at OP_WGMMA: issue the product */
static void emu_wg_issue_op(int w) {
    emu_wg_op *op = new emu_wg_op;
    const emu_wg_slot *s0 = &emu_wg_slots[128 * w];
    op->s = *s0;
    op->group = emu_wg_committed[128 * w];
    for (int t = 0; t < 128; ++t) {
        const emu_wg_slot *s = &emu_wg_slots[128 * w + t];
        if (s->n != s0->n || s->rs != s0->rs || s->ta != s0->ta || s->tb != s0->tb || s->acc != s0->acc ||
            s->bf16 != s0->bf16 || s->da != s0->da || s->db != s0->db)
            emu_wg_fail("threads of one product disagree on its operands", w);
        if (emu_wg_committed[128 * w + t] != op->group) emu_wg_fail("threads disagree on the open group", w);
        op->d[t] = s->d;
        for (int i = 0; i < 4; ++i) op->a[t][i] = s->a[i];
        /* the accumulator in: the newest product in flight into the same registers, else the registers */
        const float *src = s->d;
        for (size_t j = wg_ops[w].size(); j-- > 0;)
            if (wg_ops[w][j]->d[t] == s->d) { src = wg_ops[w][j]->out[t]; break; }
        for (int i = 0; i < s->n / 2; ++i) op->din[t][i] = s->acc ? src[i] : 0.0f;
    }
    emu_wg_product(op, op->out, w);
    wg_ops[w].push_back(op);
    ++g_wg_products;
}

/* warpgroup w's 128 threads are all at OP_WGWAIT: retire all but the newest wait_n groups */
static void emu_wg_wait_op(int w) {
    const int n = emu_wg_slots[128 * w].wait_n, committed = emu_wg_committed[128 * w];
    static float again[128][64];
    for (int t = 0; t < 128; ++t)
        if (emu_wg_slots[128 * w + t].wait_n != n || emu_wg_committed[128 * w + t] != committed)
            emu_wg_fail("threads of one wait disagree", w);
    std::vector<emu_wg_op *> keep;
    for (emu_wg_op *op : wg_ops[w]) {
        if (op->group >= committed - n) { keep.push_back(op); continue; }
        emu_wg_product(op, again, w);
        for (int t = 0; t < 128; ++t)
            if (memcmp(again[t], op->out[t], sizeof(float) * (size_t)(op->s.n / 2)))
                emu_wg_fail("a shared-memory operand changed while its product was in flight", w);
        for (int t = 0; t < 128; ++t) memcpy(op->d[t], op->out[t], sizeof(float) * (size_t)(op->s.n / 2));
        delete op;
    }
    wg_ops[w].swap(keep);
    ++g_wg_waits;
}

/* resolves every warpgroup whose threads all wait at a product or a wait (with
   retire 0 only the products); 1 if any did */
static int emu_wg_step(int nthr, int retire) {
    int progressed = 0;
    for (int t = 0; t < nthr; ++t) /* mbarrier waits whose phase has completed */
        if (!th[t].done && th[t].op == OP_MBAR && emu_mbar_done(emu_wg_slots[t].mbar, emu_wg_slots[t].parity))
            th[t].op = OP_NONE, progressed = 1;
    for (int w = 0; w < nthr / 128; ++w) {
        const int op = th[128 * w].op;
        if (th[128 * w].done || (op != OP_WGMMA && op != OP_WGWAIT) || (op == OP_WGWAIT && !retire)) continue;
        int all = 1;
        for (int t = 0; t < 128; ++t) all &= !th[128 * w + t].done && th[128 * w + t].op == op;
        if (!all) continue;
        if (op == OP_WGMMA) emu_wg_issue_op(w);
        else emu_wg_wait_op(w);
        for (int t = 0; t < 128; ++t) th[128 * w + t].op = OP_NONE;
        progressed = 1;
    }
    return progressed;
}

#endif /* FMSA_CUDA_EMU_WG_H */
