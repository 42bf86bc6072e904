# Lints over the source tree (tests/lint/): no binary needed, label unit.
# sql_params: SQL only through parameterised statements (docs/security.md "SQL").
add_test(NAME lint_sql_params COMMAND /usr/bin/python3
         ${CMAKE_CURRENT_SOURCE_DIR}/lint/sql_params.py --root ${TY_SOURCE_DIR})
set_tests_properties(lint_sql_params PROPERTIES LABELS unit TIMEOUT 60)
# secret_compare: secrets and MACs compared with ty_secure_equal only (docs/security.md "Secrets").
add_test(NAME lint_secret_compare COMMAND /usr/bin/python3
         ${CMAKE_CURRENT_SOURCE_DIR}/lint/secret_compare.py --root ${TY_SOURCE_DIR})
set_tests_properties(lint_secret_compare PROPERTIES LABELS unit TIMEOUT 60)
# job_events: every job event appended through ty_job_event() (migrations/0001_init.sql).
add_test(NAME lint_job_events COMMAND /usr/bin/python3
         ${CMAKE_CURRENT_SOURCE_DIR}/lint/job_events.py --root ${TY_SOURCE_DIR})
set_tests_properties(lint_job_events PROPERTIES LABELS unit TIMEOUT 60)

add_test(NAME lint_store_layers COMMAND /usr/bin/python3
         ${CMAKE_CURRENT_SOURCE_DIR}/lint/store_layers.py --root ${TY_SOURCE_DIR})
set_tests_properties(lint_store_layers PROPERTIES LABELS unit TIMEOUT 60)
