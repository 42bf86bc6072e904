# The scheduler simulation (included by tests/CMakeLists.txt): a generated
# workload replayed through the policy core (bench/sim, library ty_sim) —
# shares against targets, the reservation rule, the core's invariants.

ty_add_test(sim sim/test_sim.c unit)
target_link_libraries(test_sim PRIVATE ty_sim)
