package cli

import "testing"

// TestBatch: a rerun of rotate or recover resumes the batch of an interrupted run: it takes the
// batch's value from a request still pending (or --requested-at), follows what is pending,
// skips what handled the batch, and asks only the rest.
func TestBatch(t *testing.T) {
	const t1, t2, now = "2026-12-02T04:47:21.1Z", "2026-12-02T04:47:21.25Z", "2026-12-02T05:00:00Z"
	cases := []struct {
		reason             string
		flag               string
		requested, handled []string
		batch              string
		actions            []requestAction
	}{
		{"first run: nothing requested", "", []string{"", ""}, []string{"", ""}, now, []requestAction{requestAsk, requestAsk}},
		{"a finished earlier batch: a new one", "", []string{t1, t1}, []string{t1, t1}, now, []requestAction{requestAsk, requestAsk}},
		{"interrupted after one of three: the others resumed, the first not asked again", "", []string{t1, t1, t1}, []string{t1, "", ""}, t1,
			[]requestAction{requestHandled, requestFollow, requestFollow}},
		{"interrupted while asking: the one never asked is asked with the batch's value", "", []string{t1, t1, ""}, []string{t1, "", ""}, t1,
			[]requestAction{requestHandled, requestFollow, requestAsk}},
		{"two pending batches: the newer one is resumed, each pending request followed", "", []string{t1, t2, t2}, []string{"", "", t2}, t2,
			[]requestAction{requestFollow, requestFollow, requestHandled}},
		{"every one handled before the interruption: --requested-at names the batch", t1, []string{t1, t1}, []string{t1, t1}, t1,
			[]requestAction{requestHandled, requestHandled}},
		{"--requested-at for a subscription of an older batch: asked with it", t2, []string{t1}, []string{t1}, t2, []requestAction{requestAsk}},
	}
	for _, c := range cases {
		batch := batchValue(c.flag, now, c.requested, c.handled)
		if batch != c.batch {
			t.Errorf("%s: batch %q, want %q", c.reason, batch, c.batch)
			continue
		}
		for i := range c.requested {
			if got := actionFor(batch, c.requested[i], c.handled[i]); got != c.actions[i] {
				t.Errorf("%s: subscription %d: action %v, want %v", c.reason, i, got, c.actions[i])
			}
		}
	}
}
