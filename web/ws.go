package web

import (
	"encoding/json"
	"net/http"
	"time"

	"github.com/gorilla/websocket"

	"github.com/sampviz/sampviz/web/live"
)

// upgrader takes websockets from this server's pages only (sameOrigin,
// guard.go: scheme, host and port).
var upgrader = websocket.Upgrader{
	ReadBufferSize:  1024,
	WriteBufferSize: 32 << 10,
	CheckOrigin:     sameOrigin,
}

// handleRunSocket streams a judgement to one page: everything so far, then
// each change, then the final state, after which it closes. One reader and
// one writer goroutine per connection.
func (s *Server) handleRunSocket(w http.ResponseWriter, r *http.Request) {
	v, err := s.lookupJudged(r)
	if err != nil {
		he := s.logError(r, err)
		http.Error(w, he.Msg, he.Status)
		return
	}
	if !sameOrigin(r) {
		http.Error(w, "This websocket only answers pages of this server.", http.StatusForbidden)
		return
	}
	if !s.hold() {
		http.Error(w, "sampviz is stopping.", http.StatusServiceUnavailable)
		return
	}
	conn, err := upgrader.Upgrade(w, r, nil)
	if err != nil {
		s.release()
		return // Upgrade has answered the client
	}
	go func() {
		defer s.release()
		s.streamTopic(conn, v.topic)
	}()
}

// streamTopic is the connection's writer; it starts the reader and returns
// when the topic is final and sent, the peer goes away, a write fails or
// the server closes.
func (s *Server) streamTopic(conn *websocket.Conn, t *live.Topic) {
	tm := s.socket
	sub := t.Subscribe()
	defer t.Unsubscribe(sub)
	gone := make(chan struct{})
	go s.readPeer(conn, gone, tm)
	defer conn.Close()

	ping := time.NewTicker(tm.PingPeriod)
	defer ping.Stop()
	var cur live.Cursor
	var lastCharts time.Time
	var chartTimer <-chan time.Time
	for {
		now := time.Now()
		u, pending := t.Next(&cur, now.Sub(lastCharts) >= live.ChartInterval)
		if u != nil {
			if u.Charts != nil {
				lastCharts = now
			}
			if err := s.writeUpdate(conn, u, tm); err != nil {
				return
			}
			if u.Final {
				conn.SetWriteDeadline(time.Now().Add(tm.WriteWait))
				conn.WriteMessage(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseNormalClosure, "run finished"))
				// Give the peer a moment to close its side; the reader ends then.
				select {
				case <-gone:
				case <-time.After(time.Second):
				}
				return
			}
		}
		chartTimer = nil
		if pending {
			chartTimer = time.After(time.Until(lastCharts.Add(live.ChartInterval)))
		}
		select {
		case <-sub.Wake():
			// Let rows judged close together gather into one message.
			select {
			case <-time.After(rowInterval):
			case <-gone:
				return
			case <-s.ctx.Done():
				return
			}
		case <-chartTimer:
		case <-ping.C:
			conn.SetWriteDeadline(time.Now().Add(tm.WriteWait))
			if err := conn.WriteMessage(websocket.PingMessage, nil); err != nil {
				return
			}
		case <-gone:
			return
		case <-s.ctx.Done():
			conn.SetWriteDeadline(time.Now().Add(tm.WriteWait))
			conn.WriteMessage(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseGoingAway, "server stopping"))
			return
		}
	}
}

// writeUpdate sends one update within the write deadline.
func (s *Server) writeUpdate(conn *websocket.Conn, u *live.Update, tm SocketTimings) error {
	b, err := encodeUpdate(u)
	if err != nil {
		s.log.Error("encode websocket update", "err", err)
		return err
	}
	conn.SetWriteDeadline(time.Now().Add(tm.WriteWait))
	return conn.WriteMessage(websocket.TextMessage, b)
}

// encodeUpdate marshals u. The chart options, shared by every reader and
// already JSON, are spliced in as they are rather than re-encoded (and
// re-validated) once per reader.
func encodeUpdate(u *live.Update) ([]byte, error) {
	charts := u.Charts
	v := *u
	v.Charts = nil
	b, err := json.Marshal(&v)
	if err != nil || charts == nil {
		return b, err
	}
	out := make([]byte, 0, len(b)+len(charts)+12)
	out = append(out, b[:len(b)-1]...) // without the closing brace
	if len(b) > 2 {
		out = append(out, ',')
	}
	out = append(out, `"charts":`...)
	out = append(out, charts...)
	return append(out, '}'), nil
}

// readPeer is the connection's reader: it reads (and drops) what the peer
// sends so that pongs and close frames are handled, and closes gone when the
// peer stops answering or goes away.
func (s *Server) readPeer(conn *websocket.Conn, gone chan<- struct{}, tm SocketTimings) {
	defer close(gone)
	conn.SetReadLimit(maxMessageSize)
	conn.SetReadDeadline(time.Now().Add(tm.PongWait))
	conn.SetPongHandler(func(string) error {
		conn.SetReadDeadline(time.Now().Add(tm.PongWait))
		return nil
	})
	for {
		if _, _, err := conn.ReadMessage(); err != nil {
			return
		}
	}
}
