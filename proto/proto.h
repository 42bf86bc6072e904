/* Kafka topics and message schema version shared by scheduler and executors. */
#ifndef TY_PROTO_H
#define TY_PROTO_H

#define PROTO_VERSION 1
#define PROTO_TOPIC_DISPATCH "trainyard.dispatch"
#define PROTO_TOPIC_EVENTS "trainyard.events"
#define PROTO_TOPIC_NODES "trainyard.nodes"

#endif
