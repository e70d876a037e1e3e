package web

import "time"

// The websocket timings, after gorilla/websocket's chat example.
const (
	// writeWait is the time allowed to write one message to the peer.
	writeWait = 10 * time.Second
	// pongWait is the time allowed to read the next pong from the peer.
	pongWait = 60 * time.Second
	// pingPeriod is how often pings go out; it must be less than pongWait.
	pingPeriod = (pongWait * 9) / 10
	// maxMessageSize bounds what the peer may send: the page sends nothing
	// but control frames, so anything large is a misbehaving client.
	maxMessageSize = 512
	// rowInterval is the least time between two updates to one client, so
	// that rows judged close together arrive in one message (chart updates
	// wait live.ChartInterval).
	rowInterval = 100 * time.Millisecond
)

// SocketTimings are the websocket timings; zero fields take the constants
// above. Tests shorten them to watch a stuck client being dropped.
type SocketTimings struct {
	WriteWait  time.Duration
	PongWait   time.Duration
	PingPeriod time.Duration
}

// withDefaults fills t's zero fields, and a ping period that would not
// come before the pong wait ends.
func (t SocketTimings) withDefaults() SocketTimings {
	if t.WriteWait <= 0 {
		t.WriteWait = writeWait
	}
	if t.PongWait <= 0 {
		t.PongWait = pongWait
	}
	if t.PingPeriod <= 0 || t.PingPeriod >= t.PongWait {
		t.PingPeriod = t.PongWait * 9 / 10
	}
	return t
}
