-- The upload that saved each cache entry, so that a completion of it
-- sent again (its answer lost) finds the entry. Empty for the entries
-- saved before, and for those saved without an upload.
ALTER TABLE cache_entries ADD COLUMN upload_id text NOT NULL DEFAULT '';
