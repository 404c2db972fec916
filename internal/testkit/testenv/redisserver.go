package testenv

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// startTimeout bounds how long a test-owned server may take to answer PING.
const startTimeout = 15 * time.Second

// RedisServer is a redis-server process owned by one test, on a free
// loopback port, with no persistence. Tests pause, kill and restart it to
// inject faults; it is stopped when the test ends.
type RedisServer struct {
	t    testing.TB
	bin  string
	port int
	dir  string
	args []string // extra arguments, e.g. cluster mode

	mu   sync.Mutex // guards proc
	proc *process   // nil while killed
}

// process is one run of a server: done is closed once it has exited and
// been reaped.
type process struct {
	cmd  *exec.Cmd
	done chan struct{}
}

func startProcess(bin string, args []string) (*process, error) {
	cmd := exec.Command(bin, args...)
	// No Stdout or Stderr: exec starts no copying goroutine; the server logs
	// to its file.
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	p := &process{cmd: cmd, done: make(chan struct{})}
	go func() {
		_ = cmd.Wait()
		close(p.done)
	}()
	return p, nil
}

// kill ends the process and waits until it is reaped. SIGKILL ends a
// stopped process too, without letting it run (a SIGCONT first would let a
// paused server answer what was waiting for it).
func (p *process) kill() {
	_ = p.cmd.Process.Kill()
	<-p.done
}

func (p *process) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// redisBinary returns the path of name (redis-server, redis-cli), or skips the
// test (fails it under IDEM_REQUIRE_SERVICES=1) when it is not installed.
func redisBinary(t testing.TB, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		if Required() {
			t.Fatalf("%s is required (%s=1) but not installed: %v", name, EnvRequire, err)
		}
		t.Skipf("%s is not installed (%v): install Redis to run this test", name, err)
	}
	return p
}

// StartRedisServer starts a redis-server for this test and waits until it
// answers PING. When redis-server is not installed the test is skipped, or
// fails under IDEM_REQUIRE_SERVICES=1.
func StartRedisServer(t testing.TB) *RedisServer {
	t.Helper()
	return startRedisServer(t, false)
}

// startRedisServer starts a server with extra arguments; a cluster node
// needs port+10000 free for its bus.
func startRedisServer(t testing.TB, cluster bool, args ...string) *RedisServer {
	t.Helper()
	s := &RedisServer{t: t, bin: redisBinary(t, "redis-server"), dir: t.TempDir(), args: args}
	t.Cleanup(s.stop)
	var err error
	for range 5 { // a free port can be taken by someone else before we bind it
		if s.port, err = freePort(cluster); err != nil {
			continue
		}
		if err = s.start(); err == nil {
			return s
		}
	}
	t.Fatalf("testenv: redis-server did not start: %v", err)
	return nil
}

// Addr returns the server's host:port.
func (s *RedisServer) Addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port)) }

// Options returns fresh client options for the server, with context
// deadlines honoured on socket I/O.
func (s *RedisServer) Options() *redis.Options {
	return &redis.Options{Addr: s.Addr(), ContextTimeoutEnabled: true}
}

// Kill ends the process with SIGKILL and reaps it. Its data is gone.
func (s *RedisServer) Kill() {
	s.t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.kill()
}

// Restart starts the server again on the same port, empty, after killing it
// if it still runs, and waits until it answers PING.
func (s *RedisServer) Restart() {
	s.t.Helper()
	s.Kill()
	var err error
	for range 20 { // the port may linger briefly after the kill
		if err = s.start(); err == nil {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	s.t.Fatalf("testenv: redis-server did not restart on %s: %v", s.Addr(), err)
}

func (s *RedisServer) signal(sig os.Signal) {
	s.t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.proc == nil {
		s.t.Fatalf("testenv: redis-server on %s is not running", s.Addr())
	}
	if err := s.proc.cmd.Process.Signal(sig); err != nil {
		s.t.Fatalf("testenv: signal %v to redis-server: %v", sig, err)
	}
}

// start launches the process and waits for PING.
func (s *RedisServer) start() error {
	args := append([]string{
		"--port", strconv.Itoa(s.port),
		"--bind", "127.0.0.1",
		"--save", "",
		"--appendonly", "no",
		"--dir", s.dir,
		"--logfile", filepath.Join(s.dir, "redis.log"),
	}, s.args...)
	p, err := startProcess(s.bin, args)
	if err != nil {
		return err
	}
	if err := waitReady(s.Addr(), p); err != nil {
		p.kill()
		log, _ := os.ReadFile(filepath.Join(s.dir, "redis.log"))
		return fmt.Errorf("%w; log:\n%s", err, tail(log, 800))
	}
	s.mu.Lock()
	s.proc = p
	s.mu.Unlock()
	return nil
}

// kill ends the process; s.mu must be held.
func (s *RedisServer) kill() {
	if s.proc != nil {
		s.proc.kill()
		s.proc = nil
	}
}

func (s *RedisServer) stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.kill()
}

// waitReady PINGs addr until it answers, the process exits, or startTimeout.
func waitReady(addr string, p *process) error {
	c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, DialTimeout: 200 * time.Millisecond,
		ReadTimeout: 200 * time.Millisecond, WriteTimeout: 200 * time.Millisecond, PoolSize: 1})
	defer c.Close()
	deadline := time.Now().Add(startTimeout)
	var err error
	for delay := time.Millisecond; time.Now().Before(deadline); delay = min(2*delay, 100*time.Millisecond) {
		if err = c.Ping(context.Background()).Err(); err == nil {
			return nil
		}
		if p.exited() {
			return fmt.Errorf("redis-server on %s exited: %w", addr, err)
		}
		time.Sleep(delay) // between PINGs to a server still starting
	}
	return fmt.Errorf("redis-server on %s not ready after %v: %w", addr, startTimeout, err)
}

// freePort returns a loopback TCP port that was free a moment ago. With bus,
// port+10000 (a cluster node's bus port) was free too.
func freePort(bus bool) (int, error) {
	if !bus {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return 0, err
		}
		defer ln.Close()
		return ln.Addr().(*net.TCPAddr).Port, nil
	}
	for range 100 {
		p := 20000 + rand.IntN(20000)
		a, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
		if err != nil {
			continue
		}
		b, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p+10000)))
		_ = a.Close()
		if err != nil {
			continue
		}
		_ = b.Close()
		return p, nil
	}
	return 0, fmt.Errorf("no free port pair found")
}

func tail(b []byte, n int) []byte {
	if len(b) > n {
		return b[len(b)-n:]
	}
	return b
}
