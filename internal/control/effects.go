package control

import (
	"github.com/berth-hq/berth/internal/api"
)

// An Effect is something the server does once a change is durable, as
// data (raft's Ready carries its messages so): a message to a node's
// agent, a wake-up of a run's log followers, a wake-up of the scheduler.
type Effect struct {
	Kind EffectKind
	// EffectSend: the node, and its stream's epoch when the change was
	// made (a message is never sent on a later stream, which begins with
	// a full sync).
	Node  string
	Epoch uint64
	Msg   api.AgentMessage
	Run   int64 // EffectNotify
}

// EffectKind says what an Effect does.
type EffectKind uint8

const (
	EffectSend EffectKind = iota
	EffectNotify
	EffectWake
)

// wakeEffect wakes the scheduler.
var wakeEffect = Effect{Kind: EffectWake}

// sendEffect sends m to the node's agent, on the stream open now.
func sendEffect(ns *nodeState, m api.AgentMessage) Effect {
	return Effect{Kind: EffectSend, Node: ns.info.Name, Epoch: ns.epoch, Msg: m}
}
