-- Listing runs newest first (RunList): by creation time, then ID, compared
-- bytewise ("C") whatever the database's collation, so that a page's
-- cursor is a position in one total order. The second index serves the
-- list of one pipeline's runs.
CREATE INDEX pipeline_runs_list ON pipeline_runs (created_at DESC, id COLLATE "C" DESC);
CREATE INDEX pipeline_runs_list_pipeline ON pipeline_runs (pipeline, created_at DESC, id COLLATE "C" DESC);
