package placement

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
)

// This file is forwarding: a request for a scope whose home is another frontend
// goes there over NATS request/reply, with the caller's deadline, and comes back
// unchanged.

func (p *Placement) subject(id string) string { return p.cfg.prefix + ".scope." + id }

// Forward sends req to the frontend home and returns its answer. The request
// carries the time ctx has left (or WithMaxForward when it has no deadline);
// when ctx ends first, Forward returns ctx's error at once and tells the home,
// whose handler's context ends too. A home with no subscriber, or whose lease
// ends before it answers (it died or was paused while it served the request),
// is ErrUnreachable: the request may or may not have been served, so it is not
// sent again.
func (p *Placement) Forward(ctx context.Context, home string, req Request) (Response, error) {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, p.cfg.maxForward)
		defer cancel()
	}
	ctx, gone := context.WithCancelCause(ctx)
	defer gone(nil)
	key := new(byte)
	p.mu.Lock()
	if p.forwards[home] == nil {
		p.forwards[home] = map[*byte]context.CancelCauseFunc{}
	}
	p.forwards[home][key] = gone
	p.mu.Unlock()
	defer func() {
		p.mu.Lock()
		delete(p.forwards[home], key)
		if len(p.forwards[home]) == 0 {
			delete(p.forwards, home)
		}
		p.mu.Unlock()
	}()
	if _, live, known := p.node.OwnerKnown(home); known && !live {
		return Response{}, fmt.Errorf("%w: %w: %s: its lease ended", ErrUnreachable, ErrNotSent, home)
	}
	resp, err := p.forward(ctx, home, req)
	if errors.Is(context.Cause(ctx), errHomeEnded) {
		return Response{}, fmt.Errorf("%w: %s: its lease ended before it answered (the call may or may not have run there)", ErrUnreachable, home)
	}
	return resp, err
}

// errHomeEnded ends the forwards to a frontend whose lease ended.
var errHomeEnded = errors.New("placement: the home's lease ended")

// homeEnded is the owner node's report that another node's lease ended: the
// forwards waiting on it end.
func (p *Placement) homeEnded(node string, _ uint64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, gone := range p.forwards[node] {
		gone(errHomeEnded)
	}
	for _, ch := range p.awaiting[node] {
		close(ch)
	}
	delete(p.awaiting, node)
}

// AwaitHomeEnd waits until the lease of frontend home under epoch has ended (at
// once if it has), or ctx ends. A request that could not be sent to a scope's
// home (ErrNotSent: the process is gone) waits for this, then takes the scope.
func (p *Placement) AwaitHomeEnd(ctx context.Context, home string, epoch uint64) error {
	ch := make(chan struct{})
	p.mu.Lock()
	if p.awaiting[home] == nil {
		p.awaiting[home] = map[chan struct{}]chan struct{}{}
	}
	p.awaiting[home][ch] = ch
	p.mu.Unlock()
	defer func() {
		p.mu.Lock()
		delete(p.awaiting[home], ch)
		if len(p.awaiting[home]) == 0 {
			delete(p.awaiting, home)
		}
		p.mu.Unlock()
	}()
	// After the registration: an end between the check and the wait closes ch.
	if live, err := p.node.OwnerLive(ctx, home, epoch); err != nil || !live {
		return err
	}
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (p *Placement) forward(ctx context.Context, home string, req Request) (Response, error) {
	deadline, _ := ctx.Deadline()
	left := time.Until(deadline)
	if left <= 0 {
		return Response{}, context.DeadlineExceeded
	}
	id := rand.Text()
	msg := nats.NewMsg(p.subject(home))
	for k, vs := range req.Header {
		for _, v := range vs {
			msg.Header.Add(k, v)
		}
	}
	msg.Header.Set(hdrID, id)
	msg.Header.Set(hdrTimeout, strconv.FormatInt(left.Milliseconds()+1, 10))
	msg.Header.Set(hdrFrom, p.ID())
	msg.Data = req.Body
	resp, err := p.nc.RequestMsgWithContext(ctx, msg)
	if err != nil {
		if ctx.Err() != nil {
			c := nats.NewMsg(p.subject(home) + ".cancel")
			c.Data = []byte(id)
			_ = p.nc.PublishMsg(c)
			return Response{}, ctx.Err()
		}
		if errors.Is(err, nats.ErrNoResponders) {
			return Response{}, fmt.Errorf("%w: %w: %s", ErrUnreachable, ErrNotSent, home)
		}
		return Response{}, fmt.Errorf("placement: forwarding to %s: %w", home, err)
	}
	if e := resp.Header.Get(hdrError); e != "" {
		return Response{}, fmt.Errorf("placement: the home %s: %s", home, e)
	}
	out := Response{Header: http.Header{}, Body: resp.Data, Delivered: func() {
		ack := nats.NewMsg(p.subject(home) + ".ack")
		ack.Data = []byte(id)
		_ = p.nc.PublishMsg(ack)
	}}
	out.Status, _ = strconv.Atoi(resp.Header.Get(hdrStatus))
	for k, vs := range resp.Header {
		if k == hdrStatus {
			continue
		}
		out.Header[k] = vs
	}
	return out, nil
}

// Serve answers the requests forwarded to this frontend with h, each on a
// goroutine of its own, until Close. Call it once.
func (p *Placement) Serve(h Handler) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return errors.New("placement: closed")
	}
	reqs, err := p.nc.Subscribe(p.subject(p.ID()), func(m *nats.Msg) { p.serveOne(h, m) })
	if err != nil {
		return fmt.Errorf("placement: %w", err)
	}
	cancels, err := p.nc.Subscribe(p.subject(p.ID())+".cancel", func(m *nats.Msg) {
		p.mu.Lock()
		cancel := p.inflight[string(m.Data)]
		p.mu.Unlock()
		if cancel != nil {
			cancel()
		}
	})
	if err != nil {
		_ = reqs.Unsubscribe()
		return fmt.Errorf("placement: %w", err)
	}
	acks, err := p.nc.Subscribe(p.subject(p.ID())+".ack", func(m *nats.Msg) { p.acked(string(m.Data)) })
	if err != nil {
		_ = reqs.Unsubscribe()
		_ = cancels.Unsubscribe()
		return fmt.Errorf("placement: %w", err)
	}
	p.subs = append(p.subs, reqs, cancels, acks)
	// The subscriptions must be known to the server before a forwarder relies on
	// them (a request to a subject nobody subscribed is "no responders").
	return p.nc.Flush()
}

func (p *Placement) serveOne(h Handler, m *nats.Msg) {
	id := m.Header.Get(hdrID)
	ms, _ := strconv.ParseInt(m.Header.Get(hdrTimeout), 10, 64)
	p.mu.Lock()
	if p.closed || id == "" || ms <= 0 {
		p.mu.Unlock()
		return
	}
	// The forwarder gives up at the caller's deadline and then sends a cancel; the
	// home's own deadline comes a little later, so that the caller never gets
	// what a call cut short by the home's deadline answered instead of the
	// deadline error.
	ctx, cancel := context.WithTimeout(p.ctx, time.Duration(ms)*time.Millisecond+deadlineGrace)
	p.inflight[id] = cancel
	p.wg.Add(1)
	p.mu.Unlock()
	go func() {
		defer p.wg.Done()
		defer func() {
			p.mu.Lock()
			delete(p.inflight, id)
			p.mu.Unlock()
			cancel()
		}()
		hdr := http.Header{}
		for k, vs := range m.Header {
			if !strings.HasPrefix(k, "Taskrt-Forward-") {
				hdr[k] = vs
			}
		}
		resp := h(ctx, Request{Header: hdr, Body: m.Data})
		out := nats.NewMsg(m.Reply)
		for k, vs := range resp.Header {
			for _, v := range vs {
				out.Header.Add(k, v)
			}
		}
		out.Header.Set(hdrStatus, strconv.Itoa(resp.Status))
		out.Data = resp.Body
		if int64(len(out.Data))+4096 > p.nc.MaxPayload() {
			out = nats.NewMsg(m.Reply)
			out.Header.Set(hdrError, fmt.Sprintf("the answer (%d bytes) is larger than the NATS payload limit (%d bytes)", len(resp.Body), p.nc.MaxPayload()))
		}
		if resp.Sent != nil {
			p.awaitAck(id, resp.Sent) // before the answer: its ack may come at once
		}
		if err := m.RespondMsg(out); err != nil {
			p.cfg.log.Debug("placement: answering a forwarded request", "err", err)
		}
	}()
}

// awaitAck keeps sent until the forwarder acknowledges forward id's answer, or
// ackWait passes.
func (p *Placement) awaitAck(id string, sent func()) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return
	}
	p.onAck[id] = sent
	p.acks[id] = time.AfterFunc(ackWait, func() {
		p.mu.Lock()
		defer p.mu.Unlock()
		delete(p.acks, id)
		delete(p.onAck, id)
	})
}

// acked runs what the answer of forward id awaited, on a goroutine Close waits for.
func (p *Placement) acked(id string) {
	p.mu.Lock()
	sent, t := p.onAck[id], p.acks[id]
	delete(p.onAck, id)
	delete(p.acks, id)
	if sent == nil || p.closed {
		p.mu.Unlock()
		return
	}
	t.Stop()
	p.wg.Add(1)
	p.mu.Unlock()
	go func() {
		defer p.wg.Done()
		sent()
	}()
}
