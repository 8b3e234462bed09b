package api

import "time"

// Timetable publishing (see node/publish.go).
const (
	// ProtoSchedule lets a peer fetch the signed timetable another peer
	// holds: a late joiner (or a node back from a cut) that sees a newer
	// timetable in a presence announcement pulls it with one ScheduleRequest
	// and verifies it as if it came from pubsub.
	ProtoSchedule = "/bedwe/schedule/1.0.0"

	// OpPublishSchedule asks a node to sign a timetable (ClientRequest.
	// Schedule, a bedwe-schedule/1 document) with its key, adopt it and
	// gossip it; the answer is ClientResponse.Published.
	OpPublishSchedule = "publish-schedule"
	// OpSchedule asks a node which timetable is in force; the answer is
	// ClientResponse.Schedule.
	OpSchedule = "schedule"
)

// ScheduleRequest asks a peer for its signed timetable.
type ScheduleRequest struct {
	// Have is the issued_at (Unix nanoseconds) of the timetable the asker
	// holds, 0 for none: a peer holding nothing newer answers empty.
	Have int64 `cbor:"1,keyasint,omitempty"`
}

// ScheduleReply carries a signed timetable envelope (schedule.Signed in its
// JSON encoding), or nothing when the peer holds no signed timetable newer
// than the asker's. The asker verifies it against its own trusted keys.
type ScheduleReply struct {
	Signed []byte `cbor:"1,keyasint,omitempty"`
}

// Timetable sources in ScheduleInfo.Source.
const (
	ScheduleSigned = "signed"     // published by a trusted key
	ScheduleLocal  = "local file" // the node's --schedule file
	ScheduleNone   = "none"       // no timetable
)

// ScheduleInfo describes one timetable.
type ScheduleInfo struct {
	// Source is ScheduleSigned, ScheduleLocal or ScheduleNone.
	Source     string    `cbor:"1,keyasint" json:"source"`
	IssuedAt   time.Time `cbor:"2,keyasint,omitempty" json:"issued_at,omitzero"`
	KnownUntil time.Time `cbor:"3,keyasint,omitempty" json:"known_until,omitzero"`
	// Signer is the fingerprint of the signing key (schedule.Fingerprint),
	// empty for a local file.
	Signer   string   `cbor:"4,keyasint,omitempty" json:"signer,omitempty"`
	TimeZone string   `cbor:"5,keyasint,omitempty" json:"timezone,omitempty"`
	Zones    []string `cbor:"6,keyasint,omitempty" json:"zones,omitempty"`
	Feeds    int      `cbor:"7,keyasint,omitempty" json:"feeds,omitempty"`
	Note     string   `cbor:"8,keyasint,omitempty" json:"note,omitempty"`
	// Peer is the node that answered.
	Peer string `cbor:"9,keyasint,omitempty" json:"peer,omitempty"`
}

// PublishResult answers OpPublishSchedule.
type PublishResult struct {
	// Schedule is the timetable as signed (Source ScheduleSigned).
	Schedule ScheduleInfo `cbor:"1,keyasint" json:"schedule"`
	// Adopted says the node installed it: it was issued later than the
	// timetable the node held. When false, InForce is the timetable the node
	// keeps (issued later, or at the same instant) and nothing was gossiped.
	Adopted bool `cbor:"2,keyasint,omitempty" json:"adopted"`
	// Gossiped says the envelope went out on the timetable topic; Peers is
	// how many peers the node knew on that topic at that moment.
	Gossiped bool `cbor:"3,keyasint,omitempty" json:"gossiped"`
	Peers    int  `cbor:"4,keyasint,omitempty" json:"topic_peers"`
	// InForce is the timetable the node holds when it did not adopt this one.
	InForce *ScheduleInfo `cbor:"5,keyasint,omitempty" json:"in_force,omitempty"`
	// Warnings are things the operator should know (a known_until already
	// past, an issued_at in the future, a timetable too large for gossip).
	Warnings []string `cbor:"6,keyasint,omitempty" json:"warnings,omitempty"`
	// Bytes is the size of the signed envelope.
	Bytes int `cbor:"7,keyasint,omitempty" json:"bytes"`
}
