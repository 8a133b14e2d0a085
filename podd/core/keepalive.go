package core

import (
	"context"
	"net/http"
	"strconv"
	"sync"
	"time"
)

// KeepaliveHeader is how a streaming client asks for a keepalive message every so many seconds.
const KeepaliveHeader = "Keepalive-Ping-Interval"

// defaultKeepalive is envd's interval when the client asks for none.
const defaultKeepalive = 90 * time.Second

// Keepalive sends a message whenever a stream has been quiet for the interval its client asked.
type Keepalive struct {
	reset chan struct{}
	stop  context.CancelFunc
}

// StartKeepalive calls send each quiet interval until Stop or ctx ends; a failed send stops it.
func StartKeepalive(ctx context.Context, h http.Header, send func() error) *Keepalive {
	every := defaultKeepalive
	if s, err := strconv.Atoi(h.Get(KeepaliveHeader)); err == nil && s > 0 {
		every = time.Duration(s) * time.Second
	}
	ctx, cancel := context.WithCancel(ctx)
	k := &Keepalive{reset: make(chan struct{}, 1), stop: cancel}
	go func() {
		t := time.NewTimer(every)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-k.reset:
				// Since Go 1.23, Reset below discards an expiry nobody received.
			case <-t.C:
				if send() != nil {
					return
				}
			}
			t.Reset(every)
		}
	}()
	return k
}

// Reset restarts the quiet interval (a message was just sent).
func (k *Keepalive) Reset() {
	select {
	case k.reset <- struct{}{}:
	default:
	}
}

// Stop ends the keepalives.
func (k *Keepalive) Stop() { k.stop() }

// Serialized makes a stream's send safe for its keepalives and its messages at once.
func Serialized[T any](send func(T) error) func(T) error {
	var mu sync.Mutex
	return func(m T) error {
		mu.Lock()
		defer mu.Unlock()
		return send(m)
	}
}
