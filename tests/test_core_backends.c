/*
 * The backend list (common/backend_list.h) and what is generated from it: the
 * names, the parser, the registry.  FMSA_TEST_BUILT_BACKENDS is the list of
 * backends the build turned on, as CMake's fmsa_add_backend recorded it
 * (";"-separated), so the registry's compile-time selection is checked
 * against the build's own decision rather than against itself.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "common/registry.h"

#ifndef FMSA_TEST_BUILT_BACKENDS
#error "FMSA_TEST_BUILT_BACKENDS must name the backends the build turned on"
#endif /* FMSA_TEST_BUILT_BACKENDS */

/// 1 when name is an entry of the ";"-separated list.
static int listed(const char *list, const char *name) {
    const size_t n = strlen(name);
    for (const char *p = list; *p;) {
        const char *end = strchr(p, ';');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        if (len == n && !strncmp(p, name, n)) return 1;
        p += len + (end ? 1 : 0);
    }
    return 0;
}

#define ENTRY_(ID, name) FMSA_BACKEND_##ID,
static const fmsa_backend list_entries[] = {FMSA_BACKEND_LIST(ENTRY_)};
#undef ENTRY_
#define NUM_ENTRIES (sizeof list_entries / sizeof list_entries[0])

/// Every public enum value is in the list once, and the list holds nothing else.
static void list_covers_the_enum(void **state) {
    static const fmsa_backend all[] = {FMSA_BACKEND_CPU, FMSA_BACKEND_CUDA, FMSA_BACKEND_HIP,
                                       FMSA_BACKEND_OPENCL};
    (void)state;
    assert_int_equal(NUM_ENTRIES, sizeof all / sizeof all[0]);
    for (size_t i = 0; i < sizeof all / sizeof all[0]; ++i) {
        int seen = 0;
        for (size_t j = 0; j < NUM_ENTRIES; ++j) seen += list_entries[j] == all[i];
        assert_int_equal(seen, 1);
    }
    assert_true(fmsa_backend_valid(FMSA_BACKEND_AUTO));
    assert_false(fmsa_backend_valid((fmsa_backend)99));
    assert_false(fmsa_backend_valid((fmsa_backend)-1));
}

/// Names round-trip through the parser; FMSA_BACKEND_NAMES lists each one.
static void names_round_trip(void **state) {
    fmsa_backend b = FMSA_BACKEND_CPU;
    (void)state;
    for (size_t j = 0; j < NUM_ENTRIES; ++j) {
        const char *name = fmsa_backend_name(list_entries[j]);
        char bar[32];
        assert_string_not_equal(name, "unknown");
        assert_int_equal(fmsa_backend_parse(name, &b), 0);
        assert_int_equal(b, list_entries[j]);
        snprintf(bar, sizeof bar, "|%s", name);
        assert_non_null(strstr(FMSA_BACKEND_NAMES, bar));
    }
    assert_int_equal(fmsa_backend_parse("auto", &b), 0);
    assert_int_equal(b, FMSA_BACKEND_AUTO);
    b = FMSA_BACKEND_CPU;
    assert_int_equal(fmsa_backend_parse("CPU", &b), -1);
    assert_int_equal(fmsa_backend_parse("", &b), -1);
    assert_int_equal(fmsa_backend_parse("opencl2", &b), -1);
    assert_int_equal(b, FMSA_BACKEND_CPU); /* untouched on failure */
    assert_string_equal(fmsa_backend_name((fmsa_backend)99), "unknown");
}

/// The registry holds exactly the backends CMake turned on, each under its
/// own kind and name.
static void registry_matches_the_build(void **state) {
    (void)state;
    assert_true(listed(FMSA_TEST_BUILT_BACKENDS, "cpu"));
    for (size_t j = 0; j < NUM_ENTRIES; ++j) {
        const fmsa_backend b = list_entries[j];
        const fmsa_backend_vtable *vt = fmsa_registry_find(b);
        const int built = listed(FMSA_TEST_BUILT_BACKENDS, fmsa_backend_name(b));
        assert_int_equal(vt != NULL, built);
        if (!vt) continue;
        assert_int_equal(vt->kind, b);
        assert_string_equal(vt->name, fmsa_backend_name(b));
        assert_int_equal(vt->api_version, FMSA_BACKEND_API_VERSION);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(list_covers_the_enum),
        cmocka_unit_test(names_round_trip),
        cmocka_unit_test(registry_matches_the_build),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
