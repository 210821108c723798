-- Text that is compared, ordered or matched by prefix is COLLATE "C":
-- byte order, the order of Go's strings, whatever the database's locale,
-- and key ranges that match prefixes exactly.

-- One row per upload in progress: reserved, neither completed nor
-- aborted.
CREATE TABLE artifact_uploads (
    id           text        PRIMARY KEY,
    repo         text        NOT NULL,
    run_id       text        NOT NULL,
    job_id       text        NOT NULL,
    attempt      int         NOT NULL,
    cache        boolean     NOT NULL,
    name         text        NOT NULL,
    type         text        NOT NULL,
    report       text        NOT NULL,
    size         bigint      NOT NULL,
    sha256       text        NOT NULL,
    files        int         NOT NULL,
    expire_in_ns bigint      NOT NULL,
    overwrite    boolean     NOT NULL,
    scope        text        NOT NULL,
    blob_key     text        NOT NULL,
    multipart_id text        NOT NULL,
    stored       boolean     NOT NULL,
    created_at   timestamptz NOT NULL,
    expires_at   timestamptz NOT NULL
);

-- The pruner walks abandoned uploads by expiry.
CREATE INDEX artifact_uploads_expires_at ON artifact_uploads (expires_at, id);

-- One row per finalized artifact. A name is unique in its run.
CREATE TABLE artifacts (
    id             text        PRIMARY KEY,
    repo           text        NOT NULL,
    default_branch boolean     NOT NULL,
    run_id         text        COLLATE "C" NOT NULL,
    job_id         text        COLLATE "C" NOT NULL,
    attempt        int         NOT NULL,
    name           text        COLLATE "C" NOT NULL,
    type           text        NOT NULL,
    report         text        NOT NULL,
    size           bigint      NOT NULL,
    sha256         text        NOT NULL,
    files          int         NOT NULL,
    blob_key       text        NOT NULL,
    created_at     timestamptz NOT NULL,
    -- NULL: kept until deleted.
    expires_at     timestamptz,
    UNIQUE (run_id, name)
);

-- ArtifactsList reads a run's artifacts in this order.
CREATE INDEX artifacts_run ON artifacts (run_id, job_id, attempt, name);
-- The pruner walks artifacts by expiry.
CREATE INDEX artifacts_expires_at ON artifacts (expires_at, id) WHERE expires_at IS NOT NULL;
-- The latest default-branch run of each repository.
CREATE INDEX artifacts_default_branch ON artifacts (repo, created_at DESC, run_id DESC) WHERE default_branch;

-- One row per saved cache entry.
CREATE TABLE cache_entries (
    repo        text        COLLATE "C" NOT NULL,
    scope       text        COLLATE "C" NOT NULL,
    key         text        COLLATE "C" NOT NULL,
    sha256      text        NOT NULL,
    size        bigint      NOT NULL,
    blob_key    text        NOT NULL,
    created_at  timestamptz NOT NULL,
    -- NULL: no lookup has found it yet.
    last_hit_at timestamptz,
    -- Also the index of restore-key lookups, which match a prefix as a
    -- range of keys in a scope.
    PRIMARY KEY (repo, scope, key)
);

-- Content addressing: CacheHasDigest, and whether a removed entry's blob
-- is still referred to.
CREATE INDEX cache_entries_digest ON cache_entries (repo, scope, sha256);
CREATE INDEX cache_entries_blob_key ON cache_entries (blob_key);
-- Eviction and CacheList order entries by last use.
CREATE INDEX cache_entries_used ON cache_entries ((coalesce(last_hit_at, created_at)));
