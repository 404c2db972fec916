// Package fingerprint decides what "the same request" means: it turns a
// request, or a message body, into a fixed-length digest of what it asks
// for, leaving out what changes between two attempts at the same thing
// (timestamps, trace IDs, nonces). The idempotency layers compare these
// digests: the same key with a different fingerprint is a client error,
// never a replay.
//
// A fingerprint must be neither too weak nor too strong. One that hashes a
// trace ID makes a client's retry look like a new request, and a retry can
// then charge twice; one that leaves out a real field merges two real
// orders.
//
// # Canonical JSON
//
// Canonicalize implements RFC 8785, the JSON Canonicalization Scheme:
// member names sorted by their UTF-16 code units, no insignificant
// whitespace, numbers written as ECMAScript's Number.prototype.toString
// writes them (shortest round-trip digits; plain notation for magnitudes
// from 1e-6 up to, not including, 1e21, so 0.000001 and 1e-7, 1e+21; -0 as
// 0), strings with only '"', '\' and
// the control characters escaped (\b \t \n \f \r, others as \u00xx in
// lower-case hex) and everything else as literal UTF-8. Key order,
// whitespace and number spelling (1.0, 1e0, 10E-1) therefore never change a
// fingerprint.
//
// A Builder hashes RFC 8785 with exact integers, and refuses names that
// differ only in case (see "What the same request means to a Go server"
// below); Builder.Canonicalize shows that form. Canonicalize itself is RFC
// 8785 alone.
//
// # What the same request means to a Go server
//
// Two requests must share a fingerprint only if the handler cannot tell
// them apart, and a Go handler reads JSON with encoding/json, which
// differs from RFC 8785 in two places. A Builder follows the handler in
// both.
//
// Member names. encoding/json fills a struct field from the member whose
// name equals the field's name or, when none does, from a member whose
// name equals it under Unicode simple case folding (bytes.EqualFold:
// "amount" and "AMOUNT"; "k", "K" and U+212A KELVIN SIGN; "s", "S" and
// U+017F LONG S; Σ, σ and ς); when several match, the last one wins. So
// {"amount":100,"AMOUNT":5} and {"AMOUNT":5,"amount":100}, one object to
// RFC 8785, are 5 and 100 to the handler. A Builder refuses an object with
// two names that differ but are equal under that folding
// (ErrAmbiguousMember), at any depth, whatever the field lists say: no
// client means both, and the order of members is exactly what a
// fingerprint must not depend on. Names that only look alike ("ss" and
// "ß", "i" and "İ") are different names to encoding/json and to a Builder.
//
// For the same reason a name in an allow path reaches every member whose
// name folds to it: with WithAllow("amount"), {"Amount":5} counts its 5,
// which the handler reads as the amount. Deny paths match exactly, which
// at worst counts a case variant of a noisy field.
//
// A server that matches names exactly (decoding into maps, or with
// encoding/json/v2's default options) can say so with
// WithCaseSensitiveNames(true): such bodies are then accepted and allow
// paths match exactly. encoding/json/v2's case-insensitive matching
// (MatchCaseInsensitiveNames, `json:",case:ignore"`) also ignores '_' and
// '-', which no Builder checks: a handler that uses it may read "order_id"
// and "orderid" as one field. Query strings and form bodies are not
// checked for such names, since url.Values matches names exactly; a
// framework that binds them case-insensitively when no name matches
// exactly (Echo's Bind does) is not covered.
//
// Integers. encoding/json decodes a number written as an integer into an
// int64 or a uint64 exactly, while RFC 8785 rounds every number to a
// double: 9007199254740993 (2^53+1) and 9007199254740992 are one number to
// it and two to the handler. A Builder writes a number that has neither a
// fraction nor an exponent by its digits (-0 as 0). Up to 2^53 in
// magnitude those digits are its RFC 8785 form, so only larger integers
// come out differently: 18446744073709551616 and 18446744073709552000, or
// 1000000000000000000000 and 1e21, get different fingerprints. A number
// with a fraction or an exponent keeps its RFC 8785 form, so 1.0 and 1
// still share one (an int64 field would refuse 1.0). An integer must fit a
// double all the same: one beyond ±1.7976931348623157e308 fails with
// ErrNumberRange, as every number does.
//
// # Digests
//
// Every digest is DigestLen (67) characters: Prefix ("f1:") and the
// lower-case hex SHA-256 of a framed message. The message starts with a
// domain string; each part after it is a tag byte, a 64-bit length and its
// bytes, and parts are written in a fixed order (method, route, query,
// headers, body), so that no two different requests can collide by moving
// bytes from one part to the next. The same input gives the same digest on
// every machine and in every release that keeps the "f1:" prefix; a change
// to what is hashed gets a new prefix. One change was made within "f1:":
// integers beyond 2^53 in magnitude, once rounded to doubles, count by
// their digits, so a JSON body holding one has had two digests; every
// other body keeps its digest.
//
// # Field paths
//
// WithAllow and WithDeny take paths into a JSON body:
//
//	amount               the member "amount" of the top-level object
//	metadata.trace_id    the member "trace_id" of the object in "metadata"
//	items[*].client_ts   "client_ts" in every element of the array "items"
//	matrix[*][*]         every element of every array in "matrix"
//	[*].id               "id" in every element of a top-level array
//	*.nonce              "nonce" in any member of the top-level object
//	**.nonce             a member "nonce" at any depth, the top level included
//	meta\.data           the member "meta.data" ('\' escapes . [ ] * and \)
//
// A path is a list of steps, separated by '.'. A name step matches one
// object member whose name is exactly that (case-sensitive, compared with
// the unescaped member name); in an allow path it also matches a member
// whose name equals it under Unicode simple case folding, as encoding/json
// matches a struct field ("amount" reaches "Amount"), unless
// WithCaseSensitiveNames(true). "*" matches one member of any name. "[*]",
// written after a step, matches one element of an array, any index; it
// never matches an object member, and a name step never matches an array
// element, so "items.client_ts" does not reach into an array of items:
// write "items[*].client_ts". "**" matches zero or more steps of either
// kind: "**.nonce" matches "nonce", "a.nonce" and "items[3].nonce";
// "a.**.id" matches "a.id", "a.b.id" and "a[0].id". A path must name
// something besides "**". A path that matches a value matches all of it.
//
// A deny path drops the member it matches, value and name, from its object;
// an array element it matches is written as null, so array lengths always
// count. With an allow-list, a value counts only when an allow path matches
// it or one of its ancestors (deny paths still apply inside it). The
// objects and arrays on the way to such values are kept as containers: an
// object there keeps only the members that count and is dropped from its
// parent when none does; an array there keeps every position, writing null
// for an element in which nothing counts, and is dropped only when empty; a
// scalar there does not count. The top-level value is always written ({}
// or [] when nothing in it counts, null for a scalar). A deny path always
// wins over an allow path.
//
// # Default deny-list
//
// Unless WithDefaultDeny(false) is given, these member names never count,
// at any depth (the paths are "**.name"):
//
//	name                           why it is noise
//	timestamp                      the time an attempt was sent
//	nonce                          a value unique to each attempt
//	trace_id, traceId              distributed-tracing trace ID
//	span_id, spanId                distributed-tracing span ID
//	request_id, requestId          an ID of the attempt, not of the intent
//	correlation_id, correlationId  a log correlation ID
//	traceparent, tracestate        W3C Trace Context copied into a body
//
// Names that often carry business meaning are deliberately absent: id,
// created_at, updated_at, date, time, ts, version, event_id, message_id,
// idempotency_key. Add what your clients send with WithDeny, for instance
// WithDeny("items[*].client_ts", "metadata.sent_at").
//
// # Requests
//
// Builder.Request hashes, each only when configured: the method (default
// on), the route (default DefaultRoute, the escaped URL path), the query
// parameters (default all; WithQueryAllow and WithQueryDeny select by name;
// names and values are unescaped, sorted by name, the values of a repeated
// name kept in the order sent, since their order may matter to a handler),
// the headers named by WithHeaders (default none; all values in order) and
// the body. It leaves r.Body readable for the handler.
// Builder.RequestBody does the same for a body the caller has read already.
//
// Bodies by media type (Content-Type without its parameters):
//
//	application/json, */*+json     canonical JSON, allow- and deny-lists applied
//	application/x-www-form-urlencoded   fields sorted by name (values in order),
//	                               the lists applied to the field names
//	anything else, or a Content-Encoding other than identity
//	                               the bytes as sent, with the media type
//	empty                          its own case, whatever the media type
//
// The media type of a JSON body counts too, so a JSON merge patch and the
// same bytes as application/json differ. Builder.Sum hashes a body alone
// as application/json.
//
// # Repeated requests
//
// A retry usually repeats its request byte for byte. Each Builder remembers
// the digests of the last few thousand requests and bodies whose body it
// canonicalized, under a SHA-256 of everything the digest is computed from
// (the request parts, media type, encoding and raw body), so a repeated
// request costs one pass of SHA-256 over its bytes instead of a
// canonicalization: about a third of the time for a 1 KiB JSON body, and no
// allocation. The memo is exact (two inputs share an entry only if SHA-256
// collides) and bounded (a fixed table, where a newcomer replaces whatever
// held its slot). So that a request seen once pays nothing for it, the
// SHA-256 is paid only from a second sighting, which a fast
// non-cryptographic hash of the same inputs detects: a new request costs
// that hash on top of the canonicalization, its first repeat the SHA-256 as
// well (and it is remembered then), and every later repeat the SHA-256
// alone.
//
// # Bad input
//
// Nothing panics and nothing takes time out of proportion to the input:
// the scanner is a single pass with an explicit stack. Each error below is
// a sentinel, returned wrapped with a reason and, where it helps, the byte
// offset, and checked with errors.Is. Request and RequestBody return them
// for JSON bodies too; an HTTP layer answers them with 400 (413 for
// ErrBodyTooLarge).
//
//	invalid JSON (syntax, trailing data, blank input)            ErrInvalidJSON
//	two members of one object with the same name                 ErrDuplicateMember
//	two members of one object whose names are equal under
//	  Unicode simple case folding, as encoding/json matches
//	  them (a Builder only; see WithCaseSensitiveNames)          ErrAmbiguousMember
//	a number beyond ±1.7976931348623157e308                      ErrNumberRange
//	  (a number too small to represent rounds to 0, as in JSON.parse)
//	invalid UTF-8, a raw control character, a bad escape,
//	  or a \u escape naming a lone surrogate                     ErrInvalidString
//	nesting deeper than WithMaxDepth (default 1000; at most
//	  10,000, MaxDepthLimit)                                     ErrTooDeep
//	a body over WithMaxBytes (default 16 MiB; at most 1 GiB,
//	  HardMaxBytes)                                              ErrBodyTooLarge
//	a malformed path given to WithAllow or WithDeny (from New)   ErrInvalidPath
//
// Empty input is invalid JSON to Canonicalize and Builder.Canonicalize;
// Sum, Request and RequestBody take an empty body as a case of its own. The
// input errors hold even where a deny-list drops the offending value:
// whether a body is valid never depends on the field lists. Unicode
// noncharacters (U+FFFF and the like) are accepted, as JSON.parse accepts
// them. A query string or form body is never an error: a piece with a
// malformed % escape counts as written, marked so that it equals no
// well-formed one.
package fingerprint
