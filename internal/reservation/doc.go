// Package reservation is the protocol behind idem.Reservation: how the code
// that runs an execution (tiered's Store, the HTTP middleware, the gRPC
// interceptor, the Watermill middleware) and the layer that completes it in
// a caller's transaction (sqllayer) speak about a reservation. Users read a
// reservation (idem.ReservationFrom) and complete it through a layer; they
// never make one, end one, or define its result, so none of that is in
// idem's API.
//
// The division, and why. Package idem imports this package and this package
// cannot import idem (the import would be a cycle), so it cannot name idem's
// types. It holds what needs none of them: a reservation's [State] (the
// result function, the completions written in transactions, the guard that
// a taken reservation must be completed, the end) and the rules on it
// ([CompleteWith], [State.End]). An idem.Reservation holds its State beside
// what users read (the key, the token, the deciding layer), in one
// allocation. The few steps that need idem's types — making a reservation
// and placing it on a context, finding the State of an *idem.Reservation,
// seeing through a layer that wraps another — are functions of idem's,
// which it gives this package once, as it initializes ([Link]): the pattern
// of protobuf's protoimpl, where generated code reaches what the runtime
// does not export. So idem exports only the vocabulary, the protocol has one
// home, and nothing here can drift from idem's view of a reservation.
//
// The functions given take idem's values as any where that costs nothing (a
// pointer, an interface); [NewContext], on the path of every execution a
// deciding tier claimed, takes the record typed by its caller's type, so
// that making a reservation converts no record to an interface, which would
// allocate it.
//
// The package imports the standard library only (idem's links nothing
// else). Nested modules import it (idemgrpc, idemwatermill): a release of
// one of them builds against later releases of the core, and the API check
// does not look at internal packages, so its exported names change only by
// being added to, as if they were exported by the core.
package reservation
