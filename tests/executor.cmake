# executor/: unit tests of its pure parts, and one integration test that runs
# a real trainyard-executor against the broker (TY_TEST_KAFKA_BOOTSTRAP).

foreach(m launch labels dedupe state tail proc classify)
  ty_add_test(executor_${m} unit/executor/test_${m}.c unit)
  target_link_libraries(test_executor_${m} PRIVATE ty_exec)
endforeach()

ty_add_test(executor integration/executor/test_executor.c integration)
target_link_libraries(test_executor PRIVATE ty_proto PkgConfig::CURL PkgConfig::RDKAFKA)
add_dependencies(test_executor trainyard-executor)
set(TY_EXECUTOR_TEST_ENV ${TY_INTEGRATION_ENV} "TY_EXECUTOR_BIN=$<TARGET_FILE:trainyard-executor>")
set_tests_properties(executor PROPERTIES ENVIRONMENT "${TY_EXECUTOR_TEST_ENV}" TIMEOUT 180)
