package redislayer

import (
	"cmp"
	"context"
)

// Check tells whether the layer can work, in one round trip: a PING, and
// the layer's read script (get.lua, read-only) on a key under the prefix
// that no record uses, which shows that the server runs scripts and that
// the client's user may run them on the layer's keys. After a restart or
// SCRIPT FLUSH the script is loaded again, a second round trip. It is
// meant for readiness probes, and bounded by ctx like every call (a
// tiered.Store's Check gives it the Store's Redis timeout).
//
// It returns nil when Redis answers; an error wrapping idem.ErrConfig when
// the server refuses the setup — credentials refused (NOAUTH, WRONGPASS),
// an ACL that forbids the scripts or the prefix's keys (NOPERM), a DB
// number the server does not have, scripting unavailable —, with advice on
// what to change; and an error wrapping idem.ErrUnavailable when Redis
// cannot be reached or does not answer in time. The caller's cancellation
// comes back as it is. An ACL that allows the read but forbids a write the
// layer needs (SET, PUBLISH) passes Check and gets idem.ErrConfig from the
// first write.
func (l *Layer) Check(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	keys := []string{l.prefix + "{check}"} // a record's hash tag is a 64-digit digest
	p := l.client.Pipeline()
	ping := p.Ping(ctx)
	read := getScript.EvalSha(ctx, p, keys, "")
	_, execErr := p.Exec(ctx)
	// Exec alone reports a reply to setting the connection up (see
	// afterPTTL).
	err := cmp.Or(ping.Err(), read.Err(), execErr)
	if isNoScript(err) {
		err = getScript.Eval(ctx, l.client, keys, "").Err()
	}
	if err == nil || isNil(err) {
		return nil
	}
	return l.fail(ctx, "check", err)
}
