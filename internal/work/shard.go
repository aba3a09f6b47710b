package work

import (
	"fmt"
	"hash/fnv"
)

// MaxSlotShards bounds the shards of one kind's slot counter.
const MaxSlotShards = 16

// shardSize is the budget per shard SlotShards aims at: a budget below twice
// it (every budget of runs and applies) keeps one counter, exactly as before
// counters were sharded.
const shardSize = 8

// SlotShards is how many shards a budget's slot counter is split into:
// budget/8 rounded down, at least 1 and at most MaxSlotShards. Each shard is a
// record of its own, so a busy kind's claims and releases spread over that
// many records instead of one (on DynamoDB one item takes about 1,000 writes a
// second). See docs/architecture.md on the trade-off.
func SlotShards(budget int) int {
	return min(max(budget/shardSize, 1), MaxSlotShards)
}

// ShardCap is shard k's share of budget: budget/SlotShards rounded down, plus
// one for the first budget mod SlotShards shards, so the shares sum to the
// budget exactly. It is 0 for a shard the budget does not use.
func ShardCap(budget, k int) int {
	s := SlotShards(budget)
	if budget <= 0 || k < 0 || k >= s {
		return 0
	}
	c := budget / s
	if k < budget%s {
		c++
	}
	return c
}

// FirstSlotShard is the shard a claim of id under budget tries first: a hash
// of the id, so concurrent claims of different items spread over the shards.
func FirstSlotShard(id string, budget int) int {
	return firstShard(id, SlotShards(budget))
}

func firstShard(id string, shards int) int {
	if shards <= 1 {
		return 0
	}
	h := fnv.New32a()
	h.Write([]byte(id))
	return int(h.Sum32() % uint32(shards))
}

// SlotsRecord names shard k of kind's slot counter as CheckCommit counts
// records (shard 0 keeps the unsharded counter's name).
func SlotsRecord(kind Kind, k int) string {
	if k == 0 {
		return "slots " + string(kind)
	}
	return fmt.Sprintf("slots %s#%d", kind, k)
}
