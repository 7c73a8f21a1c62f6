// The rate-limit scripts of the Redis ledger (docs/ledger.md, "Key rate limits"). Each runs without interleaving,
// so a check and the admission it decides are one atomic step across every gateway replica. Time is Redis's own
// (TIME): every replica's request lands on one clock, so replica clock skew cannot widen a window.
// KEYS (both scripts): the key's requests set, tokens set and in-flight set (one account's hash tag: one slot).
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
if tl > 0 then
  redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now - window)
  local entries = redis.call('ZRANGE', KEYS[2], 0, -1, 'WITHSCORES')
  local used = 0
  local sizes = {}
  for i = 1, #entries, 2 do
    local s = tonumber(string.match(entries[i], '|(%d+)$')) or 0
    sizes[#sizes + 1] = s
    used = used + s
  end
  if amount > tl then return {0, 2, used, tl, -1} end
  if used + amount > tl then
    local left = used
    for i = 1, #sizes do
      left = left - sizes[i]
      if left + amount <= tl then return {0, 2, used, tl, tonumber(entries[2 * i]) + window - now} end
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
// same admission time.
export const RATE_SETTLE_SCRIPT = `
local id = ARGV[1]
local held = id .. '|' .. ARGV[2]
redis.call('ZREM', KEYS[3], id)
if ARGV[3] == '-1' then
  redis.call('ZREM', KEYS[1], id)
  redis.call('ZREM', KEYS[2], held)
  return 1
end
local s = redis.call('ZSCORE', KEYS[2], held)
if s then
  redis.call('ZREM', KEYS[2], held)
  if tonumber(ARGV[3]) > 0 then redis.call('ZADD', KEYS[2], s, id .. '|' .. ARGV[3]) end
end
return 1
`;
