-- The schema of the receiver's SQL stores before replay keys (hw_replays) existed, as that
-- version's migrate created it; {{id}} and {{blob}} are the dialect's types. Two events of
-- that version follow: one delivered, one still queued.
CREATE TABLE hw_events (
	id {{id}},
	subscription TEXT NOT NULL,
	event_id TEXT NOT NULL,
	state TEXT NOT NULL CHECK (state IN ('pending', 'running', 'retryable', 'completed', 'dead')),
	attempts INTEGER NOT NULL DEFAULT 0,
	max_attempts INTEGER NOT NULL,
	run_at BIGINT NOT NULL,
	lease_until BIGINT NOT NULL DEFAULT 0,
	updated_at BIGINT NOT NULL,
	received_at BIGINT NOT NULL,
	subscription_uid TEXT NOT NULL DEFAULT '',
	event_type TEXT NOT NULL DEFAULT '',
	content_type TEXT NOT NULL DEFAULT '',
	last_error TEXT NOT NULL DEFAULT '',
	payload {{blob}} NOT NULL,
	UNIQUE (subscription, event_id)
);
CREATE INDEX hw_events_due ON hw_events (state, run_at);
INSERT INTO hw_events (subscription, event_id, state, max_attempts, run_at, updated_at, received_at, payload)
VALUES ('ns/a', 'evt_delivered', 'completed', 5, {{t0}}, {{t0}}, {{t0}}, '{}'),
       ('ns/a', 'evt_queued', 'pending', 5, {{t0}}, {{t0}}, {{t0}}, '{}');
