/*
 * libFuzzer harness over the public API (issue 18): one input = one call of
 * fmsa_workspace_size and fmsa_forward, and for half the inputs fmsa_backward
 * on the forward's outputs, with every descriptor decoded from the input's
 * bytes (fuzz_decode.c: dtype, shapes, strides, offsets, features,
 * metadata).  Built with -fsanitize=fuzzer,address,undefined
 * (tests/fuzz/run.sh), so an out-of-view read or write, UB or a leak is a
 * crash.  Besides the sanitizers, the harness asserts the API's promises:
 *
 *   - a status is one of fmsa_status's values, and a failed call leaves a
 *     message and every output byte as it was (the header's "nothing written");
 *   - a successful pass writes every element of its views (outputs are
 *     poisoned with NaN first) and, as the inputs are finite and moderate,
 *     every value it writes is finite (LSE may be -inf: a row with no key);
 *   - a deterministic backward run twice is bit-identical.
 *
 * Every tensor is its own host allocation sized exactly to the bytes its
 * view can reach, so ASan's redzones sit right after each view.
 */
#define _POSIX_C_SOURCE 200809L /* setenv */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/fuzz/fuzz_decode.h"

/* The harness's own check: libFuzzer reports a trap as a crash with the input. */
#define FUZZ_ASSERT(cond, ...)                                                     \
    do {                                                                           \
        if (!(cond)) {                                                             \
            fprintf(stderr, "fuzz_api: %s:%d: ", __FILE__, __LINE__);              \
            fprintf(stderr, __VA_ARGS__);                                          \
            fprintf(stderr, "\n");                                                 \
            __builtin_trap();                                                      \
        }                                                                          \
    } while (0)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv);

/* The CPU backend reads FLASHMSA_CPU_BWD / FLASHMSA_CPU_TILES when a context is
 * created, so each setting the decoder can ask for has its own context, made
 * on first use and kept (creating one per input would spend most of the time
 * on the device query).  Context create/destroy is still fuzzed: one input in
 * FUZZ_FRESH_CONTEXT_EVERY uses a context of its own. */
#define FUZZ_FRESH_CONTEXT_EVERY 64
static fmsa_context *fuzz_ctx[FUZZ_ENV_COUNT];
static unsigned long fuzz_inputs;
/* FMSA_FUZZ_VERBOSE=1: one line per call, to see what an input exercises. */
static int fuzz_verbose;

/* Every tensor a pass only reads; O and LSE are inputs of the backward too. */
static const int fuzz_inputs_fwd[] = {FUZZ_Q,     FUZZ_K,     FUZZ_V,    FUZZ_DOUT,
                                      FUZZ_MASK,  FUZZ_ALIBI, FUZZ_CU_Q, FUZZ_CU_K,
                                      FUZZ_TABLE, FUZZ_USED};
static const int fuzz_inputs_bwd[] = {FUZZ_Q,     FUZZ_K,     FUZZ_V,     FUZZ_DOUT,
                                      FUZZ_MASK,  FUZZ_ALIBI, FUZZ_CU_Q,  FUZZ_CU_K,
                                      FUZZ_TABLE, FUZZ_USED,  FUZZ_O,     FUZZ_LSE};
#define FUZZ_N(a) ((int)(sizeof(a) / sizeof((a)[0])))

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc;
    (void)argv;
    /* unwritten internal buffers read as NaN, which the output checks catch */
    setenv("FLASHMSA_CPU_POISON", "1", 1);
    fuzz_verbose = getenv("FMSA_FUZZ_VERBOSE") && *getenv("FMSA_FUZZ_VERBOSE") == '1';
    return 0;
}

static fmsa_context *fuzz_context(int env, int fresh) {
    fmsa_context *ctx = NULL;
    if (!fresh && fuzz_ctx[env]) return fuzz_ctx[env];
    fuzz_env_apply(env);
    FUZZ_ASSERT(fmsa_context_create(FMSA_BACKEND_CPU, 0, &ctx) == FMSA_SUCCESS,
                "fmsa_context_create (env %d): %s", env, fmsa_last_error());
    if (!fresh) fuzz_ctx[env] = ctx;
    return ctx;
}

static void fuzz_check_status(fmsa_status st, const char *call) {
    if (fuzz_verbose)
        fprintf(stderr, "fuzz_api: %s -> %s%s%s\n", call, fmsa_status_string(st),
                st ? ": " : "", st ? fmsa_last_error() : "");
    FUZZ_ASSERT(st >= FMSA_SUCCESS && st <= FMSA_ERR_INTERNAL, "%s returned %d", call, (int)st);
    FUZZ_ASSERT(st != FMSA_ERR_INTERNAL, "%s: internal error: %s", call, fmsa_last_error());
    if (st != FMSA_SUCCESS)
        FUZZ_ASSERT(fmsa_last_error()[0] != '\0', "%s failed (%d) without a message", call,
                    (int)st);
}

/* Every byte of the listed buffers equals the snapshot taken before the call. */
static void fuzz_check_untouched(const fuzz_call *c, const int *which, int n, const char *call) {
    for (int i = 0; i < n; ++i) {
        const fuzz_buf *b = &c->buf[which[i]];
        size_t at = 0;
        if (!b->mem || memcmp(b->mem, b->snap, b->bytes) == 0) continue;
        while (b->mem[at] == b->snap[at]) ++at;
        FUZZ_ASSERT(0, "%s: %s changed: byte %zu of %zu was 0x%02x, is 0x%02x (last error: \"%s\")",
                    call, fuzz_tensor_name(which[i]), at, b->bytes, b->snap[at], b->mem[at],
                    fmsa_last_error());
    }
}

/* Every element of view t is finite (-inf allowed where lse_like). */
static void fuzz_check_finite(const fuzz_call *c, int which, const char *call) {
    const fmsa_tensor *t = &c->t[which];
    const int lse_like = which == FUZZ_LSE;
    int64_t count = 1;
    for (int i = 0; i < t->ndim; ++i) count *= t->shape[i];
    for (int64_t e = 0; e < count; ++e) {
        float v = fuzz_load(t, fuzz_element_offset(t, e));
        FUZZ_ASSERT(isfinite(v) || (lse_like && v == -INFINITY),
                    "%s succeeded but %s element %lld is %g (unwritten or overflowed)", call,
                    fuzz_tensor_name(which), (long long)e, (double)v);
    }
}

static void fuzz_forward(fuzz_call *c, fmsa_context *ctx) {
    static const int outs[] = {FUZZ_O, FUZZ_LSE};
    size_t ws = 0;
    fmsa_status st = fmsa_workspace_size(ctx, FMSA_PASS_FORWARD, &c->desc, &c->t[FUZZ_Q],
                                         &c->t[FUZZ_K], &c->t[FUZZ_V], &ws);
    fuzz_check_status(st, "fmsa_workspace_size(forward)");
    fuzz_workspace(c, st == FMSA_SUCCESS ? ws : 0);
    fuzz_poison(c, outs, 2);
    st = fmsa_forward(ctx, &c->desc, &c->t[FUZZ_Q], &c->t[FUZZ_K], &c->t[FUZZ_V], &c->t[FUZZ_O],
                      c->lse_given ? &c->t[FUZZ_LSE] : NULL, c->ws, c->ws_bytes, NULL);
    fuzz_check_status(st, "fmsa_forward");
    fuzz_check_untouched(c, fuzz_inputs_fwd, FUZZ_N(fuzz_inputs_fwd), "fmsa_forward (an input)");
    if (st == FMSA_SUCCESS && c->ws_bytes < ws)
        FUZZ_ASSERT(0, "fmsa_forward ran on %zu workspace bytes, %zu asked", c->ws_bytes, ws);
    c->forward_ok = st == FMSA_SUCCESS;
    if (st != FMSA_SUCCESS) {
        fuzz_check_untouched(c, outs, 2, "fmsa_forward failed");
        return;
    }
    FUZZ_ASSERT(fmsa_synchronize(ctx, NULL) == FMSA_SUCCESS, "fmsa_synchronize");
    if (c->inputs_tame) {
        fuzz_check_finite(c, FUZZ_O, "fmsa_forward");
        if (c->lse_given && c->t[FUZZ_LSE].data) fuzz_check_finite(c, FUZZ_LSE, "fmsa_forward");
    }
}

/* The backward's tensor struct of the decoded call; lse absent unless given. */
static fmsa_backward_tensors fuzz_bwd_tensors(const fuzz_call *c, int with_lse) {
    fmsa_backward_tensors bt = {0};
    bt.q = c->t[FUZZ_Q];
    bt.k = c->t[FUZZ_K];
    bt.v = c->t[FUZZ_V];
    bt.o = c->t[FUZZ_O];
    bt.dout = c->t[FUZZ_DOUT];
    if (with_lse) bt.lse = c->t[FUZZ_LSE];
    bt.dq = c->t[FUZZ_DQ];
    bt.dk = c->t[FUZZ_DK];
    bt.dv = c->t[FUZZ_DV];
    return bt;
}

static void fuzz_backward(fuzz_call *c, fmsa_context *ctx) {
    static const int outs[] = {FUZZ_DQ, FUZZ_DK, FUZZ_DV};
    fmsa_backward_tensors bt;
    size_t ws = 0;
    fmsa_status st = fmsa_workspace_size(ctx, FMSA_PASS_BACKWARD, &c->desc, &c->t[FUZZ_Q],
                                         &c->t[FUZZ_K], &c->t[FUZZ_V], &ws);
    fuzz_check_status(st, "fmsa_workspace_size(backward)");
    fuzz_workspace(c, st == FMSA_SUCCESS ? ws : 0);
    fuzz_poison(c, outs, 3);
    fuzz_snapshot(c, fuzz_inputs_bwd, FUZZ_N(fuzz_inputs_bwd));
    bt = fuzz_bwd_tensors(c, c->lse_given);
    st = fmsa_backward(ctx, &c->desc, &bt, c->ws, c->ws_bytes, NULL);
    fuzz_check_status(st, "fmsa_backward");
    fuzz_check_untouched(c, fuzz_inputs_bwd, FUZZ_N(fuzz_inputs_bwd), "fmsa_backward (an input)");
    if (st != FMSA_SUCCESS) {
        fuzz_check_untouched(c, outs, 3, "fmsa_backward failed");
        return;
    }
    FUZZ_ASSERT(c->ws_bytes >= ws, "fmsa_backward ran on %zu workspace bytes, %zu asked",
                c->ws_bytes, ws);
    FUZZ_ASSERT(fmsa_synchronize(ctx, NULL) == FMSA_SUCCESS, "fmsa_synchronize");
    /* O and LSE are the forward's only when it ran on these very views */
    if (!c->inputs_tame || !c->forward_ok) return;
    for (int i = 0; i < 3; ++i) fuzz_check_finite(c, outs[i], "fmsa_backward");
    if (c->desc.deterministic) {
        fuzz_snapshot(c, outs, 3);
        fuzz_fill_nan(c, outs, 3);
        bt = fuzz_bwd_tensors(c, 1);
        st = fmsa_backward(ctx, &c->desc, &bt, c->ws, c->ws_bytes, NULL);
        FUZZ_ASSERT(st == FMSA_SUCCESS, "deterministic backward: second run failed: %s",
                    fmsa_last_error());
        fuzz_check_untouched(c, outs, 3, "deterministic backward (second run differs)");
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    fuzz_call c;
    fmsa_context *ctx;
    int fresh;
    if (fuzz_decode(data, size, &c) != 0) return 0;
    fuzz_snapshot(&c, fuzz_inputs_fwd, FUZZ_N(fuzz_inputs_fwd));
    fresh = (++fuzz_inputs % FUZZ_FRESH_CONTEXT_EVERY) == 0;
    ctx = fuzz_context(c.env, fresh);
    fuzz_forward(&c, ctx);
    if (c.backward) fuzz_backward(&c, ctx);
    /* FUZZ_HOOK_MERGE: the split-KV / ring LSE merge call (issue 16) goes
     * here once the API has it: merge two partial (O, LSE) pairs of this
     * problem decoded from the same input, with the same promises. */
    fuzz_release(&c);
    if (fresh) fmsa_context_destroy(ctx);
    return 0;
}
