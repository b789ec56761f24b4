// Package blackhole is a TCP proxy on loopback that can cut the network between
// its clients and their server the way a partition does: silently. While cut,
// nothing is forwarded in either direction and nothing is closed; bytes already
// sent wait (in the proxy's hands and the kernel's buffers) and arrive after Heal,
// as TCP retransmission delivers them after a real partition heals. A client sees
// silence, not a reset, and must notice the partition itself (pings, timeouts);
// the server keeps the connection until its own pings give up.
//
// It exists for the fault tests and figures of producers/remote; it is not a general proxy
// (no limits, loopback only).
package blackhole

import (
	"net"
	"sync"
)

// Proxy forwards every connection made to Addr to its target. Create it with
// New; Close it to end every connection.
type Proxy struct {
	ln     net.Listener
	target string
	wg     sync.WaitGroup // the accept loop and every copier

	mu     sync.Mutex            // protects open, conns, closed
	open   chan struct{}         // closed while the proxy forwards; a fresh one while cut
	conns  map[net.Conn]struct{} // both ends of every live connection
	closed bool
}

// New listens on a free loopback port and forwards to target (host:port).
func New(target string) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &Proxy{ln: ln, target: target, open: make(chan struct{}), conns: map[net.Conn]struct{}{}}
	close(p.open)
	p.wg.Go(p.accept)
	return p, nil
}

// Addr is the proxy's address (127.0.0.1:PORT).
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// URL is a NATS URL of the proxy: nats://127.0.0.1:PORT.
func (p *Proxy) URL() string { return "nats://" + p.Addr() }

// Cut stops forwarding, in both directions, on every connection, present and
// future, until Heal. Idempotent.
func (p *Proxy) Cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-p.open:
		p.open = make(chan struct{})
	default:
	}
}

// Heal forwards again, starting with what waited during the cut. Idempotent.
func (p *Proxy) Heal() {
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-p.open:
	default:
		close(p.open)
	}
}

// Close stops listening, closes every connection and returns once every goroutine
// of the proxy has. Idempotent.
func (p *Proxy) Close() {
	p.mu.Lock()
	if !p.closed {
		p.closed = true
		_ = p.ln.Close()
		for c := range p.conns {
			_ = c.Close()
		}
		select {
		case <-p.open:
		default:
			close(p.open) // release the copiers waiting at the gate
		}
	}
	p.mu.Unlock()
	p.wg.Wait()
}

func (p *Proxy) accept() {
	for {
		down, err := p.ln.Accept()
		if err != nil {
			return
		}
		up, err := net.Dial("tcp", p.target)
		if err != nil {
			_ = down.Close()
			continue
		}
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			_ = down.Close()
			_ = up.Close()
			return
		}
		p.conns[down], p.conns[up] = struct{}{}, struct{}{}
		p.mu.Unlock()
		p.wg.Go(func() { p.copy(up, down) })
		p.wg.Go(func() { p.copy(down, up) })
	}
}

// gate returns once the proxy forwards (or is closed).
func (p *Proxy) gate() {
	p.mu.Lock()
	open := p.open
	p.mu.Unlock()
	<-open
}

// copy forwards src to dst through the gate; at the end it closes both.
func (p *Proxy) copy(dst, src net.Conn) {
	defer func() {
		p.mu.Lock()
		delete(p.conns, dst)
		delete(p.conns, src)
		p.mu.Unlock()
		_ = dst.Close()
		_ = src.Close()
	}()
	buf := make([]byte, 32<<10)
	for {
		p.gate() // while cut, read nothing: the sender's buffers fill, as in a partition
		n, err := src.Read(buf)
		if n > 0 {
			p.gate() // cut while reading: hold these bytes until Heal
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return // EOF or closed: the deferred closes pass it on
		}
	}
}
