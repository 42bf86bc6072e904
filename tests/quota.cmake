# Quota tests (included by tests/CMakeLists.txt): unit, the pure arithmetic in quota/.

ty_add_test(quota unit/quota/test_quota.c unit)
target_link_libraries(test_quota PRIVATE ty_quota)
