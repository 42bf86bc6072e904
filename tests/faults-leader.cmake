# Fault suites of the scheduler leader (tests/faults/README.md): crash points
# inside a cycle, random leader kills, and the soak. They share the e2e stack.
add_library(ty_faults_checks STATIC faults/soak_checks.c)
target_link_libraries(ty_faults_checks PUBLIC ty_e2e)
target_include_directories(ty_faults_checks PUBLIC ${CMAKE_CURRENT_SOURCE_DIR}/faults)

add_executable(test_faults_leader faults/test_faults_leader.c)
target_link_libraries(test_faults_leader PRIVATE ty_faults_checks)
add_dependencies(test_faults_leader trainyard-api trainyard-scheduler trainyard-executor
                 trainyard-broker)
add_test(NAME faults_leader COMMAND test_faults_leader)
# two schedulers and a stream of jobs on two cores: nothing else runs meanwhile
set_tests_properties(faults_leader PROPERTIES LABELS e2e TIMEOUT 600 RUN_SERIAL TRUE
                     ENVIRONMENT "${TY_E2E_ENV}")

# The soak: TY_SOAK_SECONDS of jobs and random faults, then the invariants and
# a JSON report. faults_soak is the short one tests/run runs; faults_soak_full
# runs only with `ctest -C soak` (tests/faults/soak --minutes N sets it up).
add_executable(test_faults_soak faults/soak.c)
target_link_libraries(test_faults_soak PRIVATE ty_faults_checks)
add_dependencies(test_faults_soak trainyard-api trainyard-scheduler trainyard-executor
                 trainyard-broker)
add_test(NAME faults_soak COMMAND test_faults_soak)
set_tests_properties(faults_soak PROPERTIES LABELS e2e TIMEOUT 300 RUN_SERIAL TRUE
                     ENVIRONMENT "${TY_E2E_ENV};TY_SOAK_SECONDS=60;TY_SOAK_REPORT=${CMAKE_BINARY_DIR}/faults-soak-report.json")
add_test(NAME faults_soak_full CONFIGURATIONS soak COMMAND test_faults_soak)
# the script's --minutes sets TY_SOAK_SECONDS and TY_SOAK_REPORT; the timeout
# only ends a soak that hangs
set_tests_properties(faults_soak_full PROPERTIES LABELS soak TIMEOUT 14400 RUN_SERIAL TRUE
                     ENVIRONMENT "${TY_E2E_ENV}")

# the crash-point option's parser and pass counter (scheduler/fault.c)
ty_add_test(faults_points faults/test_fault_points.c unit)
target_link_libraries(test_faults_points PRIVATE ty_sched)
