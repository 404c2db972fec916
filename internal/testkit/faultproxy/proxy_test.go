package faultproxy_test

import (
	"bufio"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/idemkit/idem/internal/testkit/faultproxy"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// echoServer answers every line with the same line and counts what it got.
func echoServer(t *testing.T) (addr string, got func() int) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var (
		mu    sync.Mutex
		lines int
		wg    sync.WaitGroup
	)
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Go(func() {
				defer c.Close()
				r := bufio.NewReader(c)
				for {
					l, err := r.ReadString('\n')
					if err != nil {
						return
					}
					mu.Lock()
					lines++
					mu.Unlock()
					if _, err := io.WriteString(c, l); err != nil {
						return
					}
				}
			})
		}
	})
	t.Cleanup(func() { _ = ln.Close(); wg.Wait() })
	return ln.Addr().String(), func() int { mu.Lock(); defer mu.Unlock(); return lines }
}

func start(t *testing.T, target string) *faultproxy.Proxy {
	t.Helper()
	p, err := faultproxy.New(target)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	return p
}

func roundTrip(t *testing.T, addr string, timeout time.Duration) (string, error) {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return "", err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(timeout))
	if _, err := io.WriteString(c, "ping\n"); err != nil {
		return "", err
	}
	return bufio.NewReader(c).ReadString('\n')
}

func TestForwards(t *testing.T) {
	addr, _ := echoServer(t)
	p := start(t, addr)
	if got, err := roundTrip(t, p.Addr(), 5*time.Second); err != nil || got != "ping\n" {
		t.Fatalf("round trip: %q, %v", got, err)
	}
}

func TestBlackHole(t *testing.T) {
	addr, got := echoServer(t)
	p := start(t, addr)
	p.BlackHole(true)
	if _, err := roundTrip(t, p.Addr(), 100*time.Millisecond); err == nil {
		t.Fatal("a black-holed request got an answer")
	}
	if got() != 0 {
		t.Fatal("a black-holed request reached the server")
	}
	p.BlackHole(false)
	if _, err := roundTrip(t, p.Addr(), 5*time.Second); err != nil {
		t.Fatalf("after the black hole: %v", err)
	}
}

func TestDropRepliesAppliesButLosesAnswer(t *testing.T) {
	addr, got := echoServer(t)
	p := start(t, addr)
	p.DropReplies(true)
	if _, err := roundTrip(t, p.Addr(), time.Second); err == nil {
		t.Fatal("the reply was not dropped")
	}
	if got() != 1 || p.DroppedReplies() != 1 {
		t.Fatalf("server saw %d requests, %d replies dropped; want 1 and 1", got(), p.DroppedReplies())
	}
}

func TestRefuseAndReset(t *testing.T) {
	addr, _ := echoServer(t)
	p := start(t, addr)
	p.RefuseNew(true)
	if _, err := roundTrip(t, p.Addr(), time.Second); err == nil {
		t.Fatal("a refused connection got an answer")
	}
	p.RefuseNew(false)
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := io.WriteString(c, "a\n"); err != nil {
		t.Fatal(err)
	}
	r := bufio.NewReader(c)
	if _, err := r.ReadString('\n'); err != nil {
		t.Fatal(err)
	}
	p.ResetAll()
	_ = c.SetDeadline(time.Now().Add(time.Second))
	_, _ = io.WriteString(c, "b\n")
	if _, err := r.ReadString('\n'); err == nil {
		t.Fatal("a reset connection still answers")
	}
}

func TestLatency(t *testing.T) {
	addr, _ := echoServer(t)
	p := start(t, addr)
	p.SetLatency(150 * time.Millisecond)
	// 150 ms each way: a 100 ms deadline must expire.
	if _, err := roundTrip(t, p.Addr(), 100*time.Millisecond); err == nil {
		t.Fatal("latency was not applied")
	}
}
