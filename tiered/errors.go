package tiered

import (
	"errors"
	"fmt"
)

// ErrClosed is returned by calls on a closed Store.
var ErrClosed = errors.New("tiered: store closed")

// PanicError is what every caller sharing an execution gets when fn panicked.
// The key was released, so a retry runs fn again.
type PanicError struct {
	// Value is what fn passed to panic.
	Value any
	// Stack is the panicking goroutine's stack.
	Stack []byte
}

// Error implements error.
func (e *PanicError) Error() string { return fmt.Sprintf("tiered: fn panicked: %v", e.Value) }

// Unwrap returns the panic value when it is an error.
func (e *PanicError) Unwrap() error {
	if err, ok := e.Value.(error); ok {
		return err
	}
	return nil
}
