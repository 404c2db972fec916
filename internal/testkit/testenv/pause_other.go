//go:build !unix

package testenv

// Pause would stop the process, but only Unix can stop one and continue it
// later: the test that needs a paused server is skipped here.
func (s *RedisServer) Pause() {
	s.t.Helper()
	s.t.Skip("testenv: pausing a server needs SIGSTOP, which only Unix has")
}

// Resume continues a paused server; Pause never pauses one here.
func (s *RedisServer) Resume() {}
