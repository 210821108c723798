-- A manual trigger's Idempotency-Key is scoped to its repository: its
-- hook_id is 'api:' and the repository (it was 'api' for all). Records
-- made before are moved to the repository of their first run, so a
-- retry across the upgrade still finds its run; a record without runs
-- (nothing was started) cannot be placed and keeps 'api', matched by no
-- new request, until it is pruned.
UPDATE webhook_deliveries AS d
SET hook_id = 'api:' || split_part(r.pipeline, ':', 1)
FROM pipeline_runs AS r
WHERE d.provider = 'manual' AND d.hook_id = 'api' AND r.id = d.run_ids[1];
