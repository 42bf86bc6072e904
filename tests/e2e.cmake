# End-to-end: the whole stack with real processes, a private broker per program.
set(TY_E2E_ENV ${TY_INTEGRATION_ENV})
list(APPEND TY_E2E_ENV "TY_SCHEDULER_BIN=$<TARGET_FILE:trainyard-scheduler>"
     "TY_EXECUTOR_BIN=$<TARGET_FILE:trainyard-executor>"
     "TY_BROKER_BIN=$<TARGET_FILE:trainyard-broker>"
     # workloads (workers, examples) that jobs run: e2e_bin_path, e2e_source_path
     "TY_BIN_DIR=$<TARGET_FILE_DIR:trainyard-executor>" "TY_SOURCE_DIR=${PROJECT_SOURCE_DIR}")
add_library(ty_e2e STATIC e2e/e2e.c e2e/netns.c)
target_link_libraries(ty_e2e PUBLIC ty_test_harness)
target_include_directories(ty_e2e PUBLIC ${CMAKE_CURRENT_SOURCE_DIR}/e2e)
file(GLOB TY_E2E_TESTS CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/e2e/test_e2e_*.c)
foreach(src ${TY_E2E_TESTS})
  get_filename_component(base ${src} NAME_WE)
  string(REGEX REPLACE "^test_" "" name ${base})
  add_executable(test_${name} ${src})
  target_link_libraries(test_${name} PRIVATE ty_e2e ty_proto)
  add_dependencies(test_${name} trainyard-api trainyard-scheduler trainyard-executor trainyard-broker)
  add_test(NAME ${name} COMMAND test_${name})
  set_tests_properties(${name} PROPERTIES LABELS e2e TIMEOUT 600 ENVIRONMENT "${TY_E2E_ENV}")
endforeach()
# the stack for tests in other languages (tests/e2e/stack.c); not a test itself
add_executable(ty_e2e_stack e2e/stack.c)
target_link_libraries(ty_e2e_stack PRIVATE ty_e2e ty_proto)
add_dependencies(ty_e2e_stack trainyard-api trainyard-scheduler trainyard-executor trainyard-broker)
# jobs of e2e_netns run the reference worker; e2e_failures its node check (preflight)
foreach(t test_e2e_netns test_e2e_failures)
  if(TARGET ${t} AND TARGET trainyard-allreduce)
    add_dependencies(${t} trainyard-allreduce)
  endif()
endforeach()
# e2e_health's executors take their GPUs from the stand-in libnvidia-ml
if(TARGET test_e2e_health)
  add_dependencies(test_e2e_health fake_nvml)
  set_tests_properties(e2e_health PROPERTIES ENVIRONMENT
    "${TY_E2E_ENV};TY_FAKE_NVML=$<TARGET_FILE:fake_nvml>")
endif()
# it restarts the shared PostgreSQL: nothing else may run meanwhile
if(TEST e2e_faults)
  set_tests_properties(e2e_faults PROPERTIES RUN_SERIAL TRUE)
endif()
# e2e_spot serves a fake cloud metadata endpoint itself
if(TARGET test_e2e_spot)
  target_link_libraries(test_e2e_spot PRIVATE PkgConfig::MHD)
endif()
# the launcher itself: up, usable, and down again
add_test(NAME e2e_stack COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/e2e/stack_test.sh)
set_tests_properties(e2e_stack PROPERTIES LABELS e2e TIMEOUT 300
  ENVIRONMENT "${TY_E2E_ENV};TY_STACK_BIN=$<TARGET_FILE:ty_e2e_stack>")
# e2e_estimate runs jobctl submit --what-if
if(TARGET test_e2e_estimate)
  add_dependencies(test_e2e_estimate jobctl)
endif()
