# Fault scenarios (issue 9, tests/faults/README.md): the end-to-end stack under
# broker, PostgreSQL, executor and network faults, checked by one invariant
# checker (faults/invariants.h) that other suites (the crash points, the soak)
# link too.
add_library(ty_faults STATIC faults/invariants.c)
target_link_libraries(ty_faults PUBLIC ty_e2e)
target_include_directories(ty_faults PUBLIC ${CMAKE_CURRENT_SOURCE_DIR}/faults)
# the checker's pure part, table-tested
ty_add_test(faults_invariants faults/test_invariants.c unit)
target_link_libraries(test_faults_invariants PRIVATE ty_faults)
file(GLOB TY_FAULTS_TESTS CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/faults/test_faults_*.c)
# the leader's suite has its own registration (faults-leader.cmake)
list(FILTER TY_FAULTS_TESTS EXCLUDE REGEX "/test_faults_leader\\.c$")
foreach(src ${TY_FAULTS_TESTS})
  get_filename_component(base ${src} NAME_WE)
  string(REGEX REPLACE "^test_" "" name ${base})
  add_executable(test_${name} ${src})
  target_link_libraries(test_${name} PRIVATE ty_faults ty_proto)
  add_dependencies(test_${name} trainyard-api trainyard-scheduler trainyard-executor trainyard-broker)
  add_test(NAME ${name} COMMAND test_${name})
  set_tests_properties(${name} PROPERTIES LABELS e2e TIMEOUT 600 ENVIRONMENT "${TY_E2E_ENV}")
endforeach()
# it stops the shared PostgreSQL: nothing else may run meanwhile
if(TEST faults_postgres)
  set_tests_properties(faults_postgres PROPERTIES RUN_SERIAL TRUE)
endif()
# trainyard-broker's fault-injection line protocol
ty_add_test(faults_broker_control faults/test_broker_control.c unit)
target_link_libraries(test_faults_broker_control PRIVATE ty_broker_control)
