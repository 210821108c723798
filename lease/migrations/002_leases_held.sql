-- A batch of completions written in the job store's transaction deletes
-- its leases there and passes how many it deleted and how many it
-- completed: unless every completion held its lease, this raises and the
-- transaction rolls back (SQLSTATE CKL01), and the Manager checks each
-- lease before trying again.
CREATE FUNCTION job_leases_held(ended bigint, completed bigint) RETURNS bigint
LANGUAGE plpgsql AS $$
BEGIN
    IF ended <> completed THEN
        RAISE EXCEPTION 'lease: % of % completions held their lease', ended, completed USING ERRCODE = 'CKL01';
    END IF;
    RETURN ended;
END
$$;
