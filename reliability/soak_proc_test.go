//go:build unix

package reliability_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// procSet is the soak's children: the live ones, which the load and the
// nemesis pick from, and the ones the nemesis killed, whose history files
// still count.
type procSet struct {
	mu   sync.RWMutex
	live []*proc
	dead []*proc
}

// pick returns a live child drawn by r.
func (s *procSet) pick(r *rand.Rand) *proc {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.live[r.IntN(len(s.live))]
}

// at returns the i-th live child, modulo their number.
func (s *procSet) at(i int) *proc {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.live[i%len(s.live)]
}

// all returns the live children.
func (s *procSet) all() []*proc {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return slices.Clone(s.live)
}

// killed returns the children the nemesis killed.
func (s *procSet) killed() []*proc {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return slices.Clone(s.dead)
}

// replace puts next in old's place among the live children, and old
// among the killed.
func (s *procSet) replace(old, next *proc) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if i := slices.Index(s.live, old); i >= 0 {
		s.live[i] = next
	}
	s.dead = append(s.dead, old)
}

// proc is a soak child seen from the parent: the process, its addresses,
// and the files it writes.
type proc struct {
	cfg       childConfig // what it was started with
	node      string
	framework string
	history   string // its history file
	log       string // its stderr
	out       string // its stdout, where it says it serves
	api       string // host:port of the payments API
	admin     string // host:port of the admin commands

	paused atomic.Bool // stopped by the nemesis: the load routes around it

	cmd   *exec.Cmd
	stdin io.WriteCloser // closing it tells the child the parent is gone
	done  chan struct{}  // closed once the process is reaped
	err   error          // Wait's, once done
	ctl   *http.Client
}

// startProc starts a child with cfg; ready then waits until it serves.
// The child is killed when the test ends, whatever happens.
func startProc(t *testing.T, dir string, cfg childConfig) *proc {
	t.Helper()
	p, err := launch(t, dir, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// launch is startProc for a goroutine other than the test's: it returns
// its error.
func launch(t *testing.T, dir string, cfg childConfig) (*proc, error) {
	raw, err := json.Marshal(cfg)
	if err != nil {
		return nil, err
	}
	p := &proc{cfg: cfg, node: cfg.Node, framework: cfg.Framework, history: cfg.History,
		log: filepath.Join(dir, cfg.Node+".log"), done: make(chan struct{}),
		ctl: &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}}
	out := filepath.Join(dir, cfg.Node+".out")
	stdout, err := os.Create(out)
	if err != nil {
		return nil, err
	}
	defer stdout.Close()
	stderr, err := os.Create(p.log)
	if err != nil {
		return nil, err
	}
	defer stderr.Close()
	p.cmd = exec.Command(os.Args[0])
	p.cmd.Env = append(os.Environ(), soakChildEnv+"="+string(raw))
	p.cmd.Stdout, p.cmd.Stderr = stdout, stderr
	if p.stdin, err = p.cmd.StdinPipe(); err != nil {
		return nil, err
	}
	if err := p.cmd.Start(); err != nil {
		return nil, fmt.Errorf("start child %s: %w", cfg.Node, err)
	}
	go func() {
		p.err = p.cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(p.kill)
	p.out = out
	return p, nil
}

// ready waits until the child serves, and learns its addresses.
func (p *proc) ready(t *testing.T) {
	t.Helper()
	if err := p.serving(); err != nil {
		t.Fatal(err)
	}
}

// serving is ready for a goroutine other than the test's: it returns its
// error.
func (p *proc) serving() error {
	deadline := time.Now().Add(60 * time.Second)
	for {
		b, _ := os.ReadFile(p.out)
		if line, _, ok := bytes.Cut(b, []byte("\n")); ok {
			if _, err := fmt.Sscanf(string(line), childReady, &p.api, &p.admin); err != nil {
				return fmt.Errorf("child %s: %q: %w", p.node, line, err)
			}
			return nil
		}
		select {
		case <-p.done:
			return fmt.Errorf("child %s exited before it served: %v\n%s", p.node, p.err, p.logTail())
		case <-time.After(20 * time.Millisecond): // the child is starting
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("child %s did not serve within a minute\n%s", p.node, p.logTail())
		}
	}
}

// idle waits until no handler runs in the child (work a client gave up
// on goes on), for at most d.
func (p *proc) idle(d time.Duration) error {
	deadline := time.Now().Add(d)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		b, err := p.command(ctx, http.MethodGet, "/running")
		cancel()
		if err != nil {
			return err
		}
		var keys []string
		if err := json.Unmarshal(b, &keys); err != nil {
			return err
		}
		if len(keys) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s still runs handlers for %v", p.node, keys)
		}
		time.Sleep(50 * time.Millisecond) // until the work ends
	}
}

// kill ends the child at once (SIGKILL ends a stopped process too) and
// reaps it. It is the cleanup of every child, on every path.
func (p *proc) kill() {
	select {
	case <-p.done:
	default:
		_ = p.cmd.Process.Kill()
		<-p.done
	}
	_ = p.stdin.Close()
	p.ctl.CloseIdleConnections()
}

// pause stops the child (SIGSTOP): its connections stay open and nothing
// in it runs, as in a long GC pause or a frozen VM.
func (p *proc) pause() error {
	p.paused.Store(true)
	return p.cmd.Process.Signal(syscall.SIGSTOP)
}

// resume continues a paused child (SIGCONT).
func (p *proc) resume() error {
	err := p.cmd.Process.Signal(syscall.SIGCONT)
	p.paused.Store(false)
	return err
}

// command sends an admin command and returns its answer.
func (p *proc) command(ctx context.Context, method, path string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, method, "http://"+p.admin+path, nil)
	if err != nil {
		return nil, err
	}
	resp, err := p.ctl.Do(req)
	if err != nil {
		return nil, fmt.Errorf("%s %s on %s: %w", method, path, p.node, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err == nil && resp.StatusCode >= 300 {
		err = fmt.Errorf("%s %s on %s: %s: %s", method, path, p.node, resp.Status, b)
	}
	return b, err
}

// running reports whether a handler for key runs in the child now.
func (p *proc) running(ctx context.Context, key string) (bool, error) {
	b, err := p.command(ctx, http.MethodGet, "/running")
	if err != nil {
		return false, err
	}
	var keys []string
	if err := json.Unmarshal(b, &keys); err != nil {
		return false, err
	}
	return slices.Contains(keys, key), nil
}

// exit tells the child to stop, and waits until it has: its history file
// is then complete. A child that exits with an error (a race report
// under -race, a history it could not write) fails the test.
func (p *proc) exit(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := p.command(ctx, http.MethodPost, "/exit"); err != nil {
		t.Errorf("child %s: %v", p.node, err)
		p.kill()
	}
	select {
	case <-p.done:
	case <-time.After(60 * time.Second):
		t.Errorf("child %s did not exit within a minute", p.node)
		p.kill()
	}
	if p.err != nil {
		t.Errorf("child %s: %v\n%s", p.node, p.err, p.logTail())
	}
}

// logTail returns the end of the child's stderr.
func (p *proc) logTail() string {
	b, _ := os.ReadFile(p.log)
	if len(b) > 4000 {
		b = b[len(b)-4000:]
	}
	return strings.TrimSpace(string(b))
}
