// Package supervisor watches campaigns on remote A2A agents and steers them
// while it provably holds their authority: a lease with an integer epoch from
// the campaign-control extension (docs/a2a/campaign-control.md), confirmed by
// a fresh campaign/get readback in the same pass as every remote write.
//
// A campaign is one work item of kind KindCampaign: its heartbeat is that
// item's attempt, run by work.Executor and woken by the tick's maintenance
// pass (Policy.ResendAfter), so overlapping ticks and duplicate wake-ups act
// once. Between passes the item is pending; a pass is a claim. Every remote
// write is saved as an intent with a unique request id (Attempt.Checkpoint)
// before the network call; an intent whose answer was lost is unknown and
// blocks further writes until campaign/getRequest reconciles it, and is never
// sent again. Material events (Event*) are items of KindEvent created by the
// pass's final write, with the campaign's new state, and each wakes a
// decision (KindDecision, decision.go) in the same write: the campaign's
// supervising agent proposes one action, the built-in __reviewer__ must
// approve it, and the Decider relays it to the campaign as a Request that a
// pass carries out once. See docs/architecture.md, "Supervisor".
package supervisor
