package faultproxy

import (
	"errors"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// Proxy forwards connections from Addr to a target address.
type Proxy struct {
	target string
	ln     net.Listener

	latency    atomic.Int64 // nanoseconds added before each forwarded chunk
	blackHole  atomic.Bool  // swallow traffic in both directions
	dropReply  atomic.Bool  // reset the client when the server answers
	refuseNew  atomic.Bool  // close new connections at once
	forwarded  atomic.Int64 // bytes forwarded client→server
	replyDrops atomic.Int64 // replies swallowed by DropReplies

	mu     sync.Mutex // guards conns and closed
	conns  map[*pair]struct{}
	closed bool
	wg     sync.WaitGroup
	once   sync.Once
}

type pair struct{ client, server net.Conn }

// New starts a proxy on a free loopback port in front of target.
func New(target string) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &Proxy{target: target, ln: ln, conns: map[*pair]struct{}{}}
	p.wg.Add(1)
	go p.accept()
	return p, nil
}

// Addr is the address clients dial instead of the target.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// SetLatency delays every forwarded chunk, both ways, by d (0 clears).
func (p *Proxy) SetLatency(d time.Duration) { p.latency.Store(int64(d)) }

// BlackHole makes the proxy swallow all traffic while on: connections stay
// open and nothing arrives, as with a partitioned or frozen server.
func (p *Proxy) BlackHole(on bool) { p.blackHole.Store(on) }

// DropReplies makes the proxy forward requests to the server but, when the
// server answers, reset the client's connection instead of delivering the
// answer: the server applied the command, the client never learns it.
func (p *Proxy) DropReplies(on bool) { p.dropReply.Store(on) }

// RefuseNew makes the proxy close new connections at once while on.
func (p *Proxy) RefuseNew(on bool) { p.refuseNew.Store(on) }

// ResetAll resets every open connection (RST to the client).
func (p *Proxy) ResetAll() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for c := range p.conns {
		reset(c.client)
		_ = c.server.Close()
	}
}

// Forwarded returns how many bytes went from clients to the server.
func (p *Proxy) Forwarded() int64 { return p.forwarded.Load() }

// DroppedReplies returns how many server replies DropReplies swallowed.
func (p *Proxy) DroppedReplies() int64 { return p.replyDrops.Load() }

// Close stops listening, closes every connection and waits for every
// goroutine of the proxy.
func (p *Proxy) Close() error {
	p.once.Do(func() {
		_ = p.ln.Close()
		p.mu.Lock()
		p.closed = true
		for c := range p.conns {
			_ = c.client.Close()
			_ = c.server.Close()
		}
		p.mu.Unlock()
	})
	p.wg.Wait()
	return nil
}

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		if p.refuseNew.Load() {
			reset(c)
			continue
		}
		s, err := net.DialTimeout("tcp", p.target, 2*time.Second)
		if err != nil {
			reset(c)
			continue
		}
		pr := &pair{client: c, server: s}
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			_ = c.Close()
			_ = s.Close()
			return
		}
		p.conns[pr] = struct{}{}
		p.mu.Unlock()
		p.wg.Add(2)
		go p.pipe(pr, c, s, true)
		go p.pipe(pr, s, c, false)
	}
}

// pipe copies src to dst chunk by chunk, applying the faults in force.
func (p *Proxy) pipe(pr *pair, src, dst net.Conn, toServer bool) {
	defer p.wg.Done()
	defer func() {
		_ = src.Close()
		_ = dst.Close()
		p.mu.Lock()
		delete(p.conns, pr)
		p.mu.Unlock()
	}()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if d := time.Duration(p.latency.Load()); d > 0 {
				time.Sleep(d)
			}
			switch {
			case p.blackHole.Load():
				// swallowed
			case !toServer && p.dropReply.Load():
				p.replyDrops.Add(1)
				reset(pr.client)
				return
			default:
				if _, werr := dst.Write(buf[:n]); werr != nil {
					return
				}
				if toServer {
					p.forwarded.Add(int64(n))
				}
			}
		}
		if err != nil {
			if errors.Is(err, io.EOF) {
				if tc, ok := dst.(*net.TCPConn); ok {
					_ = tc.CloseWrite()
				}
			}
			return
		}
	}
}

// reset closes c with an RST rather than a FIN.
func reset(c net.Conn) {
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
	_ = c.Close()
}
