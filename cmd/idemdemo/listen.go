package main

import (
	"context"
	"errors"
	"net"
	"net/http"
	"time"
)

// listenOn serves in's handler on addr as well; the returned func stops it.
func listenOn(addr string, in *instance) (stop func(), err error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	srv := &http.Server{Handler: in.srv.Handler, ReadHeaderTimeout: 5 * time.Second, ConnContext: withConn}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			_ = err
		}
	}()
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
		<-done
	}, nil
}
