-- The server's SQLite schema (tessera-server; docs/operations.md), version 16
-- (Store::kSchemaVersion).
-- Applied by server/store/store.cpp when PRAGMA user_version is 0; older files are migrated
-- there. schemas/db_postgres.sql is the same schema for PostgreSQL: change both together
-- (the test server_db_schemas fails when they differ).
-- Times are unix seconds; hashes are SHA-256 in lowercase hex.

-- Server-wide settings: the operator token's hash, the server key id.
CREATE TABLE settings (
  key   TEXT PRIMARY KEY,
  value TEXT NOT NULL
);

-- Volunteers, one per Ed25519 key. Schema 4 added `quarantined` (its results are checked and
-- kept, neither merged nor credited) and `address` (the network address it registered from).
CREATE TABLE clients (
  id            TEXT PRIMARY KEY,
  public_key    TEXT NOT NULL UNIQUE,   -- base64 of the raw 32-byte key
  name          TEXT NOT NULL,
  client_version TEXT NOT NULL,
  registered_at INTEGER NOT NULL,
  last_seen     INTEGER NOT NULL,
  device        TEXT NOT NULL DEFAULT '',
  samples_per_s REAL NOT NULL DEFAULT 0,
  valid_streak  INTEGER NOT NULL DEFAULT 0,  -- accepted results in a row (adaptive replication)
  accepted      INTEGER NOT NULL DEFAULT 0,
  rejected      INTEGER NOT NULL DEFAULT 0,
  credit        REAL NOT NULL DEFAULT 0,
  banned        INTEGER NOT NULL DEFAULT 0,
  quarantined   INTEGER NOT NULL DEFAULT 0,
  address       TEXT NOT NULL DEFAULT ''
);

-- Request nonces seen recently: a replayed signed request is refused.
CREATE TABLE request_nonces (
  client_id TEXT NOT NULL,
  nonce     TEXT NOT NULL,
  seen_at   INTEGER NOT NULL,
  PRIMARY KEY (client_id, nonce)
);

-- A training run: model preset, dataset and policy (config is the task's JSON).
CREATE TABLE tasks (
  id          TEXT PRIMARY KEY,
  config      TEXT NOT NULL,
  state       TEXT NOT NULL CHECK (state IN ('active', 'paused', 'finished')),
  created_at  INTEGER NOT NULL,
  version     INTEGER NOT NULL DEFAULT 0,  -- the current model version
  weight      REAL NOT NULL DEFAULT 1      -- schema 7: the operator's share of work among running tasks
);

-- The task's training shards; `uses` counts work units built on each (epoch coverage).
CREATE TABLE shards (
  task_id TEXT NOT NULL REFERENCES tasks(id),
  sha256  TEXT NOT NULL,
  bytes   INTEGER NOT NULL,
  samples INTEGER NOT NULL,
  uses    INTEGER NOT NULL DEFAULT 0,
  PRIMARY KEY (task_id, sha256)
);

-- Every model version; the blob is written (atomically) before its row commits.
CREATE TABLE model_versions (
  task_id         TEXT NOT NULL REFERENCES tasks(id),
  version         INTEGER NOT NULL,
  blob_sha256     TEXT NOT NULL,
  blob_bytes      INTEGER NOT NULL,
  optimizer_sha256 TEXT,                 -- diloco momentum, when the policy has state
  state_sha256    TEXT,                  -- with downlink patches: the true model (blob: the published one)
  patch_sha256    TEXT,                  -- with downlink patches: from the previous published model
  patch_bytes     INTEGER NOT NULL DEFAULT 0,
  created_at      INTEGER NOT NULL,
  merged_results  INTEGER NOT NULL DEFAULT 0,
  validation_loss REAL,                  -- filled in by the periodic evaluation
  validation_accuracy REAL,
  validation_samples INTEGER,            -- how many validation samples the figures come from
  validation_full INTEGER NOT NULL DEFAULT 0,  -- 1: the whole validation set
  -- 1: a restart point: the true model, the published one and the policy's state were written
  -- in full. 0 (downlink patches, between checkpoints): only the patch; the true model is
  -- rebuilt from the last checkpoint and the results merged since (their delta files are kept
  -- until the next), the published one from the patches when first asked for.
  checkpoint      INTEGER NOT NULL DEFAULT 1,
  pinned          INTEGER NOT NULL DEFAULT 0,  -- kept by retention whatever its age
  PRIMARY KEY (task_id, version)
);

-- A unit of work (BOINC's workunit): shards, hyperparameters and a base version. It is
-- sent as one or more assignments (replicas).
CREATE TABLE work_units (
  id           TEXT PRIMARY KEY,
  task_id      TEXT NOT NULL REFERENCES tasks(id),
  base_version INTEGER NOT NULL,
  shards       TEXT NOT NULL,             -- JSON array of shard hashes
  local_steps  INTEGER NOT NULL,
  seed         INTEGER NOT NULL,
  replicas     INTEGER NOT NULL,          -- 1, or 2 when the results are compared
  state        TEXT NOT NULL CHECK (state IN ('open', 'done', 'retired')),
  failures     INTEGER NOT NULL DEFAULT 0,
  created_at   INTEGER NOT NULL,
  trusted_only INTEGER NOT NULL DEFAULT 0, -- an audit twin: trusted volunteers only (schema 14)
  moments_sha256 TEXT,                    -- an audit twin of a kept unit: the moments it resumes (16)
  moments_bytes INTEGER NOT NULL DEFAULT 0,
  checks       TEXT,                      -- a loss-check unit: the assignment it evaluates (17)
  checks_client TEXT,                     -- and that assignment's volunteer, never sent this unit
  check_spec   TEXT                       -- and the unit's "check" field (JSON)
);

-- One copy of a work unit sent to one volunteer (BOINC's result). Its id is the wu_id
-- the volunteer sees.
CREATE TABLE assignments (
  id            TEXT PRIMARY KEY,
  work_unit_id  TEXT NOT NULL REFERENCES work_units(id),
  client_id     TEXT NOT NULL REFERENCES clients(id),
  -- in_progress → returned (stored) → validated (waits for its replica) → accepted (to be
  -- merged) | confirmed (an accepted replica's twin, not merged) | rejected;
  -- accepted → merged; in_progress → timed_out | abandoned.
  state         TEXT NOT NULL CHECK (state IN ('in_progress', 'returned', 'validated',
                  'accepted', 'confirmed', 'rejected', 'merged', 'timed_out', 'abandoned')),
  issued_at     INTEGER NOT NULL,
  deadline      INTEGER NOT NULL,
  envelope      TEXT NOT NULL,            -- the signed work unit as sent
  returned_at   INTEGER,
  delta_sha256  TEXT,
  delta_bytes   INTEGER,
  delta_norm    REAL,
  gain_per_step REAL,                     -- proof of training: relative loss drop per step on its own samples
  alignment     DOUBLE PRECISION,         -- cosine with the consensus of other units' results, when checked (schema 8)
  concurrency   BIGINT,                   -- the task's volunteers when it was accepted for merging (schema 9)
  full_rate_steps DOUBLE PRECISION,        -- its steps weighted by their share of the task's learning rate, when checked (schema 10)
  claimed_by    TEXT,                     -- the process validating a returned result (schema 11; validation_stage.h)
  claimed_until INTEGER,                  -- and until when its claim holds
  metrics       TEXT,                     -- JSON from the result manifest
  commitments   TEXT,                     -- the manifest's commitments, JSON, when sent (schema 13)
  credit        REAL NOT NULL DEFAULT 0,
  merged_version INTEGER,
  accepted_seq  INTEGER                   -- acceptance order, so merges replay in order
);
CREATE INDEX assignments_by_state ON assignments(state);
CREATE INDEX assignments_by_client ON assignments(client_id, state);
CREATE INDEX assignments_by_work_unit ON assignments(work_unit_id);
-- Schema 3: the per-request queries stay off full scans as the history grows.
CREATE INDEX work_units_open ON work_units(task_id, state, created_at);
CREATE INDEX clients_by_last_seen ON clients(last_seen);
CREATE INDEX request_nonces_by_time ON request_nonces(seen_at);
CREATE INDEX assignments_by_acceptance ON assignments(accepted_seq);
-- Schema 4: registrations per address (Sybil limit), rejections per volunteer (quarantine).
CREATE INDEX clients_by_address ON clients(address, registered_at);
CREATE INDEX model_versions_by_blob ON model_versions(task_id, blob_sha256);
-- Schema 12: the checks' recent alignments walk results by return, newest first.
CREATE INDEX assignments_by_return ON assignments(returned_at);

-- Schema 12: the last unit each volunteer was issued of each task, so "the task's volunteers
-- active in the last ten minutes" counts volunteers, not their units (written with the assignment).
CREATE TABLE task_volunteers (
  task_id        TEXT NOT NULL REFERENCES tasks(id),
  client_id      TEXT NOT NULL REFERENCES clients(id),
  last_issued_at INTEGER NOT NULL,
  PRIMARY KEY (task_id, client_id)
);
CREATE INDEX task_volunteers_by_issue ON task_volunteers(task_id, last_issued_at);

-- Why results were refused.
CREATE TABLE rejections (
  id            INTEGER PRIMARY KEY,
  assignment_id TEXT NOT NULL,
  client_id     TEXT NOT NULL,
  reason        TEXT NOT NULL,
  detail        TEXT NOT NULL,
  at            INTEGER NOT NULL
);
CREATE INDEX rejections_by_client ON rejections(client_id, at);

-- What happened, for the dashboard and the log.
CREATE TABLE events (
  id     INTEGER PRIMARY KEY,
  at     INTEGER NOT NULL,
  kind   TEXT NOT NULL,
  detail TEXT NOT NULL                    -- JSON object
);
-- Events of one kind, newest first: the dashboard's audits, /metrics (schema 15).
CREATE INDEX events_by_kind ON events(kind, id);

-- Roles one server process holds at a time (schema 7): `aggregator:<task id>` is the process
-- that merges that task's results (docs/scaling.md). A holder renews its row before
-- `expires_at`; another process may take a row that has expired.
CREATE TABLE leases (
  name       TEXT PRIMARY KEY,
  holder     TEXT NOT NULL,           -- host:pid:random of the process
  expires_at INTEGER NOT NULL
);
