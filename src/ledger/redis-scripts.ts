import { KEPT_ID_TTL_MS } from './keys.ts';

// The ledger's Lua scripts (Redis runs each without interleaving: every script is one atomic step). redis.ts sends
// them by EVALSHA; their KEYS all carry one account's hash tag, so each runs in one Redis Cluster slot.
// Ids: a call carrying an id is applied once. A call that timed out on the client still runs when Redis
// answers again, and so does every replay sent meanwhile; all but the first find the id and change nothing. An id is
// a field of the account's id set of the current period (value: the first counter's total as first applied, or 'R'
// for a reservation released unrecorded, which a record still counts); lookups read the current and previous set.
const FIND_RECORDED = `
local function recorded(cur, prev, id)
  local v = redis.call('HGET', cur, id)
  if v and v ~= 'R' then return v end
  v = redis.call('HGET', prev, id)
  if v and v ~= 'R' then return v end
  return false
end
`;

// Adds of a batch (encodeAddBatch writes its KEYS and ARGV). KEYS: the batch's distinct keys, each once: the account's
// id sets (current, previous) first when a call carries an id, then every counter and hold set. ARGV: the id sets'
// expiry (ms), the number of calls, '1' when KEYS starts with the id sets, each key's expiry (ms, 0 = none) joined by
// ',', then per call: id ('' = none), its increments as "<key index>:<amount>" joined by ',', its hold sets as key
// indexes joined by ',', the hold member to drop ("<id>|<amount>"). Keys go once per batch, not once per request: a
// batch of the same account's requests names the same few counters, and each argument costs the client.
// A counter may appear in several calls (several requests of one account in one batch): each INCRBY returns the
// running total, so every request still learns the total after its own increment. The overflow check runs on
// running totals too, before anything is written. The expiry is set when the increment created the key (its value
// equals the amount), once per window. The holds go in the same script: a request's spend and its hold are never
// both counted. A call already applied (or earlier in this batch) returns its first total, then the current ones.
// A journaled record also names a "keep" hash (ARGV[5]: its lifetime, ms; per call: its key index or ''): its id is
// marked there too, and found there for as long as the journal segment holding the record exists (the gateway
// deletes the hash with the segment), so a replay after the id sets lapsed still counts once.
export const ADD_SCRIPT = `
${FIND_RECORDED}
local idsAt = tonumber(ARGV[1])
local nc = tonumber(ARGV[2])
local keepTtl = tonumber(ARGV[5])
local cur, prev
if ARGV[3] == '1' then
  cur = KEYS[1]
  prev = KEYS[2]
end
local at = {}
local nk = 0
for v in string.gmatch(ARGV[4], '[^,]+') do
  nk = nk + 1
  at[nk] = tonumber(v)
end
-- Per call: id, increments (key index, amount as sent), hold key indexes, member, keep index, already applied.
local ids, incs, holds, member, keep, dup = {}, {}, {}, {}, {}, {}
for c = 1, nc do
  local a = 1 + 5 * c
  ids[c] = ARGV[a]
  local list = {}
  for k, by in string.gmatch(ARGV[a + 1], '(%d+):(%-?%d+)') do list[#list + 1] = {tonumber(k), by} end
  incs[c] = list
  local hl = {}
  for k in string.gmatch(ARGV[a + 2], '%d+') do hl[#hl + 1] = tonumber(k) end
  holds[c] = hl
  member[c] = ARGV[a + 3]
  keep[c] = tonumber(ARGV[a + 4])
end
local function landed(c)
  local v = recorded(cur, prev, ids[c])
  if v or not keep[c] then return v end
  v = redis.call('HGET', KEYS[keep[c]], ids[c])
  if v then return v end
  return false
end
-- A batch is one account: one pair of id sets, so ids seen earlier in it are keyed by id alone.
local running = {}
local seen = {}
for c = 1, nc do
  local id = ids[c]
  if id ~= '' then
    if seen[id] or landed(c) then dup[c] = true else seen[id] = true end
  end
  if not dup[c] then
    for _, inc in ipairs(incs[c]) do
      local key = KEYS[inc[1]]
      local v = running[key] or tonumber(redis.call('GET', key) or '0') or 0
      v = v + tonumber(inc[2])
      if v > 9007199254740991 then return redis.error_reply('BYOK_OVERFLOW ' .. key) end
      running[key] = v
    end
  end
end
local out = {}
local n = 0
local remembered = false
for c = 1, nc do
  if dup[c] then
    local first = landed(c)
    for i, inc in ipairs(incs[c]) do
      n = n + 1
      if i == 1 then out[n] = tonumber(first) else out[n] = tonumber(redis.call('GET', KEYS[inc[1]]) or '0') or 0 end
    end
  else
    local first = 0
    for i, inc in ipairs(incs[c]) do
      local v = redis.call('INCRBY', KEYS[inc[1]], inc[2])
      local by = tonumber(inc[2])
      if at[inc[1]] > 0 and v == by then redis.call('PEXPIREAT', KEYS[inc[1]], at[inc[1]]) end
      if i == 1 then first = v end
      n = n + 1
      out[n] = v
    end
    for _, k in ipairs(holds[c]) do redis.call('ZREM', KEYS[k], member[c]) end
    if ids[c] ~= '' then
      redis.call('HSET', cur, ids[c], first)
      remembered = true
      if keep[c] then
        redis.call('HSET', KEYS[keep[c]], ids[c], first)
        redis.call('PEXPIRE', KEYS[keep[c]], keepTtl)
      end
    end
  end
end
if remembered then redis.call('PEXPIREAT', cur, idsAt) end
return out
`;

/** One add of a batch, as encodeAddBatch needs it. */
export interface AddCall {
  /** Applied once per id ('' = no id). */
  id: string;
  increments: readonly { key: string; by: number; expiresAt: number | null }[];
  settle: { id: string; amount: number; holdKeys: readonly string[] } | undefined;
  /** A journaled record's keep hash (needs an id). */
  keep?: string | undefined;
}

/**
 * ADD_SCRIPT's KEYS and ARGV for a batch of one account's adds. `idSets`: the account's id sets and when the current
 * one lapses, when any call carries an id. A key's expiry is its first increment's (a key is one window: all agree).
 */
export function encodeAddBatch(
  calls: readonly AddCall[],
  idSets: { current: string; previous: string; expiresAt: number } | undefined,
): { keys: string[]; args: string[] } {
  const keys: string[] = [];
  const expiries: (number | null)[] = [];
  const index = new Map<string, number>();
  if (idSets) {
    keys.push(idSets.current, idSets.previous);
    expiries.push(null, null);
  }
  // Lua indexes from 1: a key's index is the length after pushing it.
  const slot = (key: string, expiresAt: number | null): number => {
    let i = index.get(key);
    if (i === undefined) {
      i = keys.push(key);
      expiries.push(expiresAt);
      index.set(key, i);
    }
    return i;
  };
  const args: string[] = [
    String(idSets?.expiresAt ?? 0),
    String(calls.length),
    idSets ? '1' : '0',
    '',
    String(KEPT_ID_TTL_MS),
  ];
  for (const c of calls) {
    let incs = '';
    for (const inc of c.increments) incs += `${incs === '' ? '' : ','}${slot(inc.key, inc.expiresAt)}:${inc.by}`;
    let holds = '';
    for (const h of c.settle?.holdKeys ?? []) holds += `${holds === '' ? '' : ','}${slot(h, null)}`;
    args.push(
      c.id,
      incs,
      holds,
      c.settle ? `${c.settle.id}|${c.settle.amount}` : '',
      c.keep && c.id !== '' ? String(slot(c.keep, null)) : '',
    );
  }
  args[3] = expiries.map((e) => e ?? 0).join(',');
  return { keys, args };
}

// The running Redis process, read inside a script (so through any proxy it is the process that runs the scripts):
// counters restored from an RDB snapshot (or an empty restart) live in a process whose run_id no account was validated
// for. INFO builds and Lua scans a ~1.5 KB text, so only the rare scripts read it here (restore, and RUN_ID_SCRIPT once
// per connection); admission gets it as an argument (RedisLedger reads it per connection, see redis.ts).
const RUN_ID = `local runid = string.match(redis.call('INFO', 'server'), 'run_id:(%x+)')`;

/** Returns the running process's run_id. */
export const RUN_ID_SCRIPT = `
${RUN_ID}
return runid
`;

// Rebuild after a restart. KEYS[1]: the account's validated key, then the counters. ARGV: per counter its floor and
// expiry (0 = none). Raises each counter to its floor, then validates the account for this process.
export const RESTORE_SCRIPT = `
${RUN_ID}
if redis.call('GET', KEYS[1]) == runid then return {0, 0, 1} end
local raised = 0
local largest = 0
for i = 2, #KEYS do
  local floor = tonumber(ARGV[2 * i - 3])
  local at = tonumber(ARGV[2 * i - 2])
  local cur = tonumber(redis.call('GET', KEYS[i]) or '0') or 0
  if cur < floor then
    redis.call('INCRBY', KEYS[i], floor - cur)
    if at > 0 then redis.call('PEXPIREAT', KEYS[i], at) end
    raised = raised + 1
    if floor - cur > largest then largest = floor - cur end
  end
end
redis.call('SET', KEYS[1], runid)
return {raised, largest, 0}
`;

// Check-and-reserve. KEYS: the account's validated key (or '' when not checked), its id sets (current, previous),
// then per check its hold set and its counted keys. ARGV: now, expiresAt, id, number of checks, the run_id of the
// process this connection reached (read once per connection with RUN_ID_SCRIPT), the floor (0: all or nothing; else
// every non-zero amount shrinks to the least room, down to the floor) and the share of a short room granted (1: all of
// it; never below the floor), then per check: limit, amount, number of
// counted keys. Returns {1, granted}: what every non-zero check holds. A hold is a sorted-set member "<id>|<amount>" scored by its
// expiry: lapsed ones are dropped before summing, so a crashed gateway's holds free themselves. An id already
// recorded or released holds nothing ({2}: a reservation that ran after its caller gave up); the request's own hold
// (a repeated reservation) is not counted against it and is replaced.
export const RESERVE_SCRIPT = `
if KEYS[1] ~= '' and redis.call('GET', KEYS[1]) ~= ARGV[5] then return {-1} end
local now = tonumber(ARGV[1])
local expires = tonumber(ARGV[2])
local id = ARGV[3]
local n = tonumber(ARGV[4])
local floor = tonumber(ARGV[6])
local share = tonumber(ARGV[7])
if redis.call('HEXISTS', KEYS[2], id) == 1 or redis.call('HEXISTS', KEYS[3], id) == 1 then return {2} end
local own = id .. '|'
local k = 4
local a = 8
local plan = {}
local granted = -1
for i = 1, n do
  local hold = KEYS[k]
  k = k + 1
  local limit = tonumber(ARGV[a])
  local amount = tonumber(ARGV[a + 1])
  local nkeys = tonumber(ARGV[a + 2])
  a = a + 3
  local counted = 0
  for j = 1, nkeys do
    counted = counted + (tonumber(redis.call('GET', KEYS[k]) or '0') or 0)
    k = k + 1
  end
  redis.call('ZREMRANGEBYSCORE', hold, '-inf', now)
  local held = 0
  local mine = {}
  for _, m in ipairs(redis.call('ZRANGE', hold, 0, -1)) do
    if string.sub(m, 1, #own) ~= own then held = held + (tonumber(string.match(m, '|(%d+)$')) or 0) else mine[#mine + 1] = m end
  end
  local room = limit - counted - held
  local fits
  if amount <= 0 then fits = room > 0 elseif floor > 0 then fits = room >= math.min(floor, amount) else fits = room >= amount end
  if not fits then return {0, i - 1, counted, held} end
  if amount > 0 then
    local g = amount
    if floor > 0 and room < g then g = math.max(floor, math.floor(room * share)) end
    if granted < 0 or g < granted then granted = g end
  end
  plan[i] = {hold, amount, mine}
end
if granted < 0 then granted = 0 end
for i = 1, n do
  if plan[i][2] > 0 then
    -- A repeated reservation replaces its own hold, whatever amount that one was granted.
    for _, m in ipairs(plan[i][3]) do redis.call('ZREM', plan[i][1], m) end
    redis.call('ZADD', plan[i][1], expires, id .. '|' .. granted)
    local ttl = redis.call('PTTL', plan[i][1])
    if ttl < 0 or ttl < expires - now then redis.call('PEXPIREAT', plan[i][1], expires) end
  end
end
return {1, granted}
`;

// Deletes one key (the keep hash of a deleted journal segment; one call per key: each may be another account's slot).
export const FORGET_SCRIPT = `
return redis.call('DEL', KEYS[1])
`;

// Drops one reservation's member ("<id>|<amount>", ARGV[1]) from its hold sets (KEYS from 2), in one round trip, and
// remembers its id (ARGV[2]) as released in the account's current id set (KEYS[1], lapsing at ARGV[3]) unless it is
// there already: a reservation sent before a stall and run after it then holds nothing. A member not found under
// that amount is looked for by its id: a reservation given up before its answer came may have been granted less.
export const RELEASE_SCRIPT = `
redis.call('HSETNX', KEYS[1], ARGV[2], 'R')
redis.call('PEXPIREAT', KEYS[1], ARGV[3])
local own = ARGV[2] .. '|'
for i = 2, #KEYS do
  if redis.call('ZREM', KEYS[i], ARGV[1]) == 0 then
    for _, m in ipairs(redis.call('ZRANGE', KEYS[i], 0, -1)) do
      if string.sub(m, 1, #own) == own then redis.call('ZREM', KEYS[i], m) end
    end
  end
end
return 1
`;
