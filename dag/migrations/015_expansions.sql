-- How many times the run's placeholders of run-time matrices were
-- expanded, each expansion adding its variants as jobs of the run. A
-- store that keeps runs' graphs in memory compares it, under the run's
-- lock, with the count its graph was read at, and reads the graph again
-- when another store grew it.
ALTER TABLE pipeline_runs ADD COLUMN expansions int NOT NULL DEFAULT 0;
