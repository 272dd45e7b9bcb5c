/*
 * int64 index math end to end: tensors whose element offsets pass 2^31 (and
 * 2^32) must give exactly the results of the same data laid out densely.
 *
 * A 48 GiB MAP_NORESERVE mapping holds q, k, v, o with batch strides above
 * 2^31 elements; only the touched pages are ever backed, so this runs on a
 * small machine.  Any 32-bit truncation of an offset reads or writes the
 * wrong page (a wrong result or a fault), so bit-identity with the dense run
 * is the check.  CPU backend only: the pointers are host memory.
 */
#define _DEFAULT_SOURCE /* MAP_ANONYMOUS, MAP_NORESERVE */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include <cmocka.h>

#include <math.h>

#include "flashmsa/flashmsa.h"

enum { B = 2, S = 48, H = 2, D = 32 };
/* batch stride in elements: past 2^31 so batch 1 needs 64-bit offsets */
#define BIG_SB ((int64_t)1 << 31) + 4096
#define ELEMS_DENSE ((size_t)B * S * H * D)

static float frand(unsigned *s) {
    *s = *s * 1664525u + 1013904223u;
    return (float)((*s >> 8) & 0xffff) / 32768.0f - 1.0f;
}

/* A strided [B, S, H, D] view at base + byte offset inside the big mapping. */
static fmsa_tensor big_view(char *map, int64_t byte_offset) {
    int64_t shape[4] = {B, S, H, D};
    fmsa_tensor t = fmsa_tensor_contiguous(map, FMSA_DTYPE_F32, 4, shape);
    t.byte_offset = byte_offset;
    t.strides[0] = BIG_SB;
    return t;
}

static float *big_at(char *map, int64_t byte_offset, int64_t b) {
    return (float *)(map + byte_offset) + b * (BIG_SB);
}

static void offsets_past_2_pow_31(void **state) {
    const int64_t shape[4] = {B, S, H, D}, lshape[3] = {B, H, S};
    const size_t per_batch = (size_t)S * H * D;
    /* each tensor spans (B-1)*BIG_SB + S*H*D elements (~8 GiB); four tensors,
     * each starting at its own 12 GiB slot, the last reaching past 2^32 * 4 bytes */
    const int64_t slot = (int64_t)12 << 30;
    const size_t map_bytes = (size_t)4 * (size_t)slot;
    char *map;
    float *dense[4], lse_dense[B * H * S], lse_big[B * H * S];
    fmsa_context *ctx;
    fmsa_tensor td[4], tb[4], tl_d, tl_b;
    fmsa_attention_desc desc = fmsa_attention_desc_init(D);
    unsigned seed = 11;
    (void)state;

    map = mmap(NULL, map_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
               -1, 0);
    if (map == MAP_FAILED) skip(); /* the address space is not available here */
    assert_int_equal(fmsa_context_create(FMSA_BACKEND_CPU, 0, &ctx), FMSA_SUCCESS);
    for (int t = 0; t < 4; ++t) {
        dense[t] = malloc(ELEMS_DENSE * sizeof(float));
        assert_non_null(dense[t]);
        td[t] = fmsa_tensor_contiguous(dense[t], FMSA_DTYPE_F32, 4, shape);
        tb[t] = big_view(map, (int64_t)t * slot + 64);
        for (int64_t b = 0; b < B; ++b)
            for (size_t i = 0; i < per_batch; ++i) {
                float x = t < 3 ? frand(&seed) : 0.0f;
                dense[t][b * per_batch + i] = x;
                /* O (t = 3) starts as NaN in the big view and 0 in the dense
                 * one, so the comparison below fails unless both are written */
                big_at(map, (int64_t)t * slot + 64, b)[i] = t < 3 ? x : NAN;
            }
    }
    for (int i = 0; i < B * H * S; ++i) lse_dense[i] = 0.0f, lse_big[i] = NAN;
    tl_d = fmsa_tensor_contiguous(lse_dense, FMSA_DTYPE_F32, 3, lshape);
    tl_b = fmsa_tensor_contiguous(lse_big, FMSA_DTYPE_F32, 3, lshape);
    desc.causal = 1;

    assert_int_equal(fmsa_forward(ctx, &desc, &td[0], &td[1], &td[2], &td[3], &tl_d, NULL, 0, NULL),
                     FMSA_SUCCESS);
    assert_int_equal(fmsa_forward(ctx, &desc, &tb[0], &tb[1], &tb[2], &tb[3], &tl_b, NULL, 0, NULL),
                     FMSA_SUCCESS);
    for (int64_t b = 0; b < B; ++b)
        assert_memory_equal(big_at(map, 3 * slot + 64, b), dense[3] + b * per_batch,
                            per_batch * sizeof(float));
    assert_memory_equal(lse_big, lse_dense, sizeof lse_big);

    for (int t = 0; t < 4; ++t) free(dense[t]);
    fmsa_context_destroy(ctx);
    munmap(map, map_bytes);
}

int main(void) {
    const struct CMUnitTest tests[] = {cmocka_unit_test(offsets_past_2_pow_31)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
