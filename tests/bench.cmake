# bench/slurm/run --quick on this build's programs: a smoke test that the
# Slurm side by side runs and produces its numbers, never their speed
# (bench/README.md; about 30 s). Needs root and Debian's slurm-wlm, munge and
# libslurm-dev (tests/run installs them; without libslurm when CMake
# configured, trainyard-bench-slurm is not built and the test fails saying so).
add_test(NAME bench_slurm
         COMMAND bash ${PROJECT_SOURCE_DIR}/bench/slurm/run --quick --no-build
                 --build ${CMAKE_BINARY_DIR} --json ${CMAKE_BINARY_DIR}/bench-slurm.json)
set_tests_properties(bench_slurm PROPERTIES LABELS e2e TIMEOUT 300)

# bench/dispatch/run --quick: 100 simulated nodes (trainyard-simexec), 500 gangs
# and 10 latency jobs on a private stack of this build's programs; checks that
# it runs and produces its numbers, never their speed (about 40 s).
add_test(NAME bench_dispatch
         COMMAND bash ${PROJECT_SOURCE_DIR}/bench/dispatch/run --quick --no-build
                 --build ${CMAKE_BINARY_DIR} --json ${CMAKE_BINARY_DIR}/bench-dispatch.json)
set_tests_properties(bench_dispatch PROPERTIES LABELS e2e TIMEOUT 300)

# bench/latency/run --quick: 10 real 2-node jobs one at a time on a private
# stack of this build's programs (about 15 s); numbers exist, never their speed.
add_test(NAME bench_latency
         COMMAND bash ${PROJECT_SOURCE_DIR}/bench/latency/run --quick --no-build
                 --build ${CMAKE_BINARY_DIR} --json ${CMAKE_BINARY_DIR}/bench-latency.json)
set_tests_properties(bench_latency PROPERTIES LABELS e2e TIMEOUT 300)

# bench/submit/run --quick: API submissions against pgbench and GET /healthz
# with 1, 16 and 64 clients, 1 s each (about 20 s); numbers exist, never their speed.
add_test(NAME bench_submit
         COMMAND bash ${PROJECT_SOURCE_DIR}/bench/submit/run --quick --no-build
                 --build ${CMAKE_BINARY_DIR} --json ${CMAKE_BINARY_DIR}/bench-submit.json)
set_tests_properties(bench_submit PROPERTIES LABELS e2e TIMEOUT 300)
