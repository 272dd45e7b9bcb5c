# tests of group api
fmsa_add_test(test_api_bad_input LABELS api cpu SOURCES test_api_bad_input.c)
