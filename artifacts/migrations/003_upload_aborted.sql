-- An upload aborted or refused is kept, not completable, until its
-- presigned requests expire; the pruner then deletes what a replay of
-- them may have stored, and the row.
ALTER TABLE artifact_uploads ADD COLUMN aborted boolean NOT NULL DEFAULT false;
