//go:build unix

package testenv

import "syscall"

// Pause stops the process with SIGSTOP: connections stay open but nothing
// answers, as with a server stuck in a long command or a frozen VM.
func (s *RedisServer) Pause() { s.signal(syscall.SIGSTOP) }

// Resume continues a paused server with SIGCONT.
func (s *RedisServer) Resume() { s.signal(syscall.SIGCONT) }
