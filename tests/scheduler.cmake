# Scheduler tests (included by tests/CMakeLists.txt).
#   unit: the pure placement core and the policy core (scheduler/core).
#   integration: trainyard-scheduler against PostgreSQL, the API and a
#   private trainyard-broker per case, the test playing the executors.

ty_add_test(sched_core unit/scheduler/test_core.c unit)
target_link_libraries(test_sched_core PRIVATE ty_sched_core)
# the policy core: one scenario per rule, and properties over seeded random snapshots
ty_add_test(sched_policy unit/scheduler/test_policy.c unit)
target_link_libraries(test_sched_policy PRIVATE ty_sched_core)
ty_add_test(sched_policy_props unit/scheduler/test_policy_props.c unit)
target_link_libraries(test_sched_policy_props PRIVATE ty_sched_core)
ty_add_test(sched_policy_victims unit/scheduler/test_policy_victims.c unit)
target_link_libraries(test_sched_policy_victims PRIVATE ty_sched_core)
# CPUs and memory: node fit, caps, reasons
ty_add_test(sched_policy_resources unit/scheduler/test_policy_resources.c unit)
target_link_libraries(test_sched_policy_resources PRIVATE ty_sched_core)
# money budgets and expedited requeue
ty_add_test(sched_policy_budget unit/scheduler/test_policy_budget.c unit)
target_link_libraries(test_sched_policy_budget PRIVATE ty_sched_core)
# what can never run: the "cannot run" verdict and its text
ty_add_test(sched_policy_feasible unit/scheduler/test_policy_feasible.c unit)
target_link_libraries(test_sched_policy_feasible PRIVATE ty_sched_core)
# start-time estimates: the decision run forward (scheduler/core/estimate.c)
ty_add_test(sched_estimate unit/scheduler/test_estimate.c unit)
target_link_libraries(test_sched_estimate PRIVATE ty_sched_core)
# what-if: a job estimated without submitting it, and its alternatives (scheduler/core/what_if.c)
ty_add_test(sched_what_if unit/scheduler/test_what_if.c unit)
target_link_libraries(test_sched_what_if PRIVATE ty_sched_core)
# the retry policy: verdicts, budgets, backoff (scheduler/core/retry.c)
ty_add_test(sched_retry unit/scheduler/test_retry.c unit)
target_link_libraries(test_sched_retry PRIVATE ty_sched_core)
# the usage ledger's rate table and arithmetic (scheduler/ledger.c)
ty_add_test(sched_ledger_math unit/scheduler/test_ledger_math.c unit)
target_link_libraries(test_sched_ledger_math PRIVATE ty_sched)
# GPU telemetry: a node's report, a gang's summary, heartbeat idle fields (scheduler/telemetry.c)
ty_add_test(sched_telemetry_math unit/scheduler/test_telemetry.c unit)
target_link_libraries(test_sched_telemetry_math PRIVATE ty_sched)
# training progress: the gang's median and the straggler judgement (scheduler/progress.c)
ty_add_test(sched_progress_math unit/scheduler/test_progress.c unit)
target_link_libraries(test_sched_progress_math PRIVATE ty_sched)
# the metrics' pure parts: reason labels, decision outcomes, --metrics-listen (scheduler/metrics.c)
ty_add_test(sched_metrics_labels unit/scheduler/test_metrics_labels.c unit)
target_link_libraries(test_sched_metrics_labels PRIVATE ty_sched)
# a preempted gang's grace from its measured checkpoint time, cohort reclaim delays (scheduler/preempt.c)
ty_add_test(sched_grace unit/scheduler/test_grace.c unit)
target_link_libraries(test_sched_grace PRIVATE ty_sched)
# the nodes held for preemptions from one cycle to the next (scheduler/place.c)
ty_add_test(sched_holds unit/scheduler/test_holds.c unit)
target_link_libraries(test_sched_holds PRIVATE ty_sched)

file(GLOB TY_SCHED_TESTS CONFIGURE_DEPENDS
     ${CMAKE_CURRENT_SOURCE_DIR}/integration/scheduler/test_*.c)
foreach(src ${TY_SCHED_TESTS})
  get_filename_component(base ${src} NAME_WE)
  string(REGEX REPLACE "^test_" "sched_" name ${base})
  ty_add_test(${name} ${src} integration)
  target_sources(test_${name} PRIVATE ${CMAKE_CURRENT_SOURCE_DIR}/integration/scheduler/fixture.c)
  target_include_directories(test_${name} PRIVATE
                             ${CMAKE_CURRENT_SOURCE_DIR}/integration/scheduler)
  target_link_libraries(test_${name} PRIVATE ty_sched)
  # each case runs its own broker, so suites running in parallel never share topics
  set_property(TEST ${name} APPEND PROPERTY ENVIRONMENT
               "TY_SCHEDULER_BIN=$<TARGET_FILE:trainyard-scheduler>"
               "TY_BROKER_BIN=$<TARGET_FILE:trainyard-broker>")
  add_dependencies(test_${name} trainyard-scheduler trainyard-broker)
endforeach()
