# proto/: message encoding, decoding and validation (pure).
ty_add_test(proto unit/proto/test_proto.c unit)
target_link_libraries(test_proto PRIVATE ty_proto)
ty_add_test(proto_logcred unit/proto/test_logcred.c unit)
target_link_libraries(test_proto_logcred PRIVATE ty_proto)
ty_add_test(proto_launch_codec unit/proto/test_launch_codec.c unit)
target_link_libraries(test_proto_launch_codec PRIVATE ty_proto)
ty_add_test(proto_lifecycle unit/proto/test_lifecycle.c unit)
target_link_libraries(test_proto_lifecycle PRIVATE ty_proto)
