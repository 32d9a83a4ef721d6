package jsonscan_test

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/hookwarden/hookwarden/internal/jsonscan"
)

// referenceTopLevelStrings is the Decoder loop TopLevelStrings replaced in providers/stripe,
// copied unchanged: it is the oracle.
func referenceTopLevelStrings(body []byte) (id, typ string, ok bool) {
	if !json.Valid(body) {
		return "", "", false
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return "", "", false
	}
	var skip skipValue
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return "", "", false
		}
		var target any = &skip
		var s string
		switch t {
		case "id", "type":
			target = &s
		}
		if err := dec.Decode(target); err != nil {
			// A non-string id or type: keep scanning, it reads as "".
			if _, isString := target.(*string); !isString {
				return "", "", false
			}
			s = ""
		}
		switch t {
		case "id":
			id = s
		case "type":
			typ = s
		}
	}
	return id, typ, true
}

// skipValue consumes a JSON value without keeping it.
type skipValue struct{}

func (*skipValue) UnmarshalJSON([]byte) error { return nil }

// referenceMembers is referenceTopLevelStrings for any keys, to check keys other than id and
// type (non-ASCII, U+FFFD, repeated).
func referenceMembers(body []byte, keys ...string) ([]string, bool) {
	values := make([]string, len(keys))
	if !json.Valid(body) {
		return values, false
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return values, false
	}
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return make([]string, len(keys)), false
		}
		var s string
		if err := dec.Decode(&s); err != nil {
			s = ""
		}
		for i, k := range keys {
			if t == k {
				values[i] = s
			}
		}
	}
	return values, true
}

func scan(body []byte) (id, typ string, ok bool) {
	var v [2]string
	ok = jsonscan.TopLevelStrings(body, v[:], "id", "type")
	return v[0], v[1], ok
}

var cases = []struct {
	name    string
	body    string
	id, typ string
	ok      bool
}{
	{"plain", `{"id":"evt_1","type":"a.b"}`, "evt_1", "a.b", true},
	{"other members", `{"object":"event","id":"evt_1","created":1,"livemode":false,"type":"t","x":null}`, "evt_1", "t", true},
	{"whitespace everywhere", " \t\r\n{ \"id\" :\n\"x\" ,\t\"type\"\r:\"y\" } \n", "x", "y", true},
	{"empty object", `{}`, "", "", true},
	{"empty object with whitespace", ` { } `, "", "", true},
	{"missing type", `{"id":"x"}`, "x", "", true},
	{"empty id", `{"id":""}`, "", "", true},
	{"empty key", `{"":"x","id":"y"}`, "y", "", true},

	{"escaped key", `{"\u0069d":"x","typ\u0065":"y"}`, "x", "y", true},
	{"escaped key upper hex", `{"\u0049D":"x"}`, "", "", true},
	{"escaped solidus in key", `{"i\/d":"x"}`, "", "", true},
	{"escaped value", `{"id":"a\"b\\c\/d\n\t\u00e9\b\f\r"}`, "a\"b\\c/d\n\té\b\f\r", "", true},
	{"escaped backslash before quote", `{"x":"\\","id":"y"}`, "y", "", true},
	{"key-like text in a value", `{"x":"\"id\":\"no\"","id":"yes"}`, "yes", "", true},
	{"braces in strings", `{"x":"}{][","id":"y","z":"{"}`, "y", "", true},
	{"raw unicode", `{"id":"évt_☃","type":"日本"}`, "évt_☃", "日本", true},
	{"raw U+FFFD", "{\"id\":\"\uFFFD\"}", "\uFFFD", "", true},
	{"surrogate pair", `{"id":"\ud83d\ude00"}`, "😀", "", true},
	{"lone high surrogate", `{"id":"\ud800x"}`, "\uFFFDx", "", true},
	{"lone low surrogate", `{"id":"\udc00"}`, "\uFFFD", "", true},
	{"high surrogate then escape", `{"id":"\ud800\n"}`, "\uFFFD\n", "", true},
	{"two high surrogates", `{"id":"\ud800\ud800"}`, "\uFFFD\uFFFD", "", true},
	{"escaped NUL", `{"id":"\u0000"}`, "\x00", "", true},
	{"invalid UTF-8 in value", "{\"id\":\"a\xffb\"}", "a\uFFFDb", "", true},
	{"truncated UTF-8 in value", "{\"id\":\"\xe2\x82\"}", "\uFFFD\uFFFD", "", true},
	{"UTF-8 surrogate in value", "{\"id\":\"\xed\xa0\x80\"}", "\uFFFD\uFFFD\uFFFD", "", true},
	{"invalid UTF-8 in key", "{\"i\xff\":\"x\",\"type\":\"y\"}", "", "y", true},
	{"invalid UTF-8 elsewhere", "{\"a\":[\"\xff\"],\"\xfe\":{},\"id\":\"x\"}", "x", "", true},

	// Strings longer than eight bytes, with the byte that matters at different offsets.
	{"long plain value", `{"id":"evt_0123456789abcdefghijklmnopqrstuvwxyz"}`, "evt_0123456789abcdefghijklmnopqrstuvwxyz", "", true},
	{"long value, late escape", `{"id":"0123456789abcdef\"0123456789"}`, "0123456789abcdef\"0123456789", "", true},
	{"long value, early escape", `{"id":"0\\123456789abcdef0123456789"}`, "0\\123456789abcdef0123456789", "", true},
	{"long value, late non-ASCII", `{"id":"0123456789abcdé0123456789"}`, "0123456789abcdé0123456789", "", true},
	{"long value, invalid UTF-8", "{\"id\":\"0123456789abc\xffdef0123456789\"}", "0123456789abc\uFFFDdef0123456789", "", true},
	{"long value, boundary bytes", "{\"id\":\"0123456789\x7f\x20!#$%&'()*+\x80\"}", "0123456789\x7f !#$%&'()*+\uFFFD", "", true},
	{"long value, quote at byte 8", `{"a":"01234567","id":"x"}`, "x", "", true},
	{"long value, late control character", "{\"id\":\"0123456789abcdef\x1f\"}", "", "", false},
	{"long value, control character at byte 8", "{\"id\":\"01234567\x00\"}", "", "", false},
	{"long value, unterminated", `{"id":"0123456789abcdef0123456789`, "", "", false},
	{"long key", `{"0123456789abcdef0123456789":"a","id":"x"}`, "x", "", true},

	{"duplicate: last wins", `{"id":"a","id":"b"}`, "b", "", true},
	{"duplicate via escape", `{"id":"a","\u0069d":"b"}`, "b", "", true},
	{"later number resets", `{"id":"a","id":1}`, "", "", true},
	{"later null resets", `{"id":"a","type":"t","id":null,"type":null}`, "", "", true},
	{"later object resets", `{"id":"a","id":{"id":"b"}}`, "", "", true},
	{"string after non-string", `{"id":1,"id":"b"}`, "b", "", true},
	{"number id", `{"id":123,"type":"t"}`, "", "t", true},
	{"bool id", `{"id":true,"type":false}`, "", "", true},
	{"null id", `{"id":null}`, "", "", true},
	{"object id", `{"id":{"a":"b"}}`, "", "", true},
	{"array id", `{"id":["x"]}`, "", "", true},
	{"case-sensitive keys", `{"ID":"x","Id":"y","Type":"z"}`, "", "", true},
	{"nested id", `{"data":{"object":{"id":"pi_1","type":"inner"}},"type":"t"}`, "", "t", true},
	{"nested id in array", `{"a":[{"id":"x"},[{"id":"y"}]],"id":"z"}`, "z", "", true},
	{"nested empty containers", `{"a":{},"b":[],"c":[{}],"d":{"e":[]},"id":"x"}`, "x", "", true},
	{"numbers", `{"a":-0,"b":0.5,"c":-12.5e+10,"d":1E-2,"e":[0,1e9],"id":"x"}`, "x", "", true},

	{"top-level array", `[{"id":"x"}]`, "", "", false},
	{"top-level string", `"id"`, "", "", false},
	{"top-level number", `1`, "", "", false},
	{"top-level null", `null`, "", "", false},
	{"empty", ``, "", "", false},
	{"only whitespace", " \n", "", "", false},
	{"BOM", "\xef\xbb\xbf{\"id\":\"x\"}", "", "", false},
	{"unterminated object", `{"id":"x"`, "", "", false},
	{"unterminated string", `{"id":"x`, "", "", false},
	{"trailing comma", `{"id":"x",}`, "", "", false},
	{"trailing comma in array", `{"a":[1,],"id":"x"}`, "", "", false},
	{"extra brace", `{"id":"x"}}`, "", "", false},
	{"two values", `{"id":"x"} {}`, "", "", false},
	{"trailing garbage", "{\"id\":\"x\"}\xff", "", "", false},
	{"leading zero", `{"id":"x","n":01}`, "", "", false},
	{"bare minus", `{"n":-,"id":"x"}`, "", "", false},
	{"dot without digits", `{"n":1.,"id":"x"}`, "", "", false},
	{"exponent without digits", `{"n":1e+,"id":"x"}`, "", "", false},
	{"plus sign", `{"n":+1}`, "", "", false},
	{"short \\u", `{"id":"x\u12"}`, "", "", false},
	{"bad escape", `{"id":"\x41"}`, "", "", false},
	{"raw control character", "{\"id\":\"a\tb\"}", "", "", false},
	{"raw newline in key", "{\"i\nd\":\"x\"}", "", "", false},
	{"single quotes", `{'id':'x'}`, "", "", false},
	{"truncated literal", `{"id":tru}`, "", "", false},
	{"literal with suffix", `{"a":nullx,"id":"x"}`, "", "", false},
	{"missing colon", `{"id" "x"}`, "", "", false},
	{"missing value", `{"id":}`, "", "", false},
	{"non-string key", `{1:"x"}`, "", "", false},
	{"key without value in nested object", `{"a":{"b"},"id":"x"}`, "", "", false},
	{"mismatched brackets", `{"a":{"b":1],"id":"x"}`, "", "", false},
	{"mismatched brackets 2", `{"a":[1},"id":"x"}`, "", "", false},
	{"comma instead of colon", `{"a":{"b",1},"id":"x"}`, "", "", false},
	{"other whitespace", "{\"id\":\"x\"\v}", "", "", false},
	{"non-breaking space", "{\"id\":\"x\"\u00a0}", "", "", false},
}

func TestTopLevelStrings(t *testing.T) {
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			body := []byte(c.body)
			// The expectations are checked against the oracle too, so a wrong one cannot pass.
			if id, typ, ok := referenceTopLevelStrings(body); id != c.id || typ != c.typ || ok != c.ok {
				t.Fatalf("reference = %q, %q, %v; the case wants %q, %q, %v", id, typ, ok, c.id, c.typ, c.ok)
			}
			if id, typ, ok := scan(body); id != c.id || typ != c.typ || ok != c.ok {
				t.Errorf("TopLevelStrings(%q) = %q, %q, %v; want %q, %q, %v", c.body, id, typ, ok, c.id, c.typ, c.ok)
			}
		})
	}
}

func TestTopLevelStringsKeys(t *testing.T) {
	body := []byte("{\"é\":\"1\",\"\\u00e9\":\"2\",\"\xff\":\"3\",\"a\":\"4\",\"a\":5}")
	keys := []string{"é", "\uFFFD", "\xff", "a", "é", "missing"}
	want, _ := referenceMembers(body, keys...)
	if w := []string{"2", "3", "", "", "2", ""}; strings.Join(want, ",") != strings.Join(w, ",") {
		t.Fatalf("reference = %q, want %q", want, w)
	}
	got := []string{"stale", "stale", "stale", "stale", "stale", "stale", "untouched"}
	if !jsonscan.TopLevelStrings(body, got, keys...) {
		t.Fatal("TopLevelStrings = false, want true")
	}
	if strings.Join(got[:len(keys)], ",") != strings.Join(want, ",") || got[len(keys)] != "untouched" {
		t.Errorf("values = %q, want %q then \"untouched\"", got, want)
	}

	got = []string{"stale"}
	if jsonscan.TopLevelStrings([]byte(`{"a":"x"`), got, "a") || got[0] != "" {
		t.Errorf("invalid body: values = %q, want [\"\"] and false", got)
	}
	if !jsonscan.TopLevelStrings([]byte(`{"a":"x"}`), nil) {
		t.Error("no keys: false, want true")
	}
}

func TestTopLevelStringsShortValuesPanics(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Error("no panic with fewer values than keys")
		}
	}()
	jsonscan.TopLevelStrings([]byte(`{}`), make([]string, 1), "id", "type")
}

// TestTopLevelStringsDepth checks encoding/json's limit of 10000 open objects and arrays.
func TestTopLevelStringsDepth(t *testing.T) {
	nest := func(open int) []byte { // open containers, the top-level object included
		inner := open - 1
		return []byte(`{"id":"x","a":` + strings.Repeat(`[{"b":`, inner/2) + strings.Repeat("[", inner%2) + "0" +
			strings.Repeat("]", inner%2) + strings.Repeat("}]", inner/2) + "}")
	}
	for _, open := range []int{2, 3, 9999, 10000, 10001, 10002} {
		body := nest(open)
		wantID, _, wantOK := referenceTopLevelStrings(body)
		if wantOK != (open <= 10000) {
			t.Fatalf("%d open: reference ok = %v; the test assumes encoding/json's limit is 10000", open, wantOK)
		}
		if id, _, ok := scan(body); id != wantID || ok != wantOK {
			t.Errorf("%d open: TopLevelStrings = %q, %v; want %q, %v", open, id, ok, wantID, wantOK)
		}
	}
}

func FuzzTopLevelStrings(f *testing.F) {
	for _, c := range cases {
		f.Add([]byte(c.body), "id")
	}
	f.Add([]byte(stripeEvent), "type")
	f.Add([]byte(`{"é":"x","\u00e9":1}`), "é")
	f.Add([]byte("{\"\xff\":\"x\"}"), "\uFFFD")

	f.Fuzz(func(t *testing.T, body []byte, key string) {
		wantID, wantType, wantOK := referenceTopLevelStrings(body)
		if id, typ, ok := scan(body); id != wantID || typ != wantType || ok != wantOK {
			t.Fatalf("TopLevelStrings(%q) = %q, %q, %v; reference %q, %q, %v", body, id, typ, ok, wantID, wantType, wantOK)
		}

		keys := []string{key, "id", key}
		want, wantOK := referenceMembers(body, keys...)
		got := make([]string, len(keys))
		if ok := jsonscan.TopLevelStrings(body, got, keys...); ok != wantOK || strings.Join(got, "\x00") != strings.Join(want, "\x00") {
			t.Fatalf("TopLevelStrings(%q, %q) = %q, %v; reference %q, %v", body, keys, got, ok, want, wantOK)
		}
	})
}

// stripeEvent is a payment_intent.succeeded event as Stripe sends it, about 1 KiB.
const stripeEvent = `{
  "id": "evt_3PqXyZLkdIwHu7ix0Abc1234",
  "object": "event",
  "api_version": "2024-06-20",
  "created": 1718000000,
  "data": {
    "object": {
      "id": "pi_3PqXyZLkdIwHu7ix0Def5678",
      "object": "payment_intent",
      "amount": 2000,
      "amount_capturable": 0,
      "amount_received": 2000,
      "automatic_payment_methods": {"allow_redirects": "always", "enabled": true},
      "capture_method": "automatic_async",
      "client_secret": "pi_3PqXyZLkdIwHu7ix0Def5678_secret_qRsTuVwXyZ0123456789",
      "confirmation_method": "automatic",
      "created": 1717999990,
      "currency": "usd",
      "customer": "cus_Q1a2b3c4d5e6f7",
      "description": "Order #1042",
      "latest_charge": "ch_3PqXyZLkdIwHu7ix0Ghi9012",
      "livemode": false,
      "metadata": {"order_id": "1042", "note": "caf\u00e9 \"gift\""},
      "payment_method": "pm_1PqXyZLkdIwHu7ixJklMnop",
      "payment_method_types": ["card", "link"],
      "shipping": null,
      "status": "succeeded"
    },
    "previous_attributes": null
  },
  "livemode": false,
  "pending_webhooks": 2,
  "request": {"id": "req_abcDEF123456", "idempotency_key": "8c1f0e2a-3b4c-4d5e-9f60-718293a4b5c6"},
  "type": "payment_intent.succeeded"
}`

func BenchmarkTopLevelStrings(b *testing.B) {
	body := []byte(stripeEvent)
	b.Run("reference", func(b *testing.B) {
		b.SetBytes(int64(len(body)))
		b.ReportAllocs()
		for b.Loop() {
			if id, _, ok := referenceTopLevelStrings(body); !ok || id == "" {
				b.Fatal("no id")
			}
		}
	})
	b.Run("scan", func(b *testing.B) {
		b.SetBytes(int64(len(body)))
		b.ReportAllocs()
		for b.Loop() {
			if id, _, ok := scan(body); !ok || id == "" {
				b.Fatal("no id")
			}
		}
	})
}

// referenceNamed counts, per key, the top-level members whose key equals it under
// strings.EqualFold, and keeps the raw value of the last member with exactly that key: the
// oracle of UniqueTopLevelStrings and TopLevelMember.
func referenceNamed(body []byte, keys ...string) (named []int, raws []json.RawMessage, ok bool) {
	named, raws = make([]int, len(keys)), make([]json.RawMessage, len(keys))
	if !json.Valid(body) {
		return named, raws, false
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return named, raws, false
	}
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return make([]int, len(keys)), make([]json.RawMessage, len(keys)), false
		}
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return make([]int, len(keys)), make([]json.RawMessage, len(keys)), false
		}
		for i, k := range keys {
			if strings.EqualFold(t.(string), k) {
				named[i]++
			}
			if t == k {
				raws[i] = raw
			}
		}
	}
	return named, raws, true
}

func TestUniqueTopLevelStrings(t *testing.T) {
	cases := []struct {
		reason    string
		body      string
		ambiguous int // index into id, type; -1 none
	}{
		{"each key once", `{"id":"a","type":"t","data":{"id":"b","id":"c"}}`, -1},
		{"the same key twice", `{"id":"a","id":"b"}`, 0},
		{"twice with the same value", `{"type":"t","id":"a","id":"a"}`, 0},
		{"an escaped spelling of the same key", `{"id":"a","\u0069d":"b"}`, 0},
		{"a string and a number", `{"id":"a","id":1}`, 0},
		{"another case", `{"id":"a","ID":"b"}`, 0},
		{"another case only, twice", `{"Id":"a","iD":"b"}`, 0},
		{"another case once: not ambiguous, and not the key", `{"ID":"a"}`, -1},
		{"type twice", `{"id":"a","type":"t","Type":"u"}`, 1},
		{"both twice: the first key", `{"type":"t","type":"u","id":"a","id":"b"}`, 0},
		{"KELVIN SIGN folds to k", `{"id":"a","type":"t","k":1,"\u212a":2}`, -1},
		{"U+0130 (dotted capital I) does not fold to i", `{"id":"a","\u0130d":"b"}`, -1},
		{"duplicates in nested objects do not count", `{"data":{"type":"a","type":"b"},"type":"t"}`, -1},
	}
	for _, c := range cases {
		t.Run(c.reason, func(t *testing.T) {
			body := []byte(c.body)
			named, _, _ := referenceNamed(body, "id", "type")
			want := -1
			for i, n := range named {
				if n > 1 && want < 0 {
					want = i
				}
			}
			if want != c.ambiguous {
				t.Fatalf("reference: ambiguous %d (counts %v), the case wants %d", want, named, c.ambiguous)
			}
			values := make([]string, 2)
			ok, ambiguous := jsonscan.UniqueTopLevelStrings(body, values, "id", "type")
			wantValues, _ := referenceMembers(body, "id", "type")
			if !ok || ambiguous != c.ambiguous || strings.Join(values, ",") != strings.Join(wantValues, ",") {
				t.Errorf("UniqueTopLevelStrings(%s) = %v, %d, values %q; want true, %d, %q", c.body, ok, ambiguous, values, c.ambiguous, wantValues)
			}
		})
	}
	// A key that folds to another of a different length: the Kelvin sign names "k".
	if ok, ambiguous := jsonscan.UniqueTopLevelStrings([]byte(`{"k":1,"\u212a":2}`), make([]string, 1), "k"); !ok || ambiguous != 0 {
		t.Errorf(`{"k","\u212a"}: %v, %d; want true, 0 (encoding/json matches them as one key)`, ok, ambiguous)
	}
	if ok, ambiguous := jsonscan.UniqueTopLevelStrings([]byte(`{"id":"a"`), make([]string, 1), "id"); ok || ambiguous != -1 {
		t.Errorf("invalid body: %v, %d; want false, -1", ok, ambiguous)
	}
	keys := []string{"a", "b", "c", "d", "e", "f"} // more keys than the counts' stack buffer
	if ok, ambiguous := jsonscan.UniqueTopLevelStrings([]byte(`{"f":1,"F":2}`), make([]string, len(keys)), keys...); !ok || ambiguous != 5 {
		t.Errorf("six keys: %v, %d; want true, 5", ok, ambiguous)
	}
}

func TestTopLevelMember(t *testing.T) {
	cases := []struct {
		reason, body, key string
		value             string
		named             int
		ok                bool
	}{
		{"a string, as written", `{"id":"a\u0062"}`, "id", `"a\u0062"`, 1, true},
		{"a number, as written", `{"id": 1.50e3 }`, "id", `1.50e3`, 1, true},
		{"an object", `{"data":{"id":"x"}}`, "data", `{"id":"x"}`, 1, true},
		{"missing", `{"x":1}`, "id", ``, 0, true},
		{"another case only", `{"ID":1}`, "id", ``, 1, true},
		{"twice: the last, named twice", `{"id":1,"id":2}`, "id", `2`, 2, true},
		{"not an object", `[1]`, "id", ``, 0, false},
	}
	for _, c := range cases {
		t.Run(c.reason, func(t *testing.T) {
			named, raws, ok := referenceNamed([]byte(c.body), c.key)
			if string(raws[0]) != c.value || named[0] != c.named || ok != c.ok {
				t.Fatalf("reference = %s, %d, %v; the case wants %s, %d, %v", raws[0], named[0], ok, c.value, c.named, c.ok)
			}
			value, n, ok := jsonscan.TopLevelMember([]byte(c.body), c.key)
			if string(value) != c.value || n != c.named || ok != c.ok || (value == nil) != (c.value == "") {
				t.Errorf("TopLevelMember(%s, %q) = %s, %d, %v; want %s, %d, %v", c.body, c.key, value, n, ok, c.value, c.named, c.ok)
			}
		})
	}
}

func FuzzUniqueTopLevelStrings(f *testing.F) {
	for _, c := range cases {
		f.Add([]byte(c.body), "id")
	}
	f.Add([]byte(`{"k":1,"\u212a":2,"K":3}`), "k")
	f.Add([]byte(`{"id":"a","ID":"b"}`), "Id")
	f.Add([]byte("{\"\xff\":1,\"\\ufffd\":2}"), "\uFFFD")

	f.Fuzz(func(t *testing.T, body []byte, key string) {
		keys := []string{key, "id"}
		named, raws, wantOK := referenceNamed(body, keys...)
		want := -1
		for i, n := range named {
			if n > 1 && want < 0 {
				want = i
			}
		}
		wantValues, _ := referenceMembers(body, keys...)
		values := make([]string, len(keys))
		if ok, ambiguous := jsonscan.UniqueTopLevelStrings(body, values, keys...); ok != wantOK || ambiguous != want ||
			strings.Join(values, "\x00") != strings.Join(wantValues, "\x00") {
			t.Fatalf("UniqueTopLevelStrings(%q, %q) = %v, %d, %q; reference %v, %d, %q", body, keys, ok, ambiguous, values, wantOK, want, wantValues)
		}
		if value, n, ok := jsonscan.TopLevelMember(body, key); ok != wantOK || n != named[0] || string(value) != string(raws[0]) {
			t.Fatalf("TopLevelMember(%q, %q) = %q, %d, %v; reference %q, %d, %v", body, key, value, n, ok, raws[0], named[0], wantOK)
		}
	})
}
