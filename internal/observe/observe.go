package observe

import (
	"context"

	"github.com/idemkit/idem"
)

// key is the context key of the observer.
type key struct{}

// NewContext returns ctx carrying o: a Store puts its observer on the
// context of every call it makes to a layer, and of its janitor's run.
func NewContext(ctx context.Context, o idem.Observer) context.Context {
	return context.WithValue(ctx, key{}, o)
}

// FromContext returns the observer ctx carries, or nil.
func FromContext(ctx context.Context) idem.Observer {
	o, _ := ctx.Value(key{}).(idem.Observer)
	return o
}
