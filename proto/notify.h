/*
 * The PostgreSQL notifications the API and the scheduler send each other on
 * one channel (docs/architecture.md): a job id (a job event was written; the
 * trigger of migration 0001), "node:" + node id (the API drained or
 * undrained it), "what_if:" + request id (a what-if request to answer) and
 * "what_if_answer:" + request id (answered; docs/api.md, "What-if").
 */
#ifndef TY_PROTO_NOTIFY_H
#define TY_PROTO_NOTIFY_H

#define PROTO_NOTIFY_CHANNEL "trainyard_job_events"
#define PROTO_NOTIFY_NODE "node:"
#define PROTO_NOTIFY_WHAT_IF "what_if:"
#define PROTO_NOTIFY_WHAT_IF_ANSWER "what_if_answer:"

#endif
