-- The schema of the receiver's SQL stores before sinks, when each hw_events row carried its one
-- delivery job, as that version's migrate created it; {{id}} and {{blob}} are the dialect's
-- types. Four events of that version follow, in row ids 1 to 4: one delivered, one queued, one
-- dead-lettered and one waiting for its retry.
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
CREATE TABLE hw_replays (
	subscription TEXT NOT NULL,
	replay_key TEXT NOT NULL,
	received_at BIGINT NOT NULL,
	PRIMARY KEY (subscription, replay_key)
){{keyed}};
CREATE INDEX hw_replays_received ON hw_replays (received_at);
INSERT INTO hw_events (subscription, event_id, state, attempts, max_attempts, run_at, updated_at, received_at, last_error, payload)
VALUES ('ns/a', 'evt_delivered', 'completed', 1, 5, {{t0}}, {{t0}}, {{t0}}, '', '{}');
INSERT INTO hw_events (subscription, event_id, state, attempts, max_attempts, run_at, updated_at, received_at, last_error, payload)
VALUES ('ns/a', 'evt_queued', 'pending', 0, 5, {{t0}}, {{t0}}, {{t0}}, '', '{}');
INSERT INTO hw_events (subscription, event_id, state, attempts, max_attempts, run_at, updated_at, received_at, last_error, payload)
VALUES ('ns/a', 'evt_dead', 'dead', 5, 5, {{t0}}, {{t0}}, {{t0}}, 'sink answered 400', '{}');
INSERT INTO hw_events (subscription, event_id, state, attempts, max_attempts, run_at, updated_at, received_at, last_error, payload)
VALUES ('ns/a', 'evt_retry', 'retryable', 2, 5, {{later}}, {{t0}}, {{t0}}, 'sink answered 503', '{}');
