package store

import "github.com/redis/go-redis/v9"

// The Redis store's Lua scripts. Each one touches the keys of one hash tag only: a
// subscription's ({s:<subscription>}) or the store's global one ({g}), so every script runs on
// one Redis Cluster node. Keys a script derives (a job's hash from its sequence number, a
// dedupe key from the job's event id) carry the tag of the keys it was given, so they hash to
// the same slot.
//
// The "#!lua" line makes Redis (7.0+) refuse a writing script up front when it is out of memory
// instead of failing at its first write; the writing scripts also check everything that could
// fail before their first write. A script therefore records all of its work or none of it.
//
// Times are unix microseconds, formatted with %d: Lua would print a number of 16 digits as
// "1.7e+15" and lose the rest.

// redisClaim records the events of one subscription, as if they were claimed one by one.
// KEYS: the sequence counter, the due set, then per event its dedupe key and its replay key
// (its dedupe key again when it has none). ARGV[1] is the job key prefix, then 12 values per
// event: event id, subscription UID, type, content type, payload, received, max attempts,
// dedupe window, the replay key's TTL in ms (empty when it has none), the names of its
// sinks separated by spaces, for each sink its ordering key ('-': unordered), and its trace
// context (Event.Trace; a hash written before it existed has no 'tp' field, read as none). An event whose replay key is held (already, or by an earlier
// event of the call) is a duplicate and writes nothing; any other sets its replay key, with the
// TTL, even when its event id is a duplicate. A new event gets one job per sink, with
// consecutive sequence numbers: the first (the head) is the one its dedupe key names and
// counts the event's jobs not yet ended ('n' jobs, 'left'), the others name it ('head'). Each
// job hash holds the whole event. The job of an ordering key joins the key's list
// (P:{s:S}:o:<key>, oldest first) and is due only at its head ('blocked' until then). It
// returns per event its head's sequence number, or 0 for a duplicate. Each job also joins its
// sink's live set (P:{s:S}:live:<sink>, by the event's receipt) and its sink's name the
// subscription's sinks (P:{s:S}:sinks), for SinkDepths. Each new event joins the ledger's
// index (P:{s:S}:ev) and the set of events whose payload is kept (P:{s:S}:kept), both by
// receipt, its head's sequence number zero-padded to 13 digits as the member (so that events
// received in the same microsecond are in sequence order).
var redisClaim = redis.NewScript(`#!lua
local V = 12
local n = (#KEYS - 2) / 2
local base = string.sub(ARGV[1], 1, -3)
local oprefix = base .. 'o:'
for i = 1, 2 do
  local t = redis.call('TYPE', KEYS[i]).ok
  if t ~= 'none' and t ~= (i == 1 and 'string' or 'zset') then
    return redis.error_reply('hookwarden: ' .. KEYS[i] .. ' holds a ' .. t)
  end
end
local seq = tonumber(redis.call('GET', KEYS[1]) or '0')
local fresh, keep, sinks, orders, last = {}, {}, {}, {}, seq
local held, claimed = {}, {}
for i = 1, n do
  local dk, rk, ttl = KEYS[1 + 2 * i], KEYS[2 + 2 * i], ARGV[1 + V * (i - 1) + 9]
  if ttl == '' or not (held[rk] or redis.call('EXISTS', rk) == 1) then
    if ttl ~= '' then
      held[rk], keep[i] = true, true
    end
    if not claimed[dk] and redis.call('EXISTS', dk) == 0 then
      claimed[dk] = true
      local names, okeys = {}, {}
      for name in string.gmatch(ARGV[1 + V * (i - 1) + 10], '%S+') do names[#names + 1] = name end
      for k in string.gmatch(ARGV[1 + V * (i - 1) + 11], '%S+') do okeys[#okeys + 1] = k end
      fresh[i], sinks[i], orders[i] = last + 1, names, okeys
      for k = 1, #names do
        last = last + 1
        local jk = ARGV[1] .. string.format('%d', last)
        if redis.call('EXISTS', jk) == 1 then
          return redis.error_reply('hookwarden: job key ' .. jk .. ' exists already')
        end
      end
    end
  end
end
local out, named, allSinks = {}, {}, {}
for i = 1, n do
  out[i] = 0
  local b = 1 + (i - 1) * V
  if keep[i] then redis.call('SET', KEYS[2 + 2 * i], ARGV[b + 1], 'PX', ARGV[b + 9]) end
  if fresh[i] then
    local head = string.format('%d', fresh[i])
    redis.call('SET', KEYS[1 + 2 * i], head)
    for k, name in ipairs(sinks[i]) do
      local id = string.format('%d', fresh[i] + k - 1)
      local jk = ARGV[1] .. id
      -- The head counts the event's jobs; the others name it.
      local a, b2, c, d = 'n', #sinks[i], 'left', #sinks[i]
      if k > 1 then a, b2, c, d = 'head', head, 'head', head end
      local st, ok = 'pending', orders[i][k] or '-'
      if ok ~= '-' then
        if redis.call('LLEN', oprefix .. ok) > 0 then
          st = 'blocked'
          redis.call('INCR', string.sub(ARGV[1], 1, -3) .. 'blocked')
        end
        redis.call('RPUSH', oprefix .. ok, id)
      end
      redis.call('HSET', jk, 'e', ARGV[b + 1], 'uid', ARGV[b + 2], 'type', ARGV[b + 3], 'ct', ARGV[b + 4],
        'p', ARGV[b + 5], 'recv', ARGV[b + 6], 'max', ARGV[b + 7], 'win', ARGV[b + 8], 'sink', name, 'ok', ok,
        'tp', ARGV[b + 12], 'st', st, 'att', '0', 'run', ARGV[b + 6], 'lease', '0', 'upd', ARGV[b + 6], 'err', '', a, b2, c, d)
      if st == 'pending' then redis.call('ZADD', KEYS[2], ARGV[b + 6], id) end
      redis.call('ZADD', base .. 'live:' .. name, ARGV[b + 6], id)
      if not named[name] then named[name], allSinks[#allSinks + 1] = true, name end
    end
    local member = string.format('%013d', fresh[i])
    redis.call('ZADD', base .. 'ev', ARGV[b + 6], member)
    redis.call('ZADD', base .. 'kept', ARGV[b + 6], member)
    out[i] = fresh[i]
  end
end
if last > seq then redis.call('SET', KEYS[1], string.format('%d', last)) end
if #allSinks > 0 then redis.call('SADD', base .. 'sinks', unpack(allSinks)) end
return out
`)

// redisLease leases due jobs of one subscription. KEYS[1] is the due set. ARGV: now, lease
// deadline, limit, job key prefix, then the sequence numbers to take (none: the oldest due, up to
// the limit). A job is due while its score (run_at when queued, lease deadline + 1 µs when
// running) is at most now, so a running job is due once its lease has passed. It returns the
// leased jobs as {seq, HGETALL} pairs and the subscription's earliest score afterwards.
var redisLease = redis.NewScript(`#!lua
local now = tonumber(ARGV[1])
local seqs = {}
if #ARGV > 4 then
  for i = 5, #ARGV do seqs[#seqs + 1] = ARGV[i] end
else
  seqs = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[1], 'LIMIT', 0, tonumber(ARGV[3]))
end
local running = string.format('%d', tonumber(ARGV[2]) + 1)
local out = {}
for _, sq in ipairs(seqs) do
  local score = redis.call('ZSCORE', KEYS[1], sq)
  if score and tonumber(score) <= now then
    local jk = ARGV[4] .. sq
    if redis.call('EXISTS', jk) == 1 then
      redis.call('HINCRBY', jk, 'att', 1)
      redis.call('HSET', jk, 'st', 'running', 'lease', ARGV[2], 'upd', ARGV[1])
      redis.call('ZADD', KEYS[1], running, sq)
      out[#out + 1] = {sq, redis.call('HGETALL', jk)}
    else
      redis.call('ZREM', KEYS[1], sq)
    end
  end
end
local first = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
return {out, first[2] or ''}
`)

// redisReport applies a worker's report to the job it leased, fenced like the SQL stores: the job
// is still running with the attempt and lease deadline Lease handed out. KEYS: the job, the due
// set, the completed set (complete) or the dead set (dead). ARGV: op, seq, attempt, lease
// deadline, dedupe key prefix, now, run at (retry, release), last error, job key prefix.
// Completing or dead-lettering a job counts it off its event's head ('left'; a job of a
// version before sinks is its own head with nothing else to count). When the event's last job
// ends and none is dead, its jobs and dedupe key get the TTL of its dedupe window, counted
// from the later of its receipt and its jobs' last run as the SQL sweeper counts. A dead job,
// and the other jobs of its event, keep no TTL: Sweep removes them, so that an eviction policy
// for keys with a TTL can never drop a dead letter. An ordered job that ends leaves its key's
// list, and the job then at its head becomes due; a job that ends leaves its sink's live set.
// Returns 1, 2 when it made a job due, or 0 when the lease was lost.
var redisReport = redis.NewScript(`#!lua
` + redisExpireDelivered + `
local f = redis.call('HMGET', KEYS[1], 'st', 'att', 'lease')
if f[1] ~= 'running' or f[2] ~= ARGV[3] or f[3] ~= ARGV[4] then return 0 end
local op, seq, now = ARGV[1], ARGV[2], ARGV[6]
local promoted = 0
-- The job leaves its ordering key's list; the job now at its head becomes due.
local function release()
  local ok = redis.call('HGET', KEYS[1], 'ok')
  if not ok or ok == '-' then return end
  local ol = string.sub(ARGV[9], 1, -3) .. 'o:' .. ok
  redis.call('LREM', ol, 1, seq)
  local nxt = redis.call('LINDEX', ol, 0)
  if nxt then
    local nk = ARGV[9] .. nxt
    if redis.call('HGET', nk, 'st') == 'blocked' then
      redis.call('HSET', nk, 'st', 'pending')
      redis.call('DECR', string.sub(ARGV[9], 1, -3) .. 'blocked')
      redis.call('ZADD', KEYS[2], redis.call('HGET', nk, 'run'), nxt)
      promoted = 1
    end
  end
end
local function ended()
  release()
  redis.call('ZREM', string.sub(ARGV[9], 1, -3) .. 'live:' .. (redis.call('HGET', KEYS[1], 'sink') or 'default'), seq)
  local head = redis.call('HGET', KEYS[1], 'head') or seq
  local hk = ARGV[9] .. head
  if redis.call('HEXISTS', hk, 'left') == 0 then return head, 0 end
  return head, redis.call('HINCRBY', hk, 'left', -1)
end
if op == 'complete' then
  redis.call('HSET', KEYS[1], 'st', 'completed', 'lease', '0', 'upd', now)
  redis.call('ZREM', KEYS[2], seq)
  redis.call('ZADD', KEYS[3], redis.call('HGET', KEYS[1], 'run'), seq)
  local head, left = ended()
  if left <= 0 then expireDelivered(head, ARGV[9], ARGV[5], now) end
elseif op == 'retry' or op == 'release' then
  redis.call('HSET', KEYS[1], 'st', 'retryable', 'run', ARGV[7], 'err', ARGV[8], 'lease', '0', 'upd', now)
  if op == 'release' then redis.call('HINCRBY', KEYS[1], 'att', -1) end
  redis.call('ZADD', KEYS[2], ARGV[7], seq)
elseif op == 'dead' then
  redis.call('HSET', KEYS[1], 'st', 'dead', 'err', ARGV[8], 'lease', '0', 'upd', now)
  redis.call('ZREM', KEYS[2], seq)
  redis.call('ZADD', KEYS[3], now, seq)
  ended()
end
return 1 + promoted
`)

// redisExpireDelivered is the Lua function redisReport and redisPurge share:
// expireDelivered(head, job key prefix, dedupe key prefix, now) gives the keys of the event whose
// head is head, all of whose jobs have ended, the TTL of its dedupe window ('win'), counted from
// the later of its receipt and its jobs' last run as the SQL sweeper counts (deleted when that is
// already past). An event with a dead job keeps no TTL: Sweep removes it, so that an eviction
// policy for keys with a TTL can never drop a dead letter.
const redisExpireDelivered = `
local function expireDelivered(head, prefix, dkprefix, now)
  local g = redis.call('HMGET', prefix .. head, 'recv', 'win', 'e', 'n')
  local last, jobs = tonumber(g[1]), {}
  for k = 0, tonumber(g[4] or '1') - 1 do
    local jk = prefix .. string.format('%d', tonumber(head) + k)
    local h = redis.call('HMGET', jk, 'st', 'run')
    if h[1] == 'dead' then return end
    if h[2] then
      last = math.max(last, tonumber(h[2]))
      jobs[#jobs + 1] = jk
    end
  end
  local ttl = math.floor((last + tonumber(g[2]) - tonumber(now)) / 1000)
  local dk = dkprefix .. g[3]
  if redis.call('GET', dk) == head then jobs[#jobs + 1] = dk end
  for _, k in ipairs(jobs) do
    if ttl <= 0 then
      redis.call('DEL', k)
    else
      redis.call('PEXPIRE', k, string.format('%d', ttl))
    end
  end
end
`

// redisPurge discards a dead letter as the SQL stores' Purge does: the job is completed, never
// delivered (its last error says purged, 'upd' is when), and moves from the dead set to the
// completed set (by its last run, as a completed job is, for Sweep). A dead job has already
// left its ordering key's list and its sink's live set, and been counted off its event's head;
// if it was the event's last dead job and every other has ended, the event's keys get the TTL
// a completed event gets (expireDelivered). KEYS: the job, the completed set, the dead set.
// ARGV: seq, now, dedupe key prefix, job key prefix, the last error to write. Returns 1, or 0
// when the job is not dead.
var redisPurge = redis.NewScript(`#!lua
` + redisExpireDelivered + `
if redis.call('HGET', KEYS[1], 'st') ~= 'dead' then return 0 end
redis.call('HSET', KEYS[1], 'st', 'completed', 'err', ARGV[5], 'lease', '0', 'upd', ARGV[2])
redis.call('ZREM', KEYS[3], ARGV[1])
redis.call('ZADD', KEYS[2], redis.call('HGET', KEYS[1], 'run'), ARGV[1])
local head = redis.call('HGET', KEYS[1], 'head') or ARGV[1]
if tonumber(redis.call('HGET', ARGV[4] .. head, 'left') or '0') <= 0 then
  expireDelivered(head, ARGV[4], ARGV[3], ARGV[2])
end
return 1
`)

// redisReplay moves a dead job back to pending with a fresh attempt budget, counted as a replay
// by hand ('rep' one more, 'fk' 0: the original key), and counts it on its event's head
// again, and in its sink's live set. KEYS: the job, the due set, the dead set. ARGV: seq, now, dedupe key
// prefix, job key prefix. Returns 1, 0 when the job is not dead, -1 when its event id was
// claimed again by another event.
var redisReplay = redis.NewScript(`#!lua
if redis.call('HGET', KEYS[1], 'st') ~= 'dead' then return 0 end
local head = redis.call('HGET', KEYS[1], 'head') or ARGV[1]
local dk = ARGV[3] .. redis.call('HGET', KEYS[1], 'e')
local cur = redis.call('GET', dk)
if cur and cur ~= head then return -1 end
if not cur then redis.call('SET', dk, head) end
redis.call('PERSIST', dk)
redis.call('PERSIST', KEYS[1])
local hk = ARGV[4] .. head
if redis.call('HEXISTS', hk, 'left') == 1 then redis.call('HINCRBY', hk, 'left', 1) end
local st, ok = 'pending', redis.call('HGET', KEYS[1], 'ok')
if ok and ok ~= '-' then
  local ol = string.sub(ARGV[4], 1, -3) .. 'o:' .. ok
  if redis.call('LLEN', ol) > 0 then
    st = 'blocked'
    redis.call('INCR', string.sub(ARGV[4], 1, -3) .. 'blocked')
  end
  redis.call('RPUSH', ol, ARGV[1])
end
redis.call('HSET', KEYS[1], 'st', st, 'att', '0', 'run', ARGV[2], 'lease', '0', 'upd', ARGV[2], 'fk', '0')
redis.call('HINCRBY', KEYS[1], 'rep', 1)
redis.call('ZREM', KEYS[3], ARGV[1])
local sink = redis.call('HGET', KEYS[1], 'sink') or 'default'
redis.call('ZADD', string.sub(ARGV[4], 1, -3) .. 'live:' .. sink, redis.call('HGET', KEYS[1], 'recv'), ARGV[1])
redis.call('SADD', string.sub(ARGV[4], 1, -3) .. 'sinks', sink)
if st == 'pending' then redis.call('ZADD', KEYS[2], ARGV[2], ARGV[1]) end
return 1
`)

// redisSweep deletes the events of one subscription whose every job is done before the
// cutoff (completed with its last run before it, or dead since before it) and that were
// received before it: their jobs and their dedupe key. It finds them through their completed
// and dead jobs; entries whose job a TTL already removed leave the sets. KEYS: the completed
// set, the dead set. ARGV: cutoff, batch size, job key prefix, dedupe key prefix. Returns
// {events deleted, set entries removed, 1 if a set had a full batch}.
var redisSweep = redis.NewScript(`#!lua
local cutoff, batch = tonumber(ARGV[1]), tonumber(ARGV[2])
local deleted, dropped, full = 0, 0, 0
local function done(h)
  return (h[1] == 'completed' and tonumber(h[2]) < cutoff) or (h[1] == 'dead' and tonumber(h[3]) < cutoff)
end
local function sweep(set, state)
  local m = redis.call('ZRANGEBYSCORE', set, '-inf', '(' .. ARGV[1], 'LIMIT', 0, batch)
  if #m == batch then full = 1 end
  for _, sq in ipairs(m) do
    local f = redis.call('HMGET', ARGV[3] .. sq, 'st', 'recv', 'head', 'e')
    if f[1] ~= state then
      if redis.call('ZREM', set, sq) == 1 then dropped = dropped + 1 end
    elseif tonumber(f[2]) < cutoff then
      local head = f[3] or sq
      local n = tonumber(redis.call('HGET', ARGV[3] .. head, 'n') or '1')
      local jobs, all = {}, true
      for k = 0, n - 1 do
        local s = string.format('%d', tonumber(head) + k)
        local h = redis.call('HMGET', ARGV[3] .. s, 'st', 'run', 'upd')
        if h[1] then
          if done(h) then jobs[#jobs + 1] = s else all = false end
        end
      end
      if all then
        for _, s in ipairs(jobs) do
          redis.call('DEL', ARGV[3] .. s)
          dropped = dropped + redis.call('ZREM', KEYS[1], s) + redis.call('ZREM', KEYS[2], s)
        end
        local dk = ARGV[4] .. f[4]
        if redis.call('GET', dk) == head then redis.call('DEL', dk) end
        deleted = deleted + 1
      end
    end
  end
end
sweep(KEYS[1], 'completed')
sweep(KEYS[2], 'dead')
return {deleted, dropped, full}
`)

// redisDeadLetters lists one subscription's oldest dead jobs. KEYS[1]: the dead set. ARGV:
// limit, job key prefix. Returns {seq, HGETALL} pairs.
var redisDeadLetters = redis.NewScript(`#!lua flags=no-writes
local out = {}
for _, sq in ipairs(redis.call('ZRANGE', KEYS[1], 0, tonumber(ARGV[1]) - 1)) do
  local h = redis.call('HGETALL', ARGV[2] .. sq)
  if #h > 0 then out[#out + 1] = {sq, h} end
end
return out
`)

// The global scripts keep the hints that let Lease find subscriptions with due jobs without
// visiting every subscription: hint[S] is at most the earliest due score of S whenever S has a
// job. Writers that add or bring forward a job lower the hint and bump ver[S]; Lease raises (or
// drops) a hint only through redisSettle, which refuses when ver[S] changed since Lease read
// it or a claim on S is in flight (a token in tok:<S>). A claimer that died between its claim
// and its settling leaves a token that blocks raising S's hint until it expires, so its job
// is found on the next polls instead of being hidden.

// redisPremark registers the subscriptions of a claim batch and marks their claims in flight.
// KEYS: subscription → index hash, index → subscription hash, index counter, hint set, version
// hash. ARGV: token, token lifetime in ms, token key prefix, then pairs of subscription and the
// earliest received time of its events. Returns the subscriptions' indexes.
var redisPremark = redis.NewScript(`#!lua
local t = redis.call('TIME')
local expires = string.format('%d', tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000) + tonumber(ARGV[2]))
local out = {}
for i = 4, #ARGV, 2 do
  local s = ARGV[i]
  local idx = redis.call('HGET', KEYS[1], s)
  if not idx then
    idx = string.format('%d', redis.call('INCR', KEYS[3]))
    redis.call('HSET', KEYS[1], s, idx)
    redis.call('HSET', KEYS[2], idx, s)
  end
  out[#out + 1] = tonumber(idx)
  redis.call('ZADD', ARGV[3] .. s, expires, ARGV[1])
  redis.call('HINCRBY', KEYS[5], s, 1)
  redis.call('ZADD', KEYS[4], 'LT', ARGV[i + 1], s)
end
return out
`)

// redisPostmark ends the claims marked by redisPremark. KEYS[1]: the version hash. ARGV: token,
// token key prefix, then the subscriptions.
var redisPostmark = redis.NewScript(`#!lua
for i = 3, #ARGV do
  redis.call('ZREM', ARGV[2] .. ARGV[i], ARGV[1])
  redis.call('HINCRBY', KEYS[1], ARGV[i], 1)
end
return 1
`)

// redisTouch lowers hints after a job was brought forward (retry, release, replay, the sweeper's
// repair). KEYS: the hint set, the version hash. ARGV: pairs of subscription and due score.
var redisTouch = redis.NewScript(`#!lua
for i = 1, #ARGV, 2 do
  redis.call('HINCRBY', KEYS[2], ARGV[i], 1)
  redis.call('ZADD', KEYS[1], 'LT', ARGV[i + 1], ARGV[i])
end
return 1
`)

// redisCandidates lists subscriptions whose hint is due. KEYS: the hint set, the version hash.
// ARGV: now, limit. Returns subscription, version pairs, earliest hint first.
var redisCandidates = redis.NewScript(`#!lua flags=no-writes
local out = {}
for _, s in ipairs(redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[1], 'LIMIT', 0, tonumber(ARGV[2]))) do
  out[#out + 1] = s
  out[#out + 1] = redis.call('HGET', KEYS[2], s) or ''
end
return out
`)

// redisSettle sets the hints of the subscriptions a Lease visited to their earliest due score
// (an empty score drops the hint), unless a claim is in flight on one or its version moved. KEYS: the hint
// set, the version hash. ARGV: token key prefix, then triples of subscription, version read,
// earliest score.
var redisSettle = redis.NewScript(`#!lua
local t = redis.call('TIME')
local now = string.format('%d', tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000))
for i = 2, #ARGV, 3 do
  local s, tk = ARGV[i], ARGV[1] .. ARGV[i]
  redis.call('ZREMRANGEBYSCORE', tk, '-inf', now)
  if redis.call('EXISTS', tk) == 0 and (redis.call('HGET', KEYS[2], s) or '') == ARGV[i + 1] then
    if ARGV[i + 2] == '' then
      redis.call('ZREM', KEYS[1], s)
    else
      redis.call('ZADD', KEYS[1], ARGV[i + 2], s)
    end
  end
end
return 1
`)

// redisLedgerEvent is the Lua function the ledger's read scripts share: ledgerEvent(head, job
// key prefix, with payload) is the event whose head has sequence number head, as {head, its
// fields (e, uid, type, ct, recv, max, tp, fgt, n, p: false unless asked), its jobs ({seq,
// sink, st, att, err, upd, rep} each)}, or nil when its keys are gone (expired, swept).
const redisLedgerEvent = `
local function ledgerEvent(head, prefix, withPayload)
  local f = redis.call('HMGET', prefix .. string.format('%d', head), 'e', 'uid', 'type', 'ct', 'recv', 'max', 'tp', 'fgt', 'n', 'p')
  if not f[1] then return nil end
  local jobs = {}
  for k = 0, tonumber(f[9] or '1') - 1 do
    local s = string.format('%d', head + k)
    local h = redis.call('HMGET', prefix .. s, 'sink', 'st', 'att', 'err', 'upd', 'rep')
    if h[2] then jobs[#jobs + 1] = {s, h[1] or 'default', h[2], h[3] or '0', h[4] or '', h[5] or '0', h[6] or '0'} end
  end
  if not withPayload then f[10] = false end
  return {string.format('%d', head), f, jobs}
end
`

// redisEvents walks one subscription's ledger index (P:{s:S}:ev, events by receipt) for a page
// of Events. KEYS[1]: the index. ARGV: the lowest score (with '(' when exclusive), the highest
// ('(' until, or '+inf'), a member to skip up to at the lowest score (empty: none; the
// cursor's own subscription skips its events up to the cursor), the type and the sink (empty:
// any),
// how many events to return at most, how many index entries to read at most (the bound on a
// sparse filter), the job key prefix. Returns {events (as ledgerEvent), 1 if the read stopped at
// its bound before the range ended, the last member read, its score}.
var redisEvents = redis.NewScript(`#!lua flags=no-writes
` + redisLedgerEvent + `
local want, budget, typ, sink = tonumber(ARGV[6]), tonumber(ARGV[7]), ARGV[4], ARGV[5]
local low = tonumber((string.gsub(ARGV[1], '^%(', '')))
local out, read, offset, last, score = {}, 0, 0, '', ''
while #out < want and read < budget do
  local m = redis.call('ZRANGE', KEYS[1], ARGV[1], ARGV[2], 'BYSCORE', 'LIMIT', offset, math.min(budget - read, 256), 'WITHSCORES')
  if #m == 0 then break end
  for i = 1, #m, 2 do
    read, offset, last, score = read + 1, offset + 1, m[i], m[i + 1]
    if not (ARGV[3] ~= '' and tonumber(m[i + 1]) == low and m[i] <= ARGV[3]) then
      local e = ledgerEvent(tonumber(m[i]), ARGV[8], false)
      local ok = e and (typ == '' or e[2][3] == typ)
      if ok and sink ~= '' then
        ok = false
        for _, j in ipairs(e[3]) do
          if j[2] == sink then ok = true end
        end
      end
      if ok then
        out[#out + 1] = e
        if #out >= want then break end
      end
    end
    if read >= budget then break end
  end
end
local stopped = 0
if #out < want and read >= budget then stopped = 1 end
return {out, stopped, last, score}
`)

// redisEventOf reads one event of the ledger with its payload. KEYS[1]: its dedupe key. ARGV:
// the job key prefix. Returns ledgerEvent's answer, or an empty array when it is not held.
var redisEventOf = redis.NewScript(`#!lua flags=no-writes
` + redisLedgerEvent + `
local head = redis.call('GET', KEYS[1])
if not head then return {} end
return ledgerEvent(tonumber(head), ARGV[1], true) or {}
`)

// redisRequeue puts the done jobs of events of one subscription back on the delivery path as a
// replay by hand, as the SQL stores' Requeue does: pending (or blocked behind its ordering
// key, as a claim would queue it), attempts 0, run at now, 'rep' one more, 'fk' as asked;
// counted on its event's head again ('left') and in its sink's live set, out of the completed
// or dead set. The keys of a replayed event lose their TTL (a delivered event's): the report
// of its last job sets it again. KEYS[1]: the due set. ARGV: job key prefix, dedupe key prefix,
// sink (empty: every sink), fresh key ('1' or '0'), now, then the event ids. Returns {requeued,
// skipped (on their way), forgotten (payload dropped, or no longer held), without the sink}.
var redisRequeue = redis.NewScript(`#!lua
local base = string.sub(ARGV[1], 1, -3)
local sink, now = ARGV[3], ARGV[5]
local requeued, skipped, forgotten, nosink = 0, 0, 0, 0
for i = 6, #ARGV do
  local dk = ARGV[2] .. ARGV[i]
  local head = redis.call('GET', dk)
  local hk = ARGV[1] .. (head or '')
  if not head or redis.call('EXISTS', hk) == 0 or redis.call('HEXISTS', hk, 'fgt') == 1 then
    forgotten = forgotten + 1
  else
    local n = tonumber(redis.call('HGET', hk, 'n') or '1')
    local match = {}
    for k = 0, n - 1 do
      local s = string.format('%d', tonumber(head) + k)
      local h = redis.call('HMGET', ARGV[1] .. s, 'st', 'sink', 'ok', 'recv')
      if h[1] and (sink == '' or (h[2] or 'default') == sink) then
        match[#match + 1] = {s, h[1], h[2] or 'default', h[3] or '-', h[4]}
      end
    end
    if #match == 0 then nosink = nosink + 1 end
    local persisted = false
    for _, m in ipairs(match) do
      local s, st, name, ok = m[1], m[2], m[3], m[4]
      local jk = ARGV[1] .. s
      if st ~= 'completed' and st ~= 'dead' then
        skipped = skipped + 1
      else
        if not persisted then
          persisted = true
          redis.call('PERSIST', dk)
          for k = 0, n - 1 do redis.call('PERSIST', ARGV[1] .. string.format('%d', tonumber(head) + k)) end
        end
        redis.call('ZREM', base .. (st == 'completed' and 'done' or 'dead'), s)
        if redis.call('HEXISTS', hk, 'left') == 1 then redis.call('HINCRBY', hk, 'left', 1) end
        local state = 'pending'
        if ok ~= '-' then
          local ol = base .. 'o:' .. ok
          if redis.call('LLEN', ol) > 0 then
            state = 'blocked'
            redis.call('INCR', base .. 'blocked')
          end
          redis.call('RPUSH', ol, s)
        end
        redis.call('HSET', jk, 'st', state, 'att', '0', 'run', now, 'lease', '0', 'upd', now, 'err', '', 'fk', ARGV[4])
        redis.call('HINCRBY', jk, 'rep', 1)
        redis.call('ZADD', base .. 'live:' .. name, m[5], s)
        redis.call('SADD', base .. 'sinks', name)
        if state == 'pending' then redis.call('ZADD', KEYS[1], now, s) end
        requeued = requeued + 1
      end
    end
  end
end
return {requeued, skipped, forgotten, nosink}
`)

// redisForget drops the payloads of up to a limit of one subscription's events received before
// the cutoff whose every job was completed before it: the 'p' field of each job, the time in
// the head's 'fgt', and the event leaves the kept set (P:{s:S}:kept), so that a later call
// does not read it again. Entries whose event is gone leave the set too. KEYS[1]: the kept set.
// ARGV: cutoff, limit, job key prefix, now, how many entries to read at most. Returns how many
// payloads it dropped.
var redisForget = redis.NewScript(`#!lua
local cutoff, limit, budget = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[5])
local forgot, offset, read = 0, 0, 0
while forgot < limit and read < budget do
  local m = redis.call('ZRANGE', KEYS[1], '-inf', '(' .. ARGV[1], 'BYSCORE', 'LIMIT', offset, 256)
  if #m == 0 then break end
  for _, member in ipairs(m) do
    read = read + 1
    local head = tonumber(member)
    local hk = ARGV[3] .. string.format('%d', head)
    if redis.call('EXISTS', hk) == 0 then
      redis.call('ZREM', KEYS[1], member)
    else
      local jobs, all = {}, true
      for k = 0, tonumber(redis.call('HGET', hk, 'n') or '1') - 1 do
        local jk = ARGV[3] .. string.format('%d', head + k)
        local h = redis.call('HMGET', jk, 'st', 'upd')
        if h[1] then
          if h[1] == 'completed' and tonumber(h[2]) < cutoff then jobs[#jobs + 1] = jk else all = false end
        end
      end
      if all then
        for _, jk in ipairs(jobs) do redis.call('HDEL', jk, 'p') end
        redis.call('HSET', hk, 'fgt', ARGV[4])
        redis.call('ZREM', KEYS[1], member)
        forgot = forgot + 1
      else
        offset = offset + 1
      end
    end
    if forgot >= limit or read >= budget then break end
  end
end
return forgot
`)

// redisTrimIndex drops from a ledger set (the index or the kept set) the entries received
// before the cutoff whose event is gone (expired by its TTL or swept). KEYS[1]: the set. ARGV:
// cutoff, batch size, offset (the entries a previous call kept), job key prefix. Returns
// {entries dropped, entries kept, 1 if the batch was full}.
var redisTrimIndex = redis.NewScript(`#!lua
local m = redis.call('ZRANGE', KEYS[1], '-inf', '(' .. ARGV[1], 'BYSCORE', 'LIMIT', tonumber(ARGV[3]), tonumber(ARGV[2]))
local dropped, kept = 0, 0
for _, member in ipairs(m) do
  if redis.call('EXISTS', ARGV[4] .. string.format('%d', tonumber(member))) == 0 then
    redis.call('ZREM', KEYS[1], member)
    dropped = dropped + 1
  else
    kept = kept + 1
  end
end
local full = 0
if #m == tonumber(ARGV[2]) then full = 1 end
return {dropped, kept, full}
`)
