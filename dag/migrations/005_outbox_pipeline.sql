-- Outbox events name the pipeline of their run, so a relay can key them
-- by repository without reading the run.
ALTER TABLE outbox ADD COLUMN pipeline text NOT NULL DEFAULT '';
