// The rate-limit scripts of the Redis ledger (docs/ledger.md, "Key rate limits"). Each runs without interleaving,
// so a check and the admission it decides are one atomic step across every gateway replica. Time is Redis's own
// (TIME): every replica's request lands on one clock, so replica clock skew cannot widen a window.
// KEYS (both scripts): the key's requests set, tokens set, in-flight set, and the running sum of the tokens set (one
// account's hash tag: one slot). The sum makes admission O(log n): only members leaving the window are read.
// requests: member = request id, score = admission time (ms). tokens: member = "<id>|<tokens>", score = admission
// time. in flight: member = request id, score = when the slot lapses if never released (a crashed replica).

// ARGV: id, window (ms), in-flight lapse (ms), requests limit, tokens limit, tokens of this request, in-flight limit
// (a limit of 0: none, its set untouched). Returns {1, now} when admitted, else {0, which (1 requests, 2 tokens,
// 3 in flight), used, limit, retry after (ms; -1 unknown: a slot frees when a request finishes, or never for a
// request that alone needs more tokens than the limit)}.
export const RATE_ADMIT_SCRIPT = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local id = ARGV[1]
local window = tonumber(ARGV[2])
local lapse = tonumber(ARGV[3])
local rl = tonumber(ARGV[4])
local tl = tonumber(ARGV[5])
local amount = tonumber(ARGV[6])
local fl = tonumber(ARGV[7])
if fl > 0 then
  redis.call('ZREMRANGEBYSCORE', KEYS[3], '-inf', now)
  local n = redis.call('ZCARD', KEYS[3])
  if n >= fl then return {0, 3, n, fl, -1} end
end
if rl > 0 then
  redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - window)
  local n = redis.call('ZCARD', KEYS[1])
  if n >= rl then
    -- Room comes back when the (n - rl + 1) oldest admissions have left the window.
    local e = redis.call('ZRANGE', KEYS[1], n - rl, n - rl, 'WITHSCORES')
    return {0, 1, n, rl, tonumber(e[2]) + window - now}
  end
end
local used = 0
if tl > 0 then
  used = tonumber(redis.call('GET', KEYS[4]) or '0') or 0
  local gone = redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', now - window)
  if #gone > 0 then
    for _, m in ipairs(gone) do used = used - (tonumber(string.match(m, '|(%d+)$')) or 0) end
    redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now - window)
  end
  -- The sum lapses with its set; an empty set counts nothing whatever the sum says.
  if used < 0 or redis.call('ZCARD', KEYS[2]) == 0 then used = 0 end
  redis.call('SET', KEYS[4], used, 'PX', window + 1000)
  if amount > tl then return {0, 2, used, tl, -1} end
  if used + amount > tl then
    -- Room comes back when enough of the oldest have left: only refusals read the whole set.
    local entries = redis.call('ZRANGE', KEYS[2], 0, -1, 'WITHSCORES')
    local left = used
    for i = 1, #entries, 2 do
      left = left - (tonumber(string.match(entries[i], '|(%d+)$')) or 0)
      if left + amount <= tl then return {0, 2, used, tl, tonumber(entries[i + 1]) + window - now} end
    end
    return {0, 2, used, tl, -1}
  end
end
if rl > 0 then
  redis.call('ZADD', KEYS[1], now, id)
  redis.call('PEXPIRE', KEYS[1], window + 1000)
end
if tl > 0 then
  redis.call('ZADD', KEYS[2], now, id .. '|' .. amount)
  redis.call('PEXPIRE', KEYS[2], window + 1000)
  redis.call('SET', KEYS[4], used + amount, 'PX', window + 1000)
end
if fl > 0 then
  redis.call('ZADD', KEYS[3], now + lapse, id)
  local ttl = redis.call('PTTL', KEYS[3])
  if ttl < lapse + 1000 then redis.call('PEXPIRE', KEYS[3], lapse + 1000) end
end
return {1, now}
`;

// ARGV: id, the tokens it was admitted with, the tokens it used (-1: it was never served and leaves every set, its
// request count included). The in-flight slot is freed either way; a used count replaces the admitted one at the
// same admission time, and the sum moves by the difference.
export const RATE_SETTLE_SCRIPT = `
local id = ARGV[1]
local held = id .. '|' .. ARGV[2]
redis.call('ZREM', KEYS[3], id)
if ARGV[3] == '-1' then redis.call('ZREM', KEYS[1], id) end
-- Only a member still in the window moves the sum: one that left was taken out of it then.
local s = redis.call('ZSCORE', KEYS[2], held)
if s then
  redis.call('ZREM', KEYS[2], held)
  local used = tonumber(ARGV[3])
  if used < 0 then used = 0 end
  if used > 0 then redis.call('ZADD', KEYS[2], s, id .. '|' .. used) end
  local sum = redis.call('INCRBY', KEYS[4], used - tonumber(ARGV[2]))
  if sum < 0 then redis.call('SET', KEYS[4], 0, 'KEEPTTL') end
end
return 1
`;
