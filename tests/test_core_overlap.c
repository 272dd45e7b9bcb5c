/*
 * The overlap test of common/validate_memory.c against brute force: random
 * small strided views (broadcast, repeated and interleaved strides, 1-, 2-
 * and 4-byte elements) are expanded byte by byte, and fmsa_mem_views_overlap
 * must agree exactly, for pairs and for a view against itself.  Exactness
 * matters both ways: a miss lets an output overwrite an input, a false alarm
 * refuses a valid packed layout.  Also the allocation-extent check through an
 * address backend's mem_range hook (CUDA's cuMemGetAddressRange), against a
 * fake allocation.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "common/error.h"
#include "common/validate_memory.h"

enum { SPACE = 4096, TRIALS = 200000 };

static uint32_t rng(uint32_t *s) {
    *s = *s * 1664525u + 1013904223u;
    return *s >> 8;
}

static void random_view(fmsa_mem_view *v, uint32_t *s) {
    static const int64_t elems[3] = {1, 2, 4};
    memset(v, 0, sizeof *v);
    v->elem = elems[rng(s) % 3];
    v->ndim = 1 + (int32_t)(rng(s) % 4);
    v->byte_offset = (int64_t)(rng(s) % 64);
    for (int32_t i = 0; i < v->ndim; ++i) {
        v->shape[i] = 1 + (int64_t)(rng(s) % 4);
        /* small strides, often repeated or 0, sometimes a dense-like one */
        v->strides[i] = rng(s) % 4 == 0 ? (int64_t)(1 << (2 * i)) : (int64_t)(rng(s) % 9);
    }
}

/* Marks v's bytes in `hit` (count of visits per byte); returns 1 when one
 * byte was reached twice (v overlaps itself). */
static int mark(const fmsa_mem_view *v, unsigned char *hit) {
    int64_t idx[FMSA_MAX_DIMS] = {0, 0, 0, 0}, count = 1;
    int twice = 0;
    for (int32_t i = 0; i < v->ndim; ++i) count *= v->shape[i];
    for (int64_t e = 0; e < count; ++e) {
        int64_t off = v->byte_offset, r = e;
        for (int32_t i = v->ndim - 1; i >= 0; --i) {
            idx[i] = r % v->shape[i];
            r /= v->shape[i];
            off += idx[i] * v->strides[i] * v->elem;
        }
        for (int64_t b = 0; b < v->elem; ++b)
            if (hit[off + b]++) twice = 1;
    }
    return twice;
}

static void pairs_and_self_match_brute_force(void **state) {
    static unsigned char ha[SPACE], hb[SPACE];
    uint32_t s = 12345;
    long overlaps = 0, selfs = 0;
    (void)state;
    for (int t = 0; t < TRIALS; ++t) {
        fmsa_mem_view a, b;
        int brute = 0, self;
        random_view(&a, &s);
        random_view(&b, &s);
        memset(ha, 0, sizeof ha);
        memset(hb, 0, sizeof hb);
        self = mark(&a, ha);
        mark(&b, hb);
        for (int i = 0; i < SPACE && !brute; ++i) brute = ha[i] && hb[i];
        overlaps += brute;
        selfs += self;
        if (fmsa_mem_views_overlap(&a, &b, b.byte_offset - a.byte_offset) != brute)
            fail_msg("trial %d: pair overlap %d, brute force %d", t, !brute, brute);
        if (fmsa_mem_views_overlap(&a, &a, 0) != self)
            fail_msg("trial %d: self overlap %d, brute force %d", t, !self, self);
    }
    /* both answers occur often enough for the comparison to mean something */
    assert_true(overlaps > TRIALS / 10 && overlaps < TRIALS * 9 / 10);
    assert_true(selfs > TRIALS / 10 && selfs < TRIALS * 9 / 10);
}

/* One fake allocation of 256 bytes at this array; any other address lies in none. */
static char alloc_bytes[512];
enum { ALLOC_BYTES = 256 };

static fmsa_status fake_range(void *state, uintptr_t addr, uintptr_t *base, size_t *bytes) {
    const uintptr_t b = (uintptr_t)alloc_bytes;
    (void)state;
    if (addr < b || addr >= b + ALLOC_BYTES)
        return fmsa_fail(FMSA_ERR_INVALID_ARGUMENT, "fake: no allocation");
    *base = b;
    *bytes = ALLOC_BYTES;
    return FMSA_SUCCESS;
}

static fmsa_mem_view view_1d(const char *name, int64_t byte_offset, int64_t n) {
    fmsa_mem_view v;
    memset(&v, 0, sizeof v);
    v.name = name;
    v.data = alloc_bytes;
    v.byte_offset = byte_offset;
    v.elem = 4;
    v.ndim = 1;
    v.shape[0] = n;
    v.strides[0] = 1;
    return v;
}

static void address_extent_through_mem_range(void **state) {
    const fmsa_mem_policy pol = {0, NULL, fake_range, NULL};
    fmsa_mem_view v = view_1d("q", 0, ALLOC_BYTES / 4);
    (void)state;
    assert_int_equal(fmsa_check_views_memory(&v, 1, &pol), FMSA_SUCCESS); /* exactly fills it */
    v = view_1d("q", 4, ALLOC_BYTES / 4);                                  /* one element past */
    assert_int_equal(fmsa_check_views_memory(&v, 1, &pol), FMSA_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(fmsa_last_error(), "q: the view reaches byte 256"));
    assert_non_null(strstr(fmsa_last_error(), "ends 252 bytes after"));
    v = view_1d("dv", ALLOC_BYTES, 1); /* origin outside the allocation */
    assert_int_equal(fmsa_check_views_memory(&v, 1, &pol), FMSA_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(fmsa_last_error(), "dv.data + byte_offset = "));
    assert_non_null(strstr(fmsa_last_error(), "fake: no allocation"));
    /* without the hook nothing is asked (the CPU backend) */
    {
        const fmsa_mem_policy none = {0, NULL, NULL, NULL};
        assert_int_equal(fmsa_check_views_memory(&v, 1, &none), FMSA_SUCCESS);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {cmocka_unit_test(pairs_and_self_match_brute_force),
                                       cmocka_unit_test(address_extent_through_mem_range)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
