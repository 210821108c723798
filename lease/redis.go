package lease

import (
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"
)

// A Redis lease key holds "<attempt>:<token>", so that a token is only a
// fast accept for the attempt it was issued for, and a claim of a later
// attempt can replace the hint an ended attempt left behind.

func redisValue(a Attempt, token string) string {
	return strconv.Itoa(a.Attempt) + ":" + token
}

// redisAttempt returns the attempt number of a value, or 0.
func redisAttempt(v string) int {
	n, _ := strconv.Atoi(v[:max(strings.IndexByte(v, ':'), 0)])
	return n
}

// acquire sets the key unless it holds a lease of this attempt or a later
// one: SET NX, except that an earlier attempt's leftover is replaced (the
// store decides whether the claim holds), and that setting the value the
// key holds again succeeds. 1: set; 0: held.
var acquire = redis.NewScript(`
local v = redis.call('GET', KEYS[1])
if v == ARGV[1] then
	redis.call('PEXPIRE', KEYS[1], ARGV[3])
	return 1
end
if v then
	local n = tonumber(string.match(v, '^(%d+):'))
	if n == nil or n >= tonumber(ARGV[2]) then return 0 end
end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[3])
return 1
`)

// extend moves the expiry of the key if it holds the value, and sets it
// again if it is gone (Redis was flushed or restarted: the caller checked
// the store first). 1: extended; 2: set again; 0: held by another value.
var extend = redis.NewScript(`
local v = redis.call('GET', KEYS[1])
if v == ARGV[1] then
	redis.call('PEXPIRE', KEYS[1], ARGV[2])
	return 1
end
if not v then
	redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
	return 2
end
return 0
`)

// release deletes the key if it holds the value. 1: deleted; 0: not.
var release = redis.NewScript(`
if redis.call('GET', KEYS[1]) == ARGV[1] then
	return redis.call('DEL', KEYS[1])
end
return 0
`)
