# deploy/: the Kubernetes manifests, systemd units, alert rules and Dockerfile
# checked against this build's programs (--help), promtool,
# systemd-analyze and dockerfile-utils (tests/deploy/check_manifests.py and
# dockerfile.js, whose node_modules tests/run installs; about 1 s), and the
# checker's own self-test: each of its cases breaks a copy of deploy/ in one
# way and must be reported with its file and field (a few seconds). And
# alerts fired against input series (deploy_alerts).
set(TY_DEPLOY_CHECK /usr/bin/python3 ${CMAKE_CURRENT_SOURCE_DIR}/deploy/check_manifests.py
    --root ${PROJECT_SOURCE_DIR} --bin ${CMAKE_BINARY_DIR}/bin)
add_test(NAME deploy_manifests COMMAND ${TY_DEPLOY_CHECK})
add_test(NAME deploy_manifests_selftest COMMAND ${TY_DEPLOY_CHECK} --self-test)
set_tests_properties(deploy_manifests PROPERTIES LABELS unit TIMEOUT 60)
# about 1 s of CPU, but 36 copies of deploy/ and a dozen tool runs: room for a busy machine
set_tests_properties(deploy_manifests_selftest PROPERTIES LABELS unit TIMEOUT 120)
# the node condition alerts fire on trainyard_node_conditions as docs/metrics.md
# describes it, and only then (promtool test rules)
add_test(NAME deploy_alerts_conditions COMMAND promtool test rules alerts_conditions_test.yml
         WORKING_DIRECTORY ${CMAKE_CURRENT_SOURCE_DIR}/deploy)
set_tests_properties(deploy_alerts_conditions PROPERTIES LABELS unit TIMEOUT 60)
# the alert rules fire on the series docs/metrics.md describes, and only then
# (promtool test rules; tests/deploy/alerts_test.yml, so far the expected-inventory alert)
add_test(NAME deploy_alerts COMMAND promtool test rules alerts_test.yml
         WORKING_DIRECTORY ${CMAKE_CURRENT_SOURCE_DIR}/deploy)
set_tests_properties(deploy_alerts PROPERTIES LABELS unit TIMEOUT 60)
