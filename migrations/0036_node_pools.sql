-- Node pools an operator declares for clusters that scale (docs/api.md,
-- "Node pools"): shapes that may exist even while no such node is
-- registered, so that a job only they can hold is not refused as
-- unschedulable nor shown as "cannot run". Up to max_nodes nodes of
-- gpus_per_node GPUs (cpus_per_node, memory_mb_per_node NULL: not limited)
-- with these labels. Admins manage them (PUT, GET, DELETE /v1/node-pools).
CREATE TABLE node_pools (
	name               text PRIMARY KEY CHECK (name ~ '^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$'),
	labels             jsonb NOT NULL DEFAULT '{}' CHECK (jsonb_typeof(labels) = 'object'),
	gpus_per_node      integer NOT NULL CHECK (gpus_per_node BETWEEN 0 AND 64),
	cpus_per_node      integer CHECK (cpus_per_node IS NULL OR cpus_per_node BETWEEN 1 AND 4096),
	memory_mb_per_node bigint
		CHECK (memory_mb_per_node IS NULL OR memory_mb_per_node BETWEEN 1 AND 16777216),
	max_nodes          integer NOT NULL CHECK (max_nodes BETWEEN 1 AND 10000),
	created_at         timestamptz NOT NULL DEFAULT now(),
	updated_at         timestamptz NOT NULL DEFAULT now()
);
